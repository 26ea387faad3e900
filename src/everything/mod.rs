//! Segment everything: masks for a whole image from a grid of single-click prompts, filtered and
//! de-duplicated the way SAM2's automatic mask generator does it (`SAM2AutomaticMaskGenerator`,
//! same parameters, same defaults, same order of steps).
//!
//! Per crop of the image (the whole image, then, with `crop_n_layers > 0`, overlapping crops
//! layer by layer): encode the crop once; run the grid's points through the decoder in batches
//! of `points_per_batch` single-click prompts; keep a candidate when its predicted IoU is above
//! `pred_iou_thresh` and its stability score (the IoU of the mask thresholded at
//! `mask_threshold ± stability_score_offset`) is at least `stability_score_thresh`; drop masks
//! whose box touches a crop edge that is not an image edge; then box NMS within the crop, and
//! across crops (preferring smaller crops).
//!
//! Memory: only the low-res logits of one batch and one crop-size buffer per worker thread exist
//! at a time; every kept mask is held run-length encoded ([`Rle`]) and decoded on request.
//!
//! Files: this one runs the generator (crops, batches, the budgets as it goes, the merge across
//! crops); `options.rs` holds the options, their checks and the cost of a request; `grid.rs` the
//! points and the crops; `masks.rs` a candidate's mask, its filters and the box NMS.

use rayon::prelude::*;

use crate::embedding::Embedding;
use crate::encoder::Encoder;
use crate::error::{try_reserve, try_with_capacity, Error, Result};
use crate::image::ImageView;
use crate::predictor::{Point, PredictOptions, Predictor, Prompt};
use crate::preprocess::taps;
use crate::rle::Rle;

mod grid;
mod masks;
mod options;

pub(crate) use grid::crop_boxes;
#[cfg(feature = "test-support")]
pub(crate) use grid::point_grid;
use masks::{make_mask, nms, Geometry, Kept, Scratch};
use options::human;
pub use options::{
    EverythingCost, EverythingOptions, DEFAULT_MAX_CLICKS, DEFAULT_MAX_MEMORY_BYTES,
};
pub use options::{MAX_CROP_LAYERS, MAX_GRID_POINTS};

/// One mask found in the image.
#[derive(Debug, Clone, PartialEq)]
pub struct EverythingMask {
    /// The mask at the image's size.
    pub rle: Rle,
    /// Inclusive `[x_min, y_min, x_max, y_max]` in image pixels (zeros for an empty mask).
    pub bbox: [u32; 4],
    /// Pixels in the mask.
    pub area: u64,
    /// The decoder's prediction of the mask's IoU.
    pub predicted_iou: f32,
    /// IoU of the mask thresholded at `mask_threshold + offset` and at `mask_threshold - offset`.
    pub stability_score: f32,
    /// The click that made it, in image pixels.
    pub point: [f32; 2],
    /// The crop it was found in: `[x0, y0, x1, y1]`, `x1`/`y1` exclusive.
    pub crop_box: [u32; 4],
}

/// The masks of one image, in SAM2's order (by predicted IoU within a crop, best first).
#[derive(Debug, Clone)]
pub struct Everything {
    pub width: usize,
    pub height: usize,
    pub masks: Vec<EverythingMask>,
}

/// A progress callback of segment everything: called with `(clicks done, clicks in all)` before
/// each crop is encoded and after each batch of clicks; returning `false` cancels the call, which
/// then fails with [`Error::Interrupted`]. Runs on the calling thread.
pub type Progress<'a> = &'a (dyn Fn(u64, u64) -> bool + Sync);

/// Segments everything in `image`: encodes the image (and each crop) with `encoder`, then runs
/// the generator. The one call a command line or a host needs.
pub fn segment_everything(
    image: &ImageView<'_>,
    encoder: &Encoder,
    predictor: &Predictor,
    options: &EverythingOptions,
) -> Result<Everything> {
    segment_everything_with_progress(image, encoder, predictor, options, None)
}

/// [`segment_everything`] with a progress callback that can cancel it (see [`Progress`]).
pub fn segment_everything_with_progress(
    image: &ImageView<'_>,
    encoder: &Encoder,
    predictor: &Predictor,
    options: &EverythingOptions,
    progress: Option<Progress<'_>>,
) -> Result<Everything> {
    let (w, h) = (image.width, image.height);
    let cost = options.validate_for(w, h, predictor)?;
    predictor.check_encoder(encoder)?;
    let crops = crop_boxes(w, h, options.crop_n_layers, options.crop_overlap_ratio);
    let mut run = Run::new(options, cost, progress);
    let mut found = Vec::new();
    for &(crop, layer) in &crops {
        run.tick()?;
        let view = crop_view(image, crop)?;
        let embedding = encoder.encode(&view)?;
        let masks = process_crop(&embedding, predictor, &mut run, crop, layer, (w, h))?;
        try_reserve(&mut found, masks.len(), "the masks found")?;
        run.held_before += masks.iter().map(|m| held(&m.rle)).sum::<u64>();
        found.extend(masks);
    }
    run.tick()?;
    finish(found, crops.len(), (w, h), options)
}

/// Segments everything on an image already encoded (no crops: `crop_n_layers` must be 0, since
/// crops need encodes of their own; use [`segment_everything`] for those).
pub fn segment_everything_embedding(
    embedding: &Embedding,
    predictor: &Predictor,
    options: &EverythingOptions,
) -> Result<Everything> {
    segment_everything_embedding_with_progress(embedding, predictor, options, None)
}

/// [`segment_everything_embedding`] with a progress callback that can cancel it (see
/// [`Progress`]).
pub fn segment_everything_embedding_with_progress(
    embedding: &Embedding,
    predictor: &Predictor,
    options: &EverythingOptions,
    progress: Option<Progress<'_>>,
) -> Result<Everything> {
    options.validate()?;
    if options.crop_n_layers != 0 {
        return Err(Error::invalid(
            "crop_n_layers",
            "must be 0 on an embedding (crops are encoded separately): pass the image instead",
        ));
    }
    let (w, h) = embedding.image_size();
    let (w, h) = (w as usize, h as usize);
    let cost = options.validate_for(w, h, predictor)?;
    let mut run = Run::new(options, cost, progress);
    run.tick()?;
    let crop = [0, 0, w as u32, h as u32];
    let found = process_crop(embedding, predictor, &mut run, crop, 0, (w, h))?;
    run.tick()?;
    finish(found, 1, (w, h), options)
}

/// Bytes a kept mask holds, for the memory budget.
fn held(rle: &Rle) -> u64 {
    (rle.held_bytes() + std::mem::size_of::<EverythingMask>()) as u64
}

/// One call's progress and budgets.
struct Run<'a> {
    options: &'a EverythingOptions,
    cost: EverythingCost,
    progress: Option<Progress<'a>>,
    /// Clicks run so far.
    done: u64,
    /// Bytes of the masks kept from the crops finished.
    held_before: u64,
}

impl<'a> Run<'a> {
    fn new(
        options: &'a EverythingOptions,
        cost: EverythingCost,
        progress: Option<Progress<'a>>,
    ) -> Self {
        Run {
            options,
            cost,
            progress,
            done: 0,
            held_before: 0,
        }
    }

    /// Reports progress; the callback's `false` cancels.
    fn tick(&self) -> Result<()> {
        match self.progress {
            Some(progress) if !progress(self.done, self.cost.clicks) => Err(Error::Interrupted {
                what: "segment everything",
                done: self.done,
                total: self.cost.clicks,
                unit: "clicks",
            }),
            _ => Ok(()),
        }
    }

    /// Refuses to go on when the candidates held (`held_now` bytes in this crop, and the masks of
    /// earlier crops) and one batch's needs pass the memory budget.
    fn check_memory(&self, held_now: u64, candidates: usize) -> Result<()> {
        let total = self.cost.batch_bytes + self.held_before + held_now;
        if total > self.options.max_memory_bytes {
            return Err(Error::invalid(
                "max_memory_bytes",
                format!(
                    "after {} of {} clicks segment everything holds {} ({candidates} candidate \
                     masks of this crop, {} from earlier crops, {} for a batch), over the budget \
                     of {} (max_memory_bytes); raise pred_iou_thresh or stability_score_thresh \
                     so that fewer candidates are kept, use fewer points, or raise \
                     max_memory_bytes",
                    self.done,
                    self.cost.clicks,
                    human(total),
                    human(self.held_before),
                    human(self.cost.batch_bytes),
                    human(self.options.max_memory_bytes)
                ),
            ));
        }
        Ok(())
    }
}

/// The pixels of `crop` as an image view over the same buffer (same stride).
fn crop_view<'a>(image: &ImageView<'a>, crop: [u32; 4]) -> Result<ImageView<'a>> {
    let [x0, y0, x1, y1] = crop.map(|v| v as usize);
    if (x0, y0, x1, y1) == (0, 0, image.width, image.height) {
        return Ok(*image);
    }
    let start = y0 * image.stride + x0 * image.format.channels();
    ImageView::new(
        &image.data[start..],
        x1 - x0,
        y1 - y0,
        image.stride,
        image.format,
    )
}

/// Cross-crop NMS (when there are several crops), preferring masks of smaller crops.
fn finish(
    mut found: Vec<EverythingMask>,
    crops: usize,
    (width, height): (usize, usize),
    options: &EverythingOptions,
) -> Result<Everything> {
    if crops > 1 && !found.is_empty() {
        let scores: Vec<f32> = found
            .iter()
            .map(|m| {
                let [x0, y0, x1, y1] = m.crop_box;
                1.0 / ((x1 - x0) as f32 * (y1 - y0) as f32)
            })
            .collect();
        let boxes: Vec<[u32; 4]> = found.iter().map(|m| m.bbox).collect();
        let keep = nms(&boxes, &scores, options.crop_nms_thresh)?;
        let mut slots: Vec<Option<EverythingMask>> = found.into_iter().map(Some).collect();
        found = keep
            .iter()
            .map(|&i| slots[i].take().expect("kept once"))
            .collect();
    }
    Ok(Everything {
        width,
        height,
        masks: found,
    })
}

fn process_crop(
    embedding: &Embedding,
    predictor: &Predictor,
    run: &mut Run<'_>,
    crop: [u32; 4],
    layer: u32,
    (image_w, image_h): (usize, usize),
) -> Result<Vec<EverythingMask>> {
    let options = run.options;
    let (crop_w, crop_h) = embedding.image_size();
    let (crop_w, crop_h) = (crop_w as usize, crop_h as usize);
    let low_res = predictor.spec().low_res_size;
    let geometry = Geometry {
        crop,
        crop_w,
        crop_h,
        image_w,
        image_h,
        low_res,
        xt: taps(low_res, crop_w),
        yt: taps(low_res, crop_h),
    };
    // SAM2 scales the normalised grid by the crop's size in float64, then rounds to float32.
    let points: Vec<[f32; 2]> = options
        .grid(layer)
        .iter()
        .map(|p| [(p[0] * crop_w as f64) as f32, (p[1] * crop_h as f64) as f32])
        .collect();
    let predict = PredictOptions {
        multimask: options.multimask,
    };
    let mut kept: Vec<Kept> = Vec::new();
    let mut held_now = 0u64;
    for batch in points.chunks(options.points_per_batch) {
        let prompts: Vec<Prompt> = batch
            .iter()
            .map(|&[x, y]| Prompt {
                points: vec![Point {
                    x,
                    y,
                    positive: true,
                }],
                ..Default::default()
            })
            .collect();
        let prediction = predictor.predict_low_res(embedding, &prompts, predict)?;
        let per_point = prediction.candidates;
        // SAM2's order: the predicted-IoU filter first (no pixels touched), then the masks.
        let survivors: Vec<usize> = (0..prediction.scores.len())
            .filter(|&k| {
                options.pred_iou_thresh <= 0.0 || prediction.scores[k] > options.pred_iou_thresh
            })
            .collect();
        let made: Vec<Option<Kept>> = survivors
            .par_iter()
            .map_init(Scratch::default, |scratch, &k| {
                make_mask(
                    prediction.low_res_logits(k),
                    prediction.scores[k],
                    batch[k / per_point],
                    &geometry,
                    options,
                    scratch,
                )
            })
            .collect::<Result<_>>()?;
        drop(prediction);
        let made = made.into_iter().flatten();
        try_reserve(&mut kept, survivors.len(), "the candidate masks")?;
        for m in made {
            held_now += (m.rle.held_bytes() + std::mem::size_of::<Kept>()) as u64;
            kept.push(m);
        }
        run.done += batch.len() as u64;
        run.check_memory(held_now, kept.len())?;
        run.tick()?;
    }

    // Duplicates within the crop, the best predicted IoU first.
    let boxes: Vec<[u32; 4]> = kept.iter().map(|m| m.bbox).collect();
    let scores: Vec<f32> = kept.iter().map(|m| m.predicted_iou).collect();
    let keep = nms(&boxes, &scores, options.box_nms_thresh)?;
    let mut slots: Vec<Option<Kept>> = kept.into_iter().map(Some).collect();
    let [x0, y0, _, _] = crop;
    let mut out = try_with_capacity(keep.len(), "the masks found")?;
    out.extend(keep.iter().map(|&i| {
        let m = slots[i].take().expect("kept once");
        let [bx0, by0, bx1, by1] = m.bbox;
        // An empty mask's box stays zeros (moved by the crop's corner it named a pixel, and
        // empty masks of different crops escaped the cross-crop suppression as different boxes).
        let bbox = if m.area == 0 {
            [0; 4]
        } else {
            [bx0 + x0, by0 + y0, bx1 + x0, by1 + y0]
        };
        EverythingMask {
            rle: m.rle,
            bbox,
            area: m.area,
            predicted_iou: m.predicted_iou,
            stability_score: m.stability_score,
            point: [m.point[0] + x0 as f32, m.point[1] + y0 as f32],
            crop_box: crop,
        }
    }));
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::masks::{remove_small_regions, upsample_with_stability};
    use super::*;
    use crate::postprocess;

    #[test]
    fn the_grid_is_sam2s_cell_centres_rows_first() {
        let g = point_grid(4);
        assert_eq!(g.len(), 16);
        assert_eq!(g[0], [0.125, 0.125]);
        assert_eq!(g[1], [0.375, 0.125]);
        assert_eq!(g[4], [0.125, 0.375]);
        assert_eq!(g[15], [0.875, 0.875]);
        assert_eq!(point_grid(1), vec![[0.5, 0.5]]);
    }

    #[test]
    fn crop_boxes_overlap_and_cover_the_image_as_sam2s_do() {
        // SAM2's generate_crop_boxes((1080, 1920), 1, 512 / 1500): short side 1080, overlap
        // int(512/1500 · 1080) = 368, crops ceil((368 + 1920) / 2) = 1144 by ceil((368 + 1080) / 2)
        // = 724, columns outer.
        let b = crop_boxes(1920, 1080, 1, 512.0 / 1500.0);
        assert_eq!(
            b,
            vec![
                ([0, 0, 1920, 1080], 0),
                ([0, 0, 1144, 724], 1),
                ([0, 356, 1144, 1080], 1),
                ([776, 0, 1920, 724], 1),
                ([776, 356, 1920, 1080], 1),
            ]
        );
    }

    #[test]
    fn nms_keeps_the_best_of_overlapping_boxes_and_ties_in_input_order() {
        let boxes = [
            [0, 0, 10, 10],
            [1, 1, 10, 10],
            [20, 20, 30, 30],
            [0, 0, 10, 10],
        ];
        assert_eq!(nms(&boxes, &[0.5, 0.9, 0.1, 0.9], 0.7).unwrap(), vec![1, 2]);
        // Equal scores: the earlier box wins.
        assert_eq!(nms(&boxes[..1], &[1.0], 0.7).unwrap(), vec![0]);
        assert_eq!(
            nms(&[[0, 0, 10, 10], [0, 0, 10, 10]], &[1.0, 1.0], 0.7).unwrap(),
            vec![0]
        );
        // Boxes of no area (one-pixel-wide masks, single pixels): the same box twice is one.
        assert_eq!(
            nms(
                &[[3, 0, 3, 9], [3, 0, 3, 9], [4, 0, 4, 9], [0, 0, 0, 0]],
                &[1.0, 0.9, 0.8, 0.7],
                0.7
            )
            .unwrap(),
            vec![0, 2, 3]
        );
        // An IoU exactly at the threshold is kept (torchvision drops only above it).
        assert_eq!(
            nms(&[[0, 0, 10, 10], [0, 0, 10, 5]], &[1.0, 0.5], 0.5).unwrap(),
            vec![0, 1]
        );
    }

    #[test]
    fn small_holes_are_filled_and_small_specks_removed_eight_connected() {
        let side = 8;
        let mut logits = vec![-5.0f32; side * side];
        // A 4×4 square with a one-pixel hole, and a two-pixel diagonal speck elsewhere.
        for y in 1..5 {
            for x in 1..5 {
                logits[y * side + x] = 5.0;
            }
        }
        logits[2 * side + 2] = -5.0;
        logits[6 * side + 6] = 5.0;
        logits[7 * side + 7] = 5.0;
        remove_small_regions(&mut logits, side, 0.0, 2);
        assert_eq!(logits[2 * side + 2], 10.0, "hole filled");
        assert_eq!(logits[6 * side + 6], -10.0, "speck removed");
        assert_eq!(
            logits[7 * side + 7],
            -10.0,
            "diagonal neighbour is the same speck"
        );
        assert_eq!(logits[side + 1], 5.0, "the square stays");
    }

    #[test]
    fn the_stability_counts_and_the_mask_follow_the_thresholds() {
        // A ramp from -3.5 to 3.5 across 8 columns, upsampled 1:1: thresholds at 0 ± 1.
        let side = 8;
        let logits: Vec<f32> = (0..side * side).map(|i| (i % side) as f32 - 3.5).collect();
        let g = Geometry {
            crop: [0, 0, 8, 8],
            crop_w: 8,
            crop_h: 8,
            image_w: 8,
            image_h: 8,
            low_res: side,
            xt: taps(side, 8),
            yt: taps(side, 8),
        };
        let mut rows = Vec::new();
        let mut mask = vec![0u8; 64];
        let (high, low) = upsample_with_stability(&logits, &g, 0.0, 1.0, &mut rows, &mut mask);
        // Columns of value 1.5, 2.5, 3.5 are above 1; -0.5 and up are above -1.
        assert_eq!((high, low), (3 * 8, 5 * 8));
        assert_eq!(&mask[..8], &[0, 0, 0, 0, 1, 1, 1, 1]);
    }

    #[test]
    fn the_generators_masks_are_the_predictors_masks() {
        // Same logits, odd sizes: the pass that also counts for the stability score must
        // threshold exactly as `predict` does.
        let side = 256;
        let logits: Vec<f32> = (0..side * side)
            .map(|i| ((i * 7919 % 1013) as f32 / 101.3 - 5.0) * if i % 3 == 0 { -1.0 } else { 1.0 })
            .collect();
        let (w, h) = (801, 333);
        let g = Geometry {
            crop: [0, 0, w as u32, h as u32],
            crop_w: w,
            crop_h: h,
            image_w: w,
            image_h: h,
            low_res: side,
            xt: taps(side, w),
            yt: taps(side, h),
        };
        let (mut rows, mut ours, mut theirs) = (Vec::new(), vec![0u8; w * h], vec![0u8; w * h]);
        let (high, low) = upsample_with_stability(&logits, &g, 0.0, 1.0, &mut rows, &mut ours);
        postprocess::upsample_threshold(&logits, side, side, w, h, &mut theirs);
        assert!(ours == theirs, "masks differ");
        let area = ours.iter().map(|&v| v as u64).sum::<u64>();
        assert!(high <= area && area <= low, "{high} <= {area} <= {low}");
    }

    #[test]
    fn options_sam2_would_refuse_are_refused_by_name() {
        let bad = |o: EverythingOptions| match o.validate() {
            Err(Error::InvalidArgument { name, .. }) => name,
            other => panic!("{o:?}: {other:?}"),
        };
        let d = EverythingOptions::default();
        d.validate().unwrap();
        assert_eq!(
            bad(EverythingOptions {
                points_per_batch: 0,
                ..d.clone()
            }),
            "points_per_batch"
        );
        assert_eq!(
            bad(EverythingOptions {
                pred_iou_thresh: f32::NAN,
                ..d.clone()
            }),
            "pred_iou_thresh"
        );
        assert_eq!(
            bad(EverythingOptions {
                point_grids: Some(vec![vec![[0.5, 0.5]]]),
                ..d.clone()
            }),
            "point_grids"
        );
        assert_eq!(
            bad(EverythingOptions {
                points_per_side: 0,
                point_grids: Some(vec![vec![[1.5, 0.5]]]),
                ..d.clone()
            }),
            "point_grids"
        );
        assert_eq!(
            bad(EverythingOptions {
                points_per_side: 4,
                crop_n_layers: 2,
                crop_n_points_downscale_factor: 4,
                ..d.clone()
            }),
            "crop_n_points_downscale_factor"
        );
        assert_eq!(
            bad(EverythingOptions {
                crop_overlap_ratio: 1.0,
                ..d
            }),
            "crop_overlap_ratio"
        );
    }
}
