//! `sam2 everything`: every mask of an image (SAM2's automatic mask generator).

use std::path::{Path, PathBuf};

use sam2::everything::{segment_everything_with_progress, EverythingOptions};
use sam2::{Encoder, ImageView, PixelFormat, Predictor};

use crate::common::{
    add_json, create_parent, image_json, init_runtime, load_encoder, load_picture, load_predictor,
    model_files, output_prefix, polygons_json, with_suffix,
};
use crate::failure::{exit, Failure};
use crate::{args, batch, picture, progress};

pub(crate) fn run(e: args::Everything) -> Result<(), Failure> {
    if let Some(source) = batch::image_source(&e.image) {
        return run_batch(e, source);
    }
    if let Some(shard) = e.shard {
        return Err(batch::shard_needs_a_batch(shard));
    }
    let (encoder_path, decoder_path) = model_files(&e.models)?;
    let decoder_path = decoder_path.ok_or_else(|| Failure::new(exit::USAGE, "no decoder given"))?;
    let picture = load_picture(&e.image, e.max_pixels)?;
    init_runtime(e.onnxruntime.as_deref())?;
    let models = load_models(&e, encoder_path, decoder_path)?;
    let out = output_prefix(&e.out, &e.image);
    let line = generate_and_write(&e, &models, &picture, &e.image, &out)?;
    eprintln!("sam2: {line}");
    Ok(())
}

/// What every image of a run is segmented with.
struct Models {
    encoder_path: PathBuf,
    decoder_path: PathBuf,
    encoder: Encoder,
    predictor: Predictor,
}

fn load_models(
    e: &args::Everything,
    encoder_path: PathBuf,
    decoder_path: PathBuf,
) -> Result<Models, Failure> {
    let encoder = load_encoder(&encoder_path, e.device)?;
    // Where the encoder's embeddings live (the device asked for, or the CPU it fell back to),
    // read in place.
    let predictor = load_predictor(&decoder_path, e.device, None, Some(&encoder))?;
    Ok(Models {
        encoder_path,
        decoder_path,
        encoder,
        predictor,
    })
}

/// Every image of a folder or a list file: `-o DIR/<name>.json` is the last file an image's
/// result renames into place, so an image whose JSON is there is done.
fn run_batch(e: args::Everything, source: batch::Source) -> Result<(), Failure> {
    let (encoder_path, decoder_path) = model_files(&e.models)?;
    let decoder_path = decoder_path.ok_or_else(|| Failure::new(exit::USAGE, "no decoder given"))?;
    let plan = batch::plan(&source, &e.out, e.shard)?;
    let prefix = |input: &batch::Input| e.out.join(&input.name);
    batch::run(
        plan,
        "images",
        |input| batch::exists(&with_suffix(&prefix(input), ".json")),
        || {
            init_runtime(e.onnxruntime.as_deref())?;
            load_models(&e, encoder_path.clone(), decoder_path.clone())
        },
        |models, input| {
            let picture = load_picture(&input.path, e.max_pixels)?;
            generate_and_write(&e, models, &picture, &input.path, &prefix(input)).map(drop)
        },
        || None,
    )
}

/// Every mask of `image`, written at the prefix `out`; returns the summary line.
fn generate_and_write(
    e: &args::Everything,
    models: &Models,
    picture: &picture::Picture,
    image: &Path,
    out: &Path,
) -> Result<String, Failure> {
    let (w, h) = picture.rgb.dimensions();
    let (encoder, predictor) = (&models.encoder, &models.predictor);
    let defaults = EverythingOptions::default();
    let options = EverythingOptions {
        points_per_side: e.points_per_side.unwrap_or(defaults.points_per_side),
        pred_iou_thresh: e.pred_iou_thresh.unwrap_or(defaults.pred_iou_thresh),
        stability_score_thresh: e
            .stability_score_thresh
            .unwrap_or(defaults.stability_score_thresh),
        box_nms_thresh: e.box_nms_thresh.unwrap_or(defaults.box_nms_thresh),
        crop_n_layers: e.crop_n_layers.unwrap_or(defaults.crop_n_layers),
        min_mask_region_area: e
            .min_mask_region_area
            .unwrap_or(defaults.min_mask_region_area),
        ..defaults
    };
    let view = ImageView::packed(
        picture.rgb.as_raw(),
        w as usize,
        h as usize,
        PixelFormat::Rgb,
    )
    .map_err(|err| Failure::of(err, exit::INPUT))?;
    let found = {
        let bar = progress::Bar::new(0, "clicks");
        let report = |done: u64, total: u64| {
            bar.set(done, total);
            true
        };
        segment_everything_with_progress(&view, encoder, predictor, &options, Some(&report))
            .map_err(|err| Failure::of(err, exit::INPUT))?
    };

    create_parent(out)?;
    // One mask decoded at a time: never every full-size mask at once.
    let mut labels = vec![0u32; (w * h) as usize];
    let mut annotations = Vec::with_capacity(found.masks.len());
    let mut mask = vec![0u8; (w * h) as usize];
    for (k, m) in found.masks.iter().enumerate() {
        m.rle
            .decode_into(&mut mask)
            .map_err(|err| Failure::of(err, exit::INTERNAL))?;
        for (label, &v) in labels.iter_mut().zip(&mask) {
            if v != 0 && *label == 0 {
                *label = k as u32 + 1;
            }
        }
        let bbox = if m.area == 0 {
            [0, 0, 0, 0]
        } else {
            [
                m.bbox[0],
                m.bbox[1],
                m.bbox[2] - m.bbox[0] + 1,
                m.bbox[3] - m.bbox[1] + 1,
            ]
        };
        let c = m.crop_box;
        annotations.push(serde_json::json!({
            "id": k + 1,
            "area": m.area,
            "bbox": bbox,
            "segmentation": { "size": [h, w], "counts": m.rle.to_coco_string() },
            "polygons": polygons_json(&mask, w as usize, h as usize, e.tolerance),
            "polygon_tolerance": e.tolerance,
            "predicted_iou": m.predicted_iou,
            "stability_score": m.stability_score,
            "point_coords": [m.point],
            "crop_box": [c[0], c[1], c[2] - c[0], c[3] - c[1]],
        }));
    }
    let mut outputs = sam2::__private::files::StagedFiles::new();
    let overlay_path = with_suffix(out, ".overlay.png");
    outputs
        .add(&overlay_path, |f| {
            picture::write_labels_overlay(&picture.rgb, &labels, f)
        })
        .map_err(|err| Failure::of(err, exit::OUTPUT))?;
    let json_path = with_suffix(out, ".json");
    let document = serde_json::json!({
        "image": image_json(image, picture),
        "model": {
            "encoder": models.encoder_path.display().to_string(),
            "decoder": models.decoder_path.display().to_string(),
            "export": predictor.export().name(),
            "fingerprint": encoder.fingerprint().to_string(),
        },
        "generator": {
            "points_per_side": options.points_per_side,
            "points_per_batch": options.points_per_batch,
            "pred_iou_thresh": options.pred_iou_thresh,
            "stability_score_thresh": options.stability_score_thresh,
            "stability_score_offset": options.stability_score_offset,
            "box_nms_thresh": options.box_nms_thresh,
            "crop_n_layers": options.crop_n_layers,
            "crop_nms_thresh": options.crop_nms_thresh,
            "crop_overlap_ratio": options.crop_overlap_ratio,
            "min_mask_region_area": options.min_mask_region_area,
            "multimask": options.multimask,
        },
        "annotations": annotations,
    });
    // Added last, so renamed into place last: a batch takes an image whose JSON is there as done.
    add_json(&mut outputs, &json_path, &document)?;
    outputs
        .commit()
        .map_err(|err| Failure::of(err, exit::OUTPUT))?;
    Ok(format!(
        "{} mask{} → {}, {}",
        found.masks.len(),
        if found.masks.len() == 1 { "" } else { "s" },
        overlay_path.display(),
        json_path.display()
    ))
}
