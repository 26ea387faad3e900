//! SAM 3's concept model on the reduced, shape-faithful export (tools/setup/setup-sam3.sh makes
//! it with `sam2-export-sam3 --config reduced` from Meta's code, seeded random weights):
//! loading, encoding, phrases, exemplar boxes, the results' conventions, and the refusals.

use std::path::PathBuf;
use std::sync::OnceLock;

use sam2::concept::{Concept, ConceptModel, ConceptModelOptions, Exemplar, SegmentOptions};
use sam2::{Embedding, ImageView, OutputTarget, PixelFormat};

use crate::common;

fn var(name: &str) -> PathBuf {
    std::env::var_os(name)
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            panic!(
                "{name} is not set: run tools/setup/setup-sam3.sh (the README's test command does)"
            )
        })
}

pub fn models() -> PathBuf {
    var("SAM2_SAM3_MODELS")
}

pub fn options() -> ConceptModelOptions {
    ConceptModelOptions {
        output_target: OutputTarget::Host,
        vocabulary: Some(var("SAM2_SAM3_VOCAB")),
        ..Default::default()
    }
}

/// One model and one encode of the demo image for the tests that only read them.
fn shared() -> &'static (ConceptModel, Embedding) {
    static SHARED: OnceLock<(ConceptModel, Embedding)> = OnceLock::new();
    SHARED.get_or_init(|| {
        common::init_runtime();
        let model = ConceptModel::new(models(), &options()).expect("the reduced export loads");
        let image = common::read_pnm(&common::testdata("demo.ppm"));
        let view =
            ImageView::packed(&image.data, image.width, image.height, PixelFormat::Rgb).unwrap();
        let embedding = model.encode(&view).expect("encodes");
        (model, embedding)
    })
}

#[test]
fn a_phrase_and_boxes_give_instances_with_scores_boxes_and_masks() {
    let (model, embedding) = shared();
    assert_eq!(embedding.family().name(), "sam3");
    assert_eq!(embedding.image_size(), (800, 600));
    let concepts = [
        Concept::text("purple star"),
        Concept {
            text: None,
            exemplars: vec![Exemplar {
                rect: [52.0, 82.0, 327.0, 257.0],
                positive: true,
            }],
        },
    ];
    // A phrase of 10 kB (over 30 tokens) is cut as Meta's tokenizer cuts it, and said to be.
    let long = "a small purple star beside a large ".repeat(300);
    let mut concepts = concepts.to_vec();
    concepts.push(Concept::text(long.as_str()));
    let out = model
        .segment(embedding, &concepts, &SegmentOptions::default())
        .expect("segments");
    assert_eq!(out.concepts.len(), 3);
    assert_eq!(out.concepts[1].phrase, "visual");
    for c in &out.concepts {
        assert!((0.0..=1.0).contains(&c.presence), "{c:?}");
    }
    assert!(!out.concepts[0].truncated && !out.concepts[1].truncated);
    assert!(
        out.concepts[2].truncated,
        "a 10 kB phrase is cut and reported"
    );
    assert_eq!(model.tokens(&long).len, 32);
    eprintln!(
        "presence {:?}, instances {:?}",
        out.concepts.iter().map(|c| c.presence).collect::<Vec<_>>(),
        out.concepts.iter().map(|c| c.instances).collect::<Vec<_>>()
    );
    let mut last = (usize::MAX, f32::INFINITY);
    for i in &out.instances {
        assert!(i.score > 0.5 && i.score <= 1.0);
        assert_eq!(i.mask.len(), 800 * 600);
        assert_eq!(i.area, i.mask.iter().map(|&v| v as u64).sum::<u64>());
        // Concepts in order, the best first within each.
        if i.concept == last.0 {
            assert!(i.score <= last.1);
        }
        last = (i.concept, i.score);
    }
}

/// Row-major run lengths (zeros first) of a 0/1 mask, as the reference writes them, decoded.
fn decode_runs(runs: &[serde_json::Value], len: usize) -> Vec<u8> {
    let mut out = Vec::with_capacity(len);
    for (i, n) in runs.iter().enumerate() {
        out.extend(std::iter::repeat((i % 2) as u8).take(n.as_u64().unwrap() as usize));
    }
    assert_eq!(out.len(), len, "the runs cover the image");
    out
}

/// Parity with Meta's own image processor (`Sam3Processor` of sam3 0.1.4 on the CPU, threshold
/// 0.5, the same weights; tools/references/sam3_reference.py on testdata/demo.ppm): the same
/// resized input bytes, the same token ids, the same presence score, and the same instances
/// (count equal; each matched by its query: mask IoU ≥ 0.99, box within 1 px, score within
/// 1e-4), for two phrases, a box alone, a phrase with a positive and a negative box, and a
/// phrase of nothing drawn.
#[test]
fn instances_are_metas_on_the_demo_image() {
    use sha2::Digest;
    let (model, embedding) = shared();
    let reference: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(var("SAM2_SAM3_REFERENCE")).unwrap())
            .unwrap();
    assert_eq!(reference["threshold"], 0.5);
    let image = common::read_pnm(&common::testdata("demo.ppm"));
    let view = ImageView::packed(&image.data, image.width, image.height, PixelFormat::Rgb).unwrap();
    let input = model.encoder().prepare_input(&view).unwrap();
    let (_, bytes) = input.try_extract_tensor::<u8>().unwrap();
    assert_eq!(
        format!("{:x}", sha2::Sha256::digest(bytes)),
        reference["input_sha256"].as_str().unwrap(),
        "the 1008² uint8 input differs from the one Meta's processor made"
    );
    let (w, h) = (image.width, image.height);
    let cases = reference["cases"].as_array().unwrap();
    assert!(cases.len() >= 5);
    let concepts: Vec<Concept> = cases
        .iter()
        .map(|case| Concept {
            text: case["phrase"].as_str().map(str::to_string),
            exemplars: case["boxes"]
                .as_array()
                .unwrap()
                .iter()
                .map(|b| Exemplar {
                    rect: std::array::from_fn(|k| b[k].as_f64().unwrap() as f32),
                    positive: b[4].as_bool().unwrap(),
                })
                .collect(),
        })
        .collect();
    // Every case in one call, as a host segmenting several concepts would.
    let out = model
        .segment(embedding, &concepts, &SegmentOptions::default())
        .unwrap();
    let mut worst = (0f32, 0f32, 1f64);
    for (c, case) in cases.iter().enumerate() {
        let name = case["name"].as_str().unwrap();
        let summary = &out.concepts[c];
        let tokens = model.tokens(&summary.phrase);
        let want: Vec<i64> = case["tokens"]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v.as_i64().unwrap())
            .collect();
        assert_eq!(tokens.ids.to_vec(), want, "{name}: token ids");
        let presence = case["presence"].as_f64().unwrap() as f32;
        assert!(
            (summary.presence - presence).abs() <= 1e-4,
            "{name}: presence {} against Meta's {presence}",
            summary.presence
        );
        let mine: Vec<&sam2::concept::Instance> =
            out.instances.iter().filter(|i| i.concept == c).collect();
        let theirs = case["instances"].as_array().unwrap();
        assert_eq!(mine.len(), theirs.len(), "{name}: instances found");
        assert!(
            !theirs.is_empty(),
            "{name}: the sharpened export finds instances"
        );
        for t in theirs {
            let query = t["query"].as_u64().unwrap() as usize;
            let m = mine
                .iter()
                .find(|i| i.query == query)
                .unwrap_or_else(|| panic!("{name}: Meta's query {query} is not among ours"));
            let score = t["score"].as_f64().unwrap() as f32;
            let box_err = (0..4)
                .map(|k| (m.bbox[k] - t["box"][k].as_f64().unwrap() as f32).abs())
                .fold(0f32, f32::max);
            let iou = common::iou(&m.mask, &decode_runs(t["runs"].as_array().unwrap(), w * h));
            worst = (
                worst.0.max((m.score - score).abs()),
                worst.1.max(box_err),
                worst.2.min(iou),
            );
            assert!(
                (m.score - score).abs() <= 1e-4,
                "{name}, query {query}: score {} against Meta's {score}",
                m.score
            );
            assert!(
                box_err <= 1.0,
                "{name}, query {query}: box off by {box_err} px"
            );
            assert!(iou >= 0.99, "{name}, query {query}: mask IoU {iou:.5}");
        }
    }
    eprintln!(
        "SAM 3 against Meta's processor: scores within {:.2e}, boxes within {:.2e} px, mask IoU at least {:.5}",
        worst.0, worst.1, worst.2
    );
}

/// An export is one folder: the vocabulary beside the graphs is found without being named, and a
/// folder with a graph missing, truncated or of another model, or without the vocabulary, is
/// refused naming the file and what is wrong.
#[test]
fn an_export_folder_loads_alone_and_broken_ones_are_refused_naming_the_file() {
    common::init_runtime();
    let dir = models();
    let alone = ConceptModel::new(
        &dir,
        &ConceptModelOptions {
            output_target: OutputTarget::Host,
            ..Default::default()
        },
    )
    .expect("the export's folder loads with the vocabulary beside its graphs");
    assert_eq!(
        alone.paths().vocabulary,
        dir.join(sam2::concept::VOCABULARY_FILE)
    );
    assert_eq!(alone.max_exemplars(), 8);

    let scratch = std::env::temp_dir().join(format!("sam2-concept-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&scratch);
    let copy = |skip: &str| {
        std::fs::create_dir_all(&scratch).unwrap();
        for entry in std::fs::read_dir(&dir).unwrap() {
            let from = entry.unwrap().path();
            let name = from.file_name().unwrap().to_owned();
            let to = scratch.join(&name);
            let _ = std::fs::remove_file(&to);
            if name != skip {
                std::os::unix::fs::symlink(&from, &to).unwrap();
            }
        }
    };
    let refusal = |what: &str| {
        ConceptModel::new(&scratch, &options())
            .err()
            .unwrap_or_else(|| panic!("{what}: loaded"))
            .to_string()
    };
    copy(sam2::concept::DECODER_FILE);
    let e = refusal("no decoder");
    assert!(
        e.contains("decoder is missing") && e.contains("sam3_decoder.onnx"),
        "{e}"
    );
    copy(sam2::concept::VOCABULARY_FILE);
    let e = ConceptModel::new(&scratch, &Default::default())
        .unwrap_err()
        .to_string();
    assert!(e.contains("vocabulary is missing"), "{e}");
    copy("");
    let decoder = scratch.join(sam2::concept::DECODER_FILE);
    std::fs::remove_file(&decoder).unwrap();
    let bytes = std::fs::read(dir.join(sam2::concept::DECODER_FILE)).unwrap();
    std::fs::write(&decoder, &bytes[..bytes.len() / 3]).unwrap();
    let e = refusal("a truncated decoder");
    assert!(e.contains("sam3_decoder.onnx"), "{e}");
    copy("");
    let encoder = scratch.join(sam2::concept::IMAGE_ENCODER_FILE);
    std::fs::remove_file(&encoder).unwrap();
    std::os::unix::fs::symlink(common::model("tiny_a_encoder.onnx"), &encoder).unwrap();
    let e = refusal("a SAM2 encoder in SAM 3's place");
    assert!(e.contains("a SAM2 image encoder"), "{e}");
    copy("");
    let language = scratch.join(sam2::concept::LANGUAGE_ENCODER_FILE);
    std::fs::remove_file(&language).unwrap();
    std::os::unix::fs::symlink(dir.join(sam2::concept::DECODER_FILE), &language).unwrap();
    let e = refusal("the decoder in the language encoder's place");
    assert!(e.contains("not SAM 3's language encoder"), "{e}");
    std::fs::remove_dir_all(&scratch).unwrap();
}

/// One encode serves concepts and clicks: the set-up's export has SAM 3's click head, so the
/// concept model's embedding also holds the click features, and SAM 3's click decoder, opened as
/// any predictor, segments clicks and boxes on that same embedding, as Meta's `predict_inst` does
/// on the same weights (the reference's `clicks`: each candidate's mask IoU ≥ 0.99 and predicted
/// IoU within 1e-4). The embedding saved and loaded keeps them; SAM2's decoders refuse it and
/// SAM 3's click decoder refuses a SAM2 embedding.
#[test]
fn one_encode_serves_concepts_and_clicks_as_metas_predict_inst() {
    use sam2::{Point, PredictOptions, Predictor, PredictorOptions, Prompt};
    let (model, embedding) = shared();
    assert!(
        embedding.has_click_features(),
        "{:?}",
        embedding.tensor_names()
    );
    let decoder = models().join("sam3_interactive_decoder.onnx");
    let predictor =
        Predictor::for_encoder(&decoder, model.encoder(), &PredictorOptions::default()).unwrap();
    assert_eq!(predictor.spec().low_res_size, 288);
    let reference: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(var("SAM2_SAM3_REFERENCE")).unwrap())
            .unwrap();
    let clicks = reference["clicks"]
        .as_array()
        .expect("the reference of an export with its click head records clicks");
    assert!(clicks.len() >= 4);
    let (w, h) = (800usize, 600usize);
    let mut worst = (0f32, 1f64);
    let prompt_of = |case: &serde_json::Value| Prompt {
        points: case["points"]
            .as_array()
            .unwrap()
            .iter()
            .map(|p| Point {
                x: p[0].as_f64().unwrap() as f32,
                y: p[1].as_f64().unwrap() as f32,
                positive: p[2].as_f64().unwrap() > 0.5,
            })
            .collect(),
        bbox: case["box"]
            .as_array()
            .map(|b| std::array::from_fn(|k| b[k].as_f64().unwrap() as f32)),
        mask_input: None,
    };
    for case in clicks {
        let name = case["name"].as_str().unwrap();
        let got = predictor
            .predict(
                embedding,
                &[prompt_of(case)],
                PredictOptions { multimask: true },
            )
            .unwrap();
        let scores = case["scores"].as_array().unwrap();
        let masks = case["masks"].as_array().unwrap();
        assert_eq!(got.candidates, scores.len(), "{name}");
        for k in 0..got.candidates {
            let c = got.candidate_index[k] as usize;
            let score = scores[c].as_f64().unwrap() as f32;
            let iou = common::iou(
                got.mask(k),
                &decode_runs(masks[c]["runs"].as_array().unwrap(), w * h),
            );
            worst = (worst.0.max((got.scores[k] - score).abs()), worst.1.min(iou));
            assert!(
                (got.scores[k] - score).abs() <= 1e-4,
                "{name}, candidate {c}: predicted IoU {} against Meta's {score}",
                got.scores[k]
            );
            assert!(iou >= 0.99, "{name}, candidate {c}: mask IoU {iou:.5}");
        }
    }
    eprintln!(
        "SAM 3's clicks against Meta's predict_inst: predicted IoU within {:.2e}, mask IoU at least {:.5}",
        worst.0, worst.1
    );

    // Saved and loaded, the embedding keeps its click features and serves both again.
    let file = std::env::temp_dir().join(format!("sam2-sam3-{}.sam2", std::process::id()));
    sam2::embedding_file::save(embedding, &file).unwrap();
    let loaded = sam2::embedding_file::load(&file, Some(model.encoder().fingerprint())).unwrap();
    std::fs::remove_file(&file).unwrap();
    assert!(loaded.has_click_features());
    let again = predictor
        .predict(
            &loaded,
            &[prompt_of(&clicks[0])],
            PredictOptions { multimask: true },
        )
        .unwrap();
    let first = predictor
        .predict(
            embedding,
            &[prompt_of(&clicks[0])],
            PredictOptions { multimask: true },
        )
        .unwrap();
    assert_eq!(again.masks, first.masks);
    assert_eq!(again.scores, first.scores);
    let segmented = model
        .segment(
            &loaded,
            &[Concept::text("purple star")],
            &SegmentOptions::default(),
        )
        .unwrap();
    assert!(!segmented.instances.is_empty());

    // Families do not mix: a SAM2 decoder refuses SAM 3's embedding, SAM 3's click decoder a
    // SAM2 one.
    let sam2_decoder = Predictor::new(
        common::model("tiny_a_decoder.onnx"),
        &PredictorOptions::default(),
    )
    .unwrap();
    let e = sam2_decoder
        .predict(
            embedding,
            &[prompt_of(&clicks[0])],
            PredictOptions::default(),
        )
        .unwrap_err()
        .to_string();
    assert!(e.contains("sam3"), "{e}");
    let (encoder, _) = common::open_pair("tiny_a");
    let sam2_embedding = common::encode_shapes(&encoder);
    // Another encoder's: refused as another model's (its fingerprint is not this encoder's).
    let e = predictor
        .predict(
            &sam2_embedding,
            &[common::click(10.0, 10.0)],
            PredictOptions::default(),
        )
        .unwrap_err();
    assert!(matches!(e, sam2::Error::ModelMismatch(_)), "{e}");
    // Without the fingerprint to go by, by its family.
    let unbound = Predictor::new(&decoder, &PredictorOptions::default()).unwrap();
    let e = unbound
        .predict(
            &sam2_embedding,
            &[common::click(10.0, 10.0)],
            PredictOptions::default(),
        )
        .unwrap_err()
        .to_string();
    assert!(e.contains("family"), "{e}");
    assert!(Predictor::for_encoder(&decoder, &encoder, &PredictorOptions::default()).is_err());
}
