//! `sam2 segment`: the masks of clicks and boxes on an image, as PNGs and a JSON document.

use std::io::Read;
use std::path::{Path, PathBuf};

use sam2::{Fingerprint, PredictOptions, Predictor, Prompt};

use crate::common::{
    add_json, create_parent, encode, encode_picture, image_json, init_runtime, load_embedding,
    load_encoder, load_picture, load_predictor, model_files, output_prefix, polygons_json,
    with_suffix,
};
use crate::failure::{exit, Failure};
use crate::{args, batch, picture};

pub(crate) fn run(s: args::Segment) -> Result<(), Failure> {
    if let Some(concepts) = &s.concepts {
        return crate::concept::run(&s, concepts);
    }
    if let Some(source) = batch::image_source(&s.image) {
        return run_batch(s, source);
    }
    if let Some(shard) = s.shard {
        return Err(batch::shard_needs_a_batch(shard));
    }
    let (encoder_path, decoder_path) = model_files(&s.models)?;
    let decoder_path = decoder_path.ok_or_else(|| Failure::new(exit::USAGE, "no decoder given"))?;
    let picture = load_picture(&s.image, s.max_pixels)?;
    init_runtime(s.onnxruntime.as_deref())?;
    let (fingerprint, encoder, embedding) = match &s.embedding {
        Some(file) => {
            // The encoder's identity is the hash of its file: no need to load it. Only a regular
            // file is read (a FIFO would block, /dev/zero never end), as the library reads models.
            let mut bytes = Vec::new();
            sam2::__private::files::open_regular(&encoder_path, "an ONNX encoder file")
                .map_err(|err| Failure::of(err, exit::MODEL))?
                .read_to_end(&mut bytes)
                .map_err(|err| {
                    Failure::new(
                        exit::MODEL,
                        format!("cannot read {}: {err}", encoder_path.display()),
                    )
                })?;
            let fingerprint = Fingerprint::of_bytes(&bytes);
            let embedding = load_embedding(file, fingerprint, &s.image, &picture)?;
            (fingerprint, None, embedding)
        }
        None => {
            let (encoder, embedding) = encode_picture(&encoder_path, s.device, &picture)?;
            (encoder.fingerprint(), Some(encoder), embedding)
        }
    };
    let predictor = load_predictor(&decoder_path, s.device, Some(fingerprint), encoder.as_ref())?;
    let models = Models {
        encoder_path,
        decoder_path,
        fingerprint,
        predictor,
    };
    let out = output_prefix(&s.out, &s.image);
    let line = predict_and_write(&s, &models, &embedding, &picture, &s.image, &out)?;
    eprintln!("sam2: {line}");
    Ok(())
}

/// What every image of a run is segmented with.
struct Models {
    encoder_path: PathBuf,
    decoder_path: PathBuf,
    fingerprint: Fingerprint,
    predictor: Predictor,
}

/// Every image of a folder or a list file: `-o DIR/<name>.json` is the last file an image's
/// result renames into place, so an image whose JSON is there is done.
fn run_batch(s: args::Segment, source: batch::Source) -> Result<(), Failure> {
    if s.embedding.is_some() {
        return Err(Failure::new(
            exit::USAGE,
            "--embedding is one image's embedding: give one image with it, not a batch",
        ));
    }
    let (encoder_path, decoder_path) = model_files(&s.models)?;
    let decoder_path = decoder_path.ok_or_else(|| Failure::new(exit::USAGE, "no decoder given"))?;
    let plan = batch::plan(&source, &s.out, s.shard)?;
    let prefix = |input: &batch::Input| s.out.join(&input.name);
    batch::run(
        plan,
        "images",
        |input| batch::exists(&with_suffix(&prefix(input), ".json")),
        || {
            init_runtime(s.onnxruntime.as_deref())?;
            let encoder = load_encoder(&encoder_path, s.device)?;
            let fingerprint = encoder.fingerprint();
            let predictor =
                load_predictor(&decoder_path, s.device, Some(fingerprint), Some(&encoder))?;
            Ok((
                encoder,
                Models {
                    encoder_path: encoder_path.clone(),
                    decoder_path: decoder_path.clone(),
                    fingerprint,
                    predictor,
                },
            ))
        },
        |(encoder, models), input| {
            let picture = load_picture(&input.path, s.max_pixels)?;
            let embedding = encode(encoder, &picture)?;
            predict_and_write(
                &s,
                models,
                &embedding,
                &picture,
                &input.path,
                &prefix(input),
            )
            .map(drop)
        },
        || None,
    )
}

/// Predicts the prompt's masks on `image` and writes its files at the prefix `out`; returns the
/// summary line.
fn predict_and_write(
    s: &args::Segment,
    models: &Models,
    embedding: &sam2::Embedding,
    picture: &picture::Picture,
    image: &Path,
    out: &Path,
) -> Result<String, Failure> {
    let (w, h) = picture.rgb.dimensions();
    let predictor = &models.predictor;
    let prompt = Prompt {
        points: s.points.clone(),
        bbox: s.bbox,
        mask_input: None,
    };
    let prediction = predictor
        .predict(
            embedding,
            std::slice::from_ref(&prompt),
            PredictOptions {
                multimask: s.multimask,
            },
        )
        .map_err(|e| Failure::of(e, exit::INPUT))?;

    create_parent(out)?;
    // Every file to a temporary beside it, then all renamed into place: all or nothing.
    let mut outputs = sam2::__private::files::StagedFiles::new();
    let count = prediction.objects * prediction.candidates;
    let mut best = 0;
    let mut annotations = Vec::new();
    for k in 0..count {
        if prediction.scores[k] > prediction.scores[best] {
            best = k;
        }
        let mask_path = if count == 1 {
            with_suffix(out, ".mask.png")
        } else {
            with_suffix(out, &format!(".mask-{k}.png"))
        };
        outputs
            .add(&mask_path, |f| {
                picture::write_mask(prediction.mask(k), w, h, f)
            })
            .map_err(|e| Failure::of(e, exit::OUTPUT))?;
        annotations.push(annotation(&prediction, k, s.tolerance, &mask_path));
    }
    let overlay_path = with_suffix(out, ".overlay.png");
    outputs
        .add(&overlay_path, |f| {
            picture::write_overlay(&picture.rgb, prediction.mask(best), &s.points, s.bbox, f)
        })
        .map_err(|e| Failure::of(e, exit::OUTPUT))?;
    // The JSON is added last, so renamed into place last: a batch takes an image whose JSON is
    // there as done.
    let json_path = with_suffix(out, ".json");
    let document = serde_json::json!({
        "image": image_json(image, picture),
        "model": {
            "encoder": models.encoder_path.display().to_string(),
            "decoder": models.decoder_path.display().to_string(),
            "export": predictor.export().name(),
            "fingerprint": models.fingerprint.to_string(),
        },
        "prompt": {
            "points": s.points.iter().map(|p| serde_json::json!([p.x, p.y, if p.positive { 1 } else { 0 }])).collect::<Vec<_>>(),
            "box": s.bbox,
        },
        "best": best,
        "annotations": annotations,
    });
    add_json(&mut outputs, &json_path, &document)?;
    outputs.commit().map_err(|e| Failure::of(e, exit::OUTPUT))?;
    Ok(format!(
        "{} mask{} (best score {:.3}, area {} px) → {}, {}, {}",
        count,
        if count == 1 { "" } else { "s" },
        prediction.scores[best],
        prediction.areas[best],
        with_suffix(
            out,
            if count == 1 {
                ".mask.png"
            } else {
                ".mask-K.png"
            }
        )
        .display(),
        overlay_path.display(),
        json_path.display()
    ))
}

/// One mask as a COCO annotation: `segmentation` is the compressed RLE pycocotools reads (it keeps
/// holes), `bbox` is COCO's `[x, y, width, height]`; `polygons` adds the rings with holes, as flat
/// `[x1, y1, x2, y2, …]` lists in pixel-corner coordinates.
fn annotation(
    prediction: &sam2::Prediction,
    k: usize,
    tolerance: f32,
    mask_path: &Path,
) -> serde_json::Value {
    let rle = prediction.rle(k);
    let b = prediction.boxes[k];
    let bbox = if prediction.areas[k] == 0 {
        [0, 0, 0, 0]
    } else {
        [b[0], b[1], b[2] - b[0] + 1, b[3] - b[1] + 1]
    };
    let polygons = polygons_json(
        prediction.mask(k),
        prediction.width,
        prediction.height,
        tolerance,
    );
    serde_json::json!({
        "id": k + 1,
        "candidate": prediction.candidate_index[k],
        "score": prediction.scores[k],
        "area": prediction.areas[k],
        "bbox": bbox,
        "segmentation": { "size": [prediction.height, prediction.width], "counts": rle.to_coco_string() },
        "polygons": polygons,
        "polygon_tolerance": tolerance,
        "mask_file": mask_path.file_name().map(|n| n.to_string_lossy().into_owned()),
    })
}
