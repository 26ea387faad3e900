//! Segment everything on the generated tiny models and `testdata/shapes.ppm`: every
//! shape is found, once.
//!
//! Thresholds: SAM2's defaults (predicted IoU > 0.8, stability ≥ 0.95, box NMS 0.7), except the
//! grid, 16 × 16 points instead of 32 × 32 to keep the tests short (the generated decoders take
//! about 13 ms per click on 2 cores; the shapes are 90–140 pixels across, so every shape still
//! gets several clicks). A shape counts as found by a mask of IoU ≥ 0.9 with its ground truth
//! (both twins together, as one click on either selects both); it is found once when no other
//! mask overlaps it with an IoU ≥ 0.5.

use crate::common;

use common::*;
use sam2::everything::{
    segment_everything, segment_everything_embedding, segment_everything_with_progress, Everything,
    EverythingOptions,
};
use sam2::test_support::crop_boxes;
use sam2::{ImageView, PixelFormat};

const FOUND_IOU: f64 = 0.9;
const DUPLICATE_IOU: f64 = 0.5;

fn options() -> EverythingOptions {
    EverythingOptions {
        points_per_side: 16,
        ..Default::default()
    }
}

fn shapes_image() -> Image {
    read_pnm(&testdata("shapes.ppm"))
}

/// The objects a click can select: each shape, the twins as one.
fn objects() -> Vec<(String, Vec<u8>)> {
    let all = shapes();
    all.iter()
        .filter(|s| s.name != "twin_right")
        .map(|s| {
            let name = if s.twin_of.is_some() {
                "twins".to_string()
            } else {
                s.name.clone()
            };
            (name, expected_click_mask(s, &all))
        })
        .collect()
}

/// Checks each mask's own facts (its box and area agree with its pixels, its click lies in its
/// crop), then that every object is found once. Returns a line per object for the output.
fn check_every_shape_found_once(label: &str, result: &Everything) -> Vec<String> {
    let dense: Vec<Vec<u8>> = result
        .masks
        .iter()
        .map(|m| m.rle.decode().unwrap())
        .collect();
    for (m, d) in result.masks.iter().zip(&dense) {
        assert_eq!(
            m.area,
            d.iter().map(|&v| v as u64).sum::<u64>(),
            "{label}: area"
        );
        assert_eq!(m.area, m.rle.area(), "{label}: RLE area");
        if m.area > 0 {
            assert_eq!(Some(m.bbox), m.rle.bbox(), "{label}: box");
        }
        let [x0, y0, x1, y1] = m.crop_box.map(|v| v as f32);
        assert!(
            m.point[0] >= x0 && m.point[0] <= x1 && m.point[1] >= y0 && m.point[1] <= y1,
            "{label}: point {:?} outside its crop {:?}",
            m.point,
            m.crop_box
        );
        assert!(
            m.predicted_iou > 0.8 && m.stability_score >= 0.95,
            "{label}: filters"
        );
    }
    let mut lines = Vec::new();
    for (name, truth) in objects() {
        let ious: Vec<f64> = dense.iter().map(|d| iou(d, &truth)).collect();
        let found = ious.iter().filter(|&&v| v >= FOUND_IOU).count();
        let overlapping = ious.iter().filter(|&&v| v >= DUPLICATE_IOU).count();
        let best = ious.iter().cloned().fold(0.0, f64::max);
        assert_eq!(
            (found, overlapping),
            (1, 1),
            "{label}: {name} should be found once (IoU ≥ {FOUND_IOU}) with no duplicate (IoU ≥ \
             {DUPLICATE_IOU}); best IoU {best:.3}, masks {:?}",
            result
                .masks
                .iter()
                .map(|m| (m.bbox, m.area, m.predicted_iou))
                .collect::<Vec<_>>()
        );
        lines.push(format!("{name} {best:.3}"));
    }
    lines
}

#[test]
fn every_shape_is_found_once_with_sam2s_default_thresholds() {
    let img = shapes_image();
    let view = ImageView::packed(&img.data, img.width, img.height, PixelFormat::Rgb).unwrap();
    for pair in ["tiny_a", "tiny_b", "tiny_c"] {
        let (encoder, predictor) = open_pair(pair);
        let result = segment_everything(&view, &encoder, &predictor, &options()).unwrap();
        let lines = check_every_shape_found_once(pair, &result);
        println!(
            "{pair}: {} masks; best IoU per object: {}",
            result.masks.len(),
            lines.join(", ")
        );
        // The four objects and the background: nothing else passes the thresholds.
        assert_eq!(result.masks.len(), 5, "{pair}");
        // SAM2's order: best predicted IoU first.
        assert!(result
            .masks
            .windows(2)
            .all(|w| w[0].predicted_iou >= w[1].predicted_iou));
        for m in &result.masks {
            assert_eq!(m.crop_box, [0, 0, img.width as u32, img.height as u32]);
            assert_eq!((m.rle.width, m.rle.height), (img.width, img.height));
        }
    }
}

#[test]
fn an_embedding_gives_what_the_image_gives() {
    let img = shapes_image();
    let view = ImageView::packed(&img.data, img.width, img.height, PixelFormat::Rgb).unwrap();
    let (encoder, predictor) = open_pair("tiny_a");
    let from_image = segment_everything(&view, &encoder, &predictor, &options()).unwrap();
    let embedding = encoder.encode(&view).unwrap();
    let from_embedding = segment_everything_embedding(&embedding, &predictor, &options()).unwrap();
    assert_eq!(from_image.masks, from_embedding.masks);
    // Crops need encodes of their own, so an embedding refuses them.
    let crops = EverythingOptions {
        crop_n_layers: 1,
        ..options()
    };
    match segment_everything_embedding(&embedding, &predictor, &crops) {
        Err(sam2::Error::InvalidArgument { name, .. }) => assert_eq!(name, "crop_n_layers"),
        other => panic!("expected an invalid argument, got {other:?}"),
    }
}

#[test]
fn crops_find_every_shape_once_after_the_cross_crop_nms() {
    // One layer of 2 × 2 overlapping crops: the whole image with 12 × 12 points, each crop with
    // 12 × 12 too (no downscaling). Masks cut by a crop edge are dropped; a shape found in the
    // whole image and again in a crop is kept once (from the smaller crop).
    let img = shapes_image();
    let view = ImageView::packed(&img.data, img.width, img.height, PixelFormat::Rgb).unwrap();
    let (encoder, predictor) = open_pair("tiny_a");
    let options = EverythingOptions {
        points_per_side: 12,
        crop_n_layers: 1,
        ..Default::default()
    };
    let result = segment_everything(&view, &encoder, &predictor, &options).unwrap();
    let lines = check_every_shape_found_once("crops", &result);
    let crops: std::collections::BTreeSet<[u32; 4]> =
        result.masks.iter().map(|m| m.crop_box).collect();
    println!(
        "crops: {} masks from {} crops; best IoU per object: {}",
        result.masks.len(),
        crops.len(),
        lines.join(", ")
    );
    assert!(crops.len() > 1, "masks come from the crops too: {crops:?}");
}

#[test]
fn the_callers_points_replace_the_grid() {
    // One click in each shape, normalised: exactly the four objects (the right twin's click
    // selects the same pair as the left one's and is removed by the NMS).
    let img = shapes_image();
    let view = ImageView::packed(&img.data, img.width, img.height, PixelFormat::Rgb).unwrap();
    let (encoder, predictor) = open_pair("tiny_a");
    let points: Vec<[f64; 2]> = shapes()
        .iter()
        .map(|s| {
            [
                s.click.0 as f64 / img.width as f64,
                s.click.1 as f64 / img.height as f64,
            ]
        })
        .collect();
    let options = EverythingOptions {
        points_per_side: 0,
        point_grids: Some(vec![points]),
        ..Default::default()
    };
    let result = segment_everything(&view, &encoder, &predictor, &options).unwrap();
    check_every_shape_found_once("caller's points", &result);
    assert_eq!(result.masks.len(), 4);
}

#[test]
fn removing_small_regions_keeps_every_shape_found_once() {
    // SAM2's min_mask_region_area (holes and specks of the 256² logits up to 100 pixels, about
    // 300 image pixels here): the shapes have none, so the same objects are found.
    let img = shapes_image();
    let view = ImageView::packed(&img.data, img.width, img.height, PixelFormat::Rgb).unwrap();
    let (encoder, predictor) = open_pair("tiny_a");
    let options = EverythingOptions {
        min_mask_region_area: 100,
        ..options()
    };
    let result = segment_everything(&view, &encoder, &predictor, &options).unwrap();
    check_every_shape_found_once("min_mask_region_area", &result);
    assert_eq!(result.masks.len(), 5);
}

/// Tiny images with crop layers: the crops of layer 2 and beyond can fall outside an image a few
/// pixels across (7×5 with two layers panicked slicing the pixels; other sizes failed after
/// encoding the earlier crops, blaming `height`). Every crop made is now inside the image and
/// not empty, and every size segments with every layer count.
#[test]
fn tiny_images_segment_with_every_crop_layer_count() {
    let (encoder, predictor) = open_pair("tiny_a");
    for (w, h) in [
        (1, 1),
        (2, 1),
        (1, 3),
        (7, 5),
        (5, 7),
        (3, 16),
        (16, 3),
        (9, 9),
    ] {
        let pixels: Vec<u8> = (0..w * h * 3).map(|i| (i * 37 % 251) as u8).collect();
        let view = ImageView::packed(&pixels, w, h, PixelFormat::Rgb).unwrap();
        for layers in 0..=3 {
            for b in crop_boxes(w, h, layers, 512.0 / 1500.0) {
                let [x0, y0, x1, y1] = b.0;
                assert!(
                    x0 < x1 && y0 < y1 && x1 as usize <= w && y1 as usize <= h,
                    "{w}×{h}, {layers} layers: crop {:?}",
                    b
                );
            }
            let options = EverythingOptions {
                points_per_side: 2,
                crop_n_layers: layers,
                pred_iou_thresh: 0.0,
                stability_score_thresh: 0.0,
                ..Default::default()
            };
            let result = segment_everything(&view, &encoder, &predictor, &options)
                .unwrap_or_else(|e| panic!("{w}×{h} with {layers} crop layers: {e}"));
            assert_eq!((result.width, result.height), (w, h));
            for m in &result.masks {
                assert_eq!((m.rle.width, m.rle.height), (w, h));
            }
            // No mask twice: on an image this small, crops of a layer can be the whole image
            // or another layer's crop again.
            for (i, a) in result.masks.iter().enumerate() {
                for b in &result.masks[..i] {
                    assert!(
                        a.rle.counts != b.rle.counts,
                        "{w}×{h}, {layers} layers: a mask twice ({:?} and {:?}, from crops {:?} \
                         and {:?})",
                        a.bbox,
                        b.bbox,
                        a.crop_box,
                        b.crop_box
                    );
                }
            }
        }
    }
}

/// The documented maxima (1024 points per side, 4 crop layers) meant hours to weeks of work, and
/// a 65536² image was accepted: requests over the work or memory budget are refused before
/// anything runs, naming the budget and the figure, and a raised budget lets them through.
#[test]
fn requests_over_the_work_or_memory_budget_are_refused_up_front() {
    let (encoder, predictor) = open_pair("tiny_a");
    let img = shapes_image();
    let view = ImageView::packed(&img.data, img.width, img.height, PixelFormat::Rgb).unwrap();
    let refused = |o: &EverythingOptions, w: usize, h: usize| match o.validate_for(w, h, &predictor)
    {
        Err(sam2::Error::InvalidArgument { name, reason }) => (name, reason),
        other => panic!("expected a refusal, got {other:?}"),
    };
    // SAM2's documented maxima: 1024² clicks on each of 341 crops.
    let most = EverythingOptions {
        points_per_side: 1024,
        crop_n_layers: 4,
        ..Default::default()
    };
    let (name, reason) = refused(&most, 1920, 1080);
    println!("{reason}");
    assert_eq!(name, "max_clicks");
    assert!(
        reason.contains("357564416 clicks") && reason.contains("341 crops"),
        "{reason}"
    );
    // The same request through the call: refused before the first crop is encoded.
    let started = std::time::Instant::now();
    match segment_everything(&view, &encoder, &predictor, &most) {
        Err(sam2::Error::InvalidArgument { name, .. }) => assert_eq!(name, "max_clicks"),
        other => panic!("expected a refusal, got {:?}", other.map(|e| e.masks.len())),
    }
    assert!(started.elapsed().as_secs_f64() < 1.0);
    // A 65536² image: a crop-sized mask per worker thread alone is 4 GiB.
    let (name, reason) = refused(&EverythingOptions::default(), 65536, 65536);
    println!("{reason}");
    assert_eq!(name, "max_memory_bytes");
    assert!(
        reason.contains("65536×65536") && reason.contains("4.0 GiB"),
        "{reason}"
    );
    // Raised budgets let a request through.
    let raised = EverythingOptions {
        max_clicks: 1 << 40,
        ..most
    };
    let cost = raised.validate_for(1920, 1080, &predictor).unwrap();
    assert_eq!((cost.crops, cost.clicks), (341, 357_564_416));
    assert!(EverythingOptions::default()
        .validate_for(1920, 1080, &predictor)
        .is_ok());
}

/// With the thresholds at 0 every candidate is held until the crop's de-duplication (a
/// 65536×16 image at 128 points per side extrapolated to 33 GB): the candidates held are counted
/// after every batch, and passing the memory budget stops the call with an error naming it.
#[test]
fn holding_more_candidates_than_the_memory_budget_stops_the_call() {
    let (encoder, predictor) = open_pair("tiny_a");
    let img = shapes_image();
    let view = ImageView::packed(&img.data, img.width, img.height, PixelFormat::Rgb).unwrap();
    let embedding = encoder.encode(&view).unwrap();
    let everything = EverythingOptions {
        points_per_side: 8,
        points_per_batch: 8,
        pred_iou_thresh: 0.0,
        stability_score_thresh: 0.0,
        box_nms_thresh: 1.0,
        ..Default::default()
    };
    let all = segment_everything_embedding(&embedding, &predictor, &everything).unwrap();
    let cost = everything
        .validate_for(img.width, img.height, &predictor)
        .unwrap();
    let held: usize = all
        .masks
        .iter()
        .map(|m| m.rle.counts.len() * 4 + std::mem::size_of_val(m))
        .sum();
    println!(
        "{} masks hold {held} bytes; a batch needs {} bytes",
        all.masks.len(),
        cost.batch_bytes
    );
    // Room for a batch and about a third of the candidates.
    let tight = EverythingOptions {
        max_memory_bytes: cost.batch_bytes + held as u64 / 3,
        ..everything
    };
    match segment_everything_embedding(&embedding, &predictor, &tight) {
        Err(sam2::Error::InvalidArgument { name, reason }) => {
            println!("{reason}");
            assert_eq!(name, "max_memory_bytes");
            assert!(
                reason.contains("candidate masks") && reason.contains("of 64 clicks"),
                "{reason}"
            );
        }
        other => panic!(
            "expected the budget to stop it, got {:?}",
            other.map(|e| e.masks.len())
        ),
    }
}

/// A progress callback sees every click counted up to the total, and cancels the call when it
/// returns false: from another thread, through a flag the callback reads.
#[test]
fn progress_is_reported_and_another_thread_can_cancel() {
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::Mutex;
    let (encoder, predictor) = open_pair("tiny_a");
    let img = shapes_image();
    let view = ImageView::packed(&img.data, img.width, img.height, PixelFormat::Rgb).unwrap();
    let options = EverythingOptions {
        points_per_side: 6,
        points_per_batch: 8,
        crop_n_layers: 1,
        ..Default::default()
    };
    let seen = Mutex::new(Vec::new());
    let record = |done: u64, total: u64| {
        seen.lock().unwrap().push((done, total));
        true
    };
    segment_everything_with_progress(&view, &encoder, &predictor, &options, Some(&record)).unwrap();
    let seen = seen.into_inner().unwrap();
    // 5 crops of 36 clicks in batches of 8: a report before each crop's encode, one after each
    // of its 5 batches, and one at the end.
    assert_eq!(seen.first(), Some(&(0, 180)));
    assert_eq!(seen.last(), Some(&(180, 180)));
    assert!(seen.windows(2).all(|w| w[0].0 <= w[1].0), "{seen:?}");
    assert_eq!(seen.len(), 5 * 6 + 1, "{seen:?}");

    // Cancelled from another thread once the first crop is done.
    let stop = AtomicBool::new(false);
    let first_crop_done = AtomicBool::new(false);
    let result = std::thread::scope(|s| {
        s.spawn(|| {
            while !first_crop_done.load(Ordering::SeqCst) {
                std::thread::yield_now();
            }
            stop.store(true, Ordering::SeqCst);
        });
        let go_on = |done: u64, _total: u64| {
            if done >= 36 {
                first_crop_done.store(true, Ordering::SeqCst);
                // Give the other thread its moment; the next report sees its flag.
                while !stop.load(Ordering::SeqCst) {
                    std::thread::yield_now();
                }
            }
            !stop.load(Ordering::SeqCst)
        };
        segment_everything_with_progress(&view, &encoder, &predictor, &options, Some(&go_on))
    });
    match result {
        Err(e @ sam2::Error::Interrupted { .. }) => {
            let text = e.to_string();
            assert!(
                text.contains("cancelled") && text.contains("36 of 180 clicks"),
                "{text}"
            );
        }
        other => panic!("expected a cancel, got {:?}", other.map(|e| e.masks.len())),
    }
}
