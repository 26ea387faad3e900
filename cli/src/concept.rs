//! `sam2 segment --text/--exemplar`: every instance of each concept with a SAM 3 export, as an
//! overlay, one mask per instance and a COCO document with a category per concept.

use std::path::Path;

use sam2::concept::{ConceptModel, ConceptModelOptions, Segmentation};

use crate::common::{
    add_json, create_parent, encode, image_json, init_runtime, load_embedding, load_picture,
    output_prefix, polygons_json, session_options, with_suffix,
};
use crate::failure::{exit, Failure};
use crate::{args, batch, picture, progress};

pub(crate) fn run(s: &args::Segment, c: &args::Concepts) -> Result<(), Failure> {
    let model_path = s.models.model.as_deref().expect("checked: --model");
    if let Some(source) = batch::image_source(&s.image) {
        let plan = batch::plan(&source, &s.out, s.shard)?;
        let prefix = |input: &batch::Input| s.out.join(&input.name);
        return batch::run(
            plan,
            "images",
            |input| batch::exists(&with_suffix(&prefix(input), ".json")),
            || {
                init_runtime(s.onnxruntime.as_deref())?;
                load_model(model_path, s, c)
            },
            |model, input| {
                let picture = load_picture(&input.path, s.max_pixels)?;
                let embedding = encode(model.encoder(), &picture)?;
                segment_and_write(
                    s,
                    c,
                    model,
                    &embedding,
                    &picture,
                    &input.path,
                    &prefix(input),
                )
                .map(drop)
            },
            || None,
        );
    }
    if let Some(shard) = s.shard {
        return Err(batch::shard_needs_a_batch(shard));
    }
    let picture = load_picture(&s.image, s.max_pixels)?;
    init_runtime(s.onnxruntime.as_deref())?;
    let model = load_model(model_path, s, c)?;
    let embedding = match &s.embedding {
        Some(file) => load_embedding(file, model.encoder().fingerprint(), &s.image, &picture)?,
        None => encode(model.encoder(), &picture)?,
    };
    let out = output_prefix(&s.out, &s.image);
    let line = segment_and_write(s, c, &model, &embedding, &picture, &s.image, &out)?;
    eprintln!("sam2: {line}");
    Ok(())
}

fn load_model(path: &Path, s: &args::Segment, c: &args::Concepts) -> Result<ConceptModel, Failure> {
    let _p = progress::step("loading SAM 3");
    let options = ConceptModelOptions {
        output_target: sam2::OutputTarget::Device,
        session: session_options(s.device),
        vocabulary: c.vocabulary.clone(),
    };
    ConceptModel::new(path, &options).map_err(|e| Failure::of(e, exit::MODEL))
}

/// Segments the concepts on `image` and writes its files at the prefix `out`: OUT.overlay.png,
/// OUT.mask-K.png for each instance (K from 1, as the annotations' ids) and OUT.json, renamed
/// into place together, the JSON last. Returns the summary line.
fn segment_and_write(
    s: &args::Segment,
    c: &args::Concepts,
    model: &ConceptModel,
    embedding: &sam2::Embedding,
    picture: &picture::Picture,
    image: &Path,
    out: &Path,
) -> Result<String, Failure> {
    let (w, h) = picture.rgb.dimensions();
    let found: Segmentation = {
        let _p = progress::step("segmenting concepts");
        model
            .segment(embedding, &c.concepts, &c.options)
            .map_err(|e| Failure::of(e, exit::INPUT))?
    };
    create_parent(out)?;
    let mut outputs = sam2::__private::files::StagedFiles::new();
    let mut labels = vec![0u32; (w * h) as usize];
    let mut annotations = Vec::with_capacity(found.instances.len());
    for (k, instance) in found.instances.iter().enumerate() {
        // A pixel shows the best instance over it (instances come best first per concept).
        for (label, &v) in labels.iter_mut().zip(&instance.mask) {
            if v != 0 && *label == 0 {
                *label = k as u32 + 1;
            }
        }
        let mask_path = with_suffix(out, &format!(".mask-{}.png", k + 1));
        outputs
            .add(&mask_path, |f| picture::write_mask(&instance.mask, w, h, f))
            .map_err(|e| Failure::of(e, exit::OUTPUT))?;
        let rle = sam2::masks::Rle::encode(&instance.mask, w as usize, h as usize);
        let [x1, y1, x2, y2] = instance.bbox;
        annotations.push(serde_json::json!({
            "id": k + 1,
            "category_id": instance.concept + 1,
            "score": instance.score,
            "area": instance.area,
            "bbox": [x1, y1, x2 - x1, y2 - y1],
            "segmentation": { "size": [h, w], "counts": rle.to_coco_string() },
            "polygons": polygons_json(&instance.mask, w as usize, h as usize, s.tolerance),
            "polygon_tolerance": s.tolerance,
            "query": instance.query,
            "mask_file": mask_path.file_name().map(|n| n.to_string_lossy().into_owned()),
        }));
    }
    let categories: Vec<serde_json::Value> = found
        .concepts
        .iter()
        .zip(&c.concepts)
        .enumerate()
        .map(|(i, (summary, concept))| {
            serde_json::json!({
                "id": i + 1,
                "name": summary.phrase,
                "presence": summary.presence,
                "instances": summary.instances,
                "truncated": summary.truncated,
                "exemplars": concept.exemplars.iter().map(|e| serde_json::json!({
                    "box": e.rect, "positive": e.positive })).collect::<Vec<_>>(),
            })
        })
        .collect();
    let overlay_path = with_suffix(out, ".overlay.png");
    outputs
        .add(&overlay_path, |f| {
            picture::write_labels_overlay(&picture.rgb, &labels, f)
        })
        .map_err(|e| Failure::of(e, exit::OUTPUT))?;
    let json_path = with_suffix(out, ".json");
    let paths = model.paths();
    let nms = match c.options.nms {
        sam2::concept::Nms::None => serde_json::Value::Null,
        sam2::concept::Nms::Boxes(iou) => serde_json::json!({ "by": "box", "iou": iou }),
        sam2::concept::Nms::Masks(iou) => serde_json::json!({ "by": "mask", "iou": iou }),
    };
    let document = serde_json::json!({
        "image": image_json(image, picture),
        "model": {
            "family": "sam3",
            "image_encoder": paths.image_encoder.display().to_string(),
            "language_encoder": paths.language_encoder.display().to_string(),
            "decoder": paths.decoder.display().to_string(),
            "fingerprint": model.encoder().fingerprint().to_string(),
        },
        "options": {
            "score_threshold": c.options.score_threshold,
            "nms": nms,
            "max_instances": c.options.max_instances,
        },
        "categories": categories,
        "annotations": annotations,
    });
    // Added last, so renamed into place last: a batch takes an image whose JSON is there as done.
    add_json(&mut outputs, &json_path, &document)?;
    outputs.commit().map_err(|e| Failure::of(e, exit::OUTPUT))?;
    let per: Vec<String> = found
        .concepts
        .iter()
        .map(|c| {
            format!(
                "{} × \"{}\" (presence {:.3})",
                c.instances, c.phrase, c.presence
            )
        })
        .collect();
    Ok(format!(
        "{} → {}, {}",
        per.join(", "),
        overlay_path.display(),
        json_path.display()
    ))
}
