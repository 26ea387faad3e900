//! The real SAM2 architecture, exported by the real exporters: Meta's SAM2 code with
//! seeded random weights, exported by samexporter 0.5.0 and by ONNX Runtime 1.31.1's SAM2 tools
//! (tools/setup/setup-real.sh builds them; `SAM2_REAL_MODELS` names the directory).
//!
//! Every pair of `manifest.json` runs the cases of `reference.json` with default options and is
//! compared with the two reference pipelines (tools/references/real_reference.py): the Python
//! pipeline users run today (samexporter's arithmetic; mask IoU ≥ 0.99 required) and Meta's PyTorch
//! `SAM2ImagePredictor` on the same weights (IoU reported). The feature matrix (pixel formats,
//! batches, multimask, refinement, files, shared weights, optimisation levels, the cache) runs on
//! SAM2.1 hiera-tiny from both exporters.

use crate::common;

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, OnceLock};

use common::*;
use sam2::cache::EmbeddingCache;
use sam2::{
    Encoder, EncoderOptions, ImageView, PixelFormat, Point, PredictOptions, Prediction, Predictor,
    PredictorOptions, Prompt,
};
use serde_json::Value;

fn real_dir() -> PathBuf {
    let dir = std::env::var_os("SAM2_REAL_MODELS")
        .map(PathBuf::from)
        .expect(
            "SAM2_REAL_MODELS is not set: run tools/setup/setup-real.sh (the README's test command does)",
        );
    assert!(
        dir.join("reference.json").exists(),
        "{} has no reference.json: run tools/setup/setup-real.sh",
        dir.display()
    );
    dir
}

fn json(path: &Path) -> Value {
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

struct Pair {
    model: String,
    family: String,
    encoder: PathBuf,
    decoder: PathBuf,
    /// The decoder returns three candidates (samexporter's, ONNX Runtime's `_multi`).
    multimask_decoder: bool,
}

fn pairs() -> Vec<Pair> {
    pairs_in(&real_dir())
}

/// The pairs of the export in `dir` (its manifest.json, sam2-export-image's format).
fn pairs_in(dir: &Path) -> Vec<Pair> {
    json(&dir.join("manifest.json"))["pairs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| Pair {
            model: p["model"].as_str().unwrap().into(),
            family: p["family"].as_str().unwrap().into(),
            encoder: dir.join(p["encoder"].as_str().unwrap()),
            decoder: dir.join(p["decoder"].as_str().unwrap()),
            multimask_decoder: p["multimask_decoder"].as_bool().unwrap(),
        })
        .collect()
}

/// The tiny SAM2.1 pairs, on which the feature matrix runs.
fn tiny_pairs() -> Vec<Pair> {
    pairs()
        .into_iter()
        .filter(|p| p.model == "sam2.1_hiera_tiny")
        .collect()
}

/// EdgeTAM's image pairs (sam2-export-edgetam, `common::edgetam_dir`).
fn edgetam_pairs() -> Vec<Pair> {
    pairs_in(&common::edgetam_dir())
}

fn demo() -> Image {
    read_pnm(&testdata("demo.ppm"))
}

fn rgb(image: &Image) -> ImageView<'_> {
    ImageView::packed(&image.data, image.width, image.height, PixelFormat::Rgb).unwrap()
}

fn click(x: f32, y: f32) -> Prompt {
    Prompt {
        points: vec![Point {
            x,
            y,
            positive: true,
        }],
        ..Default::default()
    }
}

fn decode_rle(counts: &Value, len: usize) -> Vec<u8> {
    let mut out = Vec::with_capacity(len);
    for (i, c) in counts.as_array().unwrap().iter().enumerate() {
        out.resize(out.len() + c.as_u64().unwrap() as usize, (i % 2) as u8);
    }
    assert_eq!(out.len(), len, "reference mask has the image's size");
    out
}

fn report(name: &str, text: &str) {
    if let Some(dir) = std::env::var_os("SAM2_REPORT_DIR") {
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(PathBuf::from(dir).join(name), text).unwrap();
    }
}

fn open(pair: &Pair) -> (Encoder, Predictor) {
    let encoder = new_encoder(pair);
    let predictor = new_predictor(pair, &encoder);
    (encoder, predictor)
}

fn new_encoder(pair: &Pair) -> Encoder {
    Encoder::new(&pair.encoder, &EncoderOptions::default())
        .unwrap_or_else(|e| panic!("{}: {e}", pair.encoder.display()))
}

/// The pair's decoder, checked against `encoder`.
fn new_predictor(pair: &Pair, encoder: &Encoder) -> Predictor {
    let predictor = Predictor::new(&pair.decoder, &PredictorOptions::default())
        .unwrap_or_else(|e| panic!("{}: {e}", pair.decoder.display()));
    predictor.check_encoder(encoder).unwrap();
    predictor
}

/// An encoder session and its embedding of the demo image.
struct Encoded {
    encoder: Encoder,
    embedding: sam2::Embedding,
}

/// The encoder of `pair` and its embedding of the demo image, made once per encoder file for every
/// test of this binary, and the pair's decoder. Pairs share encoders (ONNX Runtime's single- and
/// multimask decoders read one encoder's outputs) and tests share the image, and an encoder gives
/// the same embedding of the same pixels whichever test asks: a run makes 5 sessions and encodes
/// of the real encoders instead of 23 sessions and 21 encodes. The tests that are about sessions
/// themselves (shared weights, optimisation levels, the cache) open their own.
fn open_encoded(pair: &Pair) -> (Arc<Encoded>, Predictor) {
    type Slot = Arc<OnceLock<Arc<Encoded>>>;
    static ENCODED: OnceLock<Mutex<HashMap<PathBuf, Slot>>> = OnceLock::new();
    let slot = ENCODED
        .get_or_init(Default::default)
        .lock()
        .unwrap()
        .entry(pair.encoder.clone())
        .or_default()
        .clone();
    // Outside the map's lock: a test that wants another encoder does not wait for this one.
    let encoded = slot
        .get_or_init(|| {
            let encoder = new_encoder(pair);
            let embedding = encoder.encode(&rgb(&demo())).unwrap();
            Arc::new(Encoded { encoder, embedding })
        })
        .clone();
    let predictor = new_predictor(pair, &encoded.encoder);
    (encoded, predictor)
}

fn single(predictor: &Predictor, embedding: &sam2::Embedding, prompt: Prompt) -> Prediction {
    predictor
        .predict(embedding, &[prompt], PredictOptions::default())
        .unwrap()
}

/// The reference's cases (tools/references/real_reference.py) on one pair, in order, with default
/// options: a case with `mask_from` gets the low-res logits of that earlier case as its mask
/// prompt.
fn run_cases(pair: &Pair, cases: &[Value]) -> Vec<(String, Prediction)> {
    let (encoded, predictor) = open_encoded(pair);
    let embedding = &encoded.embedding;
    let mut out: Vec<(String, Prediction)> = Vec::new();
    for case in cases {
        let name = case["name"].as_str().unwrap();
        let mut prompt = prompt_of(case);
        if let Some(from) = case["mask_from"].as_str() {
            let (_, earlier) = out.iter().find(|(n, _)| n == from).unwrap();
            prompt.mask_input = Some(earlier.low_res_logits(0).to_vec());
        }
        let got = single(&predictor, embedding, prompt);
        out.push((name.to_string(), got));
    }
    out
}

/// Every pair, every case, default options: IoU with the Python pipeline ≥ 0.99; Meta's PyTorch
/// predictor reported. The figures go to the test output and the reliability report.
#[test]
fn masks_match_the_python_pipeline_and_are_reported_against_pytorch() {
    init_runtime();
    let reference = json(&real_dir().join("reference.json"));
    let image = demo();
    let plane = image.width * image.height;
    let cases = reference["cases"].as_array().unwrap();
    let mut lines = vec![format!(
        "{:<44} {:<14} {:>8} {:>8} {:>9} {:>9}",
        "decoder", "case", "IoU py", "IoU meta", "score", "score py"
    )];
    let mut failures = Vec::new();
    for pair in pairs() {
        let refs = reference["pairs"]
            .as_array()
            .unwrap()
            .iter()
            .find(|r| pair.decoder.ends_with(r["decoder"].as_str().unwrap()))
            .unwrap_or_else(|| panic!("no reference for {}", pair.decoder.display()));
        // Hiera projects each block's queries, keys and values jointly and splits the result; on
        // the CPU the library splits the weights instead (12 blocks in tiny, 16 in small), leaves
        // out the keys' bias (the softmax cancels it) and moves the values' into the output
        // projection, so the parity below holds with those rewritten.
        let fusion = open_encoded(&pair).0.encoder.attention_fusion().clone();
        let blocks = if pair.model.contains("small") { 16 } else { 12 };
        assert_eq!(
            [
                fusion.count(sam2::models::Rewrite::QkvSplit),
                fusion.count_of(sam2::models::Rewrite::QkvSplit, "keys without their bias"),
                fusion.count_of(
                    sam2::models::Rewrite::QkvSplit,
                    "values\' bias in the output projection"
                )
            ],
            [blocks; 3],
            "{}: {fusion}",
            pair.encoder.display()
        );
        for (name, got) in run_cases(&pair, cases) {
            let name = name.as_str();
            let result = &refs["results"][name];
            let python = decode_rle(&result["python"]["rle"], plane);
            let meta = decode_rle(&result["meta"]["rle"], plane);
            let (iou_py, iou_meta) = (iou(got.mask(0), &python), iou(got.mask(0), &meta));
            let score_py = result["python"]["score"].as_f64().unwrap();
            let decoder = pair.decoder.file_name().unwrap().to_string_lossy();
            lines.push(format!(
                "{decoder:<44} {name:<14} {iou_py:>8.4} {iou_meta:>8.4} {:>9.4} {score_py:>9.4}",
                got.scores[0]
            ));
            if iou_py < 0.99 || (got.scores[0] as f64 - score_py).abs() > 0.02 {
                failures.push(format!(
                    "{decoder} {name}: IoU {iou_py:.4} with the Python pipeline, score {} vs {score_py}",
                    got.scores[0]
                ));
            }
        }
    }
    let text = lines.join("\n");
    println!("{text}");
    report("real_parity.txt", &text);
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// EdgeTAM's image pairs (issue 31: sam2-export-edgetam, ONNX Runtime's SAM2 tools run
/// on EdgeTAM's model) against EdgeTAM's own `SAM2ImagePredictor` on the same weights
/// (tools/references/edgetam_reference.py's `image_reference.json`, the cases above): every case's
/// mask IoU ≥ 0.99 and its score within 1e-3. Needs `$SAM2_EDGETAM_MODELS`
/// (tools/setup/setup-edgetam.sh): unset, or naming missing files, it fails.
#[test]
fn edgetam_image_pairs_match_edgetam_s_image_predictor() {
    const MIN_IOU: f64 = 0.99;
    const MAX_SCORE_DIFF: f64 = 1e-3;
    init_runtime();
    let dir = common::edgetam_dir();
    let ref_dir = std::env::var_os("SAM2_EDGETAM_REFERENCE")
        .map(PathBuf::from)
        .unwrap_or_else(|| dir.join("reference"));
    let reference = json(&ref_dir.join("image_reference.json"));
    let image = demo();
    let plane = image.width * image.height;
    let cases = reference["cases"].as_array().unwrap();
    let pairs = pairs_in(&dir);
    assert!(!pairs.is_empty(), "{} lists no image pair", dir.display());
    let mut lines = vec![format!(
        "{:<36} {:<14} {:>9} {:>9} {:>10} {:>9}",
        "decoder", "case", "IoU meta", "score", "score diff", "IoU onnx"
    )];
    let (mut worst_iou, mut worst_score) = (1.0f64, 0.0f64);
    let mut failures = Vec::new();
    for pair in pairs {
        let refs = reference["pairs"]
            .as_array()
            .unwrap()
            .iter()
            .find(|r| pair.decoder.ends_with(r["decoder"].as_str().unwrap()))
            .unwrap_or_else(|| panic!("no reference for {}", pair.decoder.display()));
        // RepViT-M1's 23 token mixers (a 3×3 and a 1×1 depthwise convolution and the input,
        // summed) load as one convolution each on the CPU, so the parity below holds with them
        // merged.
        let fusion = open_encoded(&pair).0.encoder.attention_fusion().clone();
        assert_eq!(
            fusion.count(sam2::models::Rewrite::DepthwiseBranches),
            23,
            "{}: {fusion}",
            pair.encoder.display()
        );
        for (name, got) in run_cases(&pair, cases) {
            let result = &refs["results"][name.as_str()];
            let meta = decode_rle(&result["meta"]["rle"], plane);
            let onnx = decode_rle(&result["onnx"]["rle"], plane);
            let iou_meta = iou(got.mask(0), &meta);
            let score_diff =
                (got.scores[0] as f64 - result["meta"]["score"].as_f64().unwrap()).abs();
            let decoder = pair.decoder.file_name().unwrap().to_string_lossy();
            lines.push(format!(
                "{decoder:<36} {name:<14} {iou_meta:>9.5} {:>9.4} {score_diff:>10.2e} {:>9.5}",
                got.scores[0],
                iou(got.mask(0), &onnx)
            ));
            worst_iou = worst_iou.min(iou_meta);
            worst_score = worst_score.max(score_diff);
            if iou_meta < MIN_IOU || score_diff > MAX_SCORE_DIFF {
                failures.push(format!(
                    "{decoder} {name}: IoU {iou_meta:.5} with EdgeTAM's predictor, score {score_diff:.2e} apart"
                ));
            }
        }
    }
    lines.push(format!(
        "EdgeTAM image pairs vs EdgeTAM's SAM2ImagePredictor, {} cases: worst IoU {worst_iou:.5} (goal >= \
         {MIN_IOU}), score diff {worst_score:.2e} (<= {MAX_SCORE_DIFF:e})",
        lines.len() - 1
    ));
    let text = lines.join("\n");
    println!("{text}");
    report("edgetam_image_parity.txt", &text);
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

fn prompts_for_batch(image: &Image, with_masks: Option<&Prediction>) -> Vec<Prompt> {
    let (w, h) = (image.width as f32, image.height as f32);
    let mut prompts = vec![
        click(580.0, 190.0),
        click(160.0, 440.0),
        Prompt {
            bbox: Some([52.0, 82.0, 327.0, 257.0]),
            ..Default::default()
        },
        Prompt {
            points: vec![
                Point {
                    x: 160.0,
                    y: 440.0,
                    positive: true,
                },
                Point {
                    x: 630.0,
                    y: 460.0,
                    positive: false,
                },
            ],
            ..Default::default()
        },
        click(w * 0.1, h * 0.9),
        click(w * 0.5, h * 0.5),
        Prompt {
            points: vec![Point {
                x: 580.0,
                y: 190.0,
                positive: true,
            }],
            bbox: Some([420.0, 60.0, 760.0, 330.0]),
            mask_input: None,
        },
        click(w - 1.0, 0.0),
    ];
    if let Some(previous) = with_masks {
        // Every other prompt refines an earlier result: batches mix prompts with and without.
        for (k, p) in prompts.iter_mut().enumerate().filter(|(k, _)| k % 2 == 0) {
            p.mask_input = Some(previous.low_res_logits(k).to_vec());
        }
    }
    prompts
}

/// A batch of 8 prompts gives what 8 single calls give, on every real decoder: with and without
/// mask inputs (mixed in one batch), single and multimask.
#[test]
fn a_batch_of_eight_equals_eight_single_calls() {
    init_runtime();
    let image = demo();
    for pair in tiny_pairs() {
        let (encoded, predictor) = open_encoded(&pair);
        // The decoder's channels-first layer norms (upscaling, mask input) take their means as
        // matrix products on the CPU, whatever the batch: this test runs them at 8 and at 1.
        let fusion = predictor.attention_fusion();
        assert_eq!(
            fusion.count(sam2::models::Rewrite::ChannelMeans),
            4,
            "{}: {fusion}",
            pair.decoder.display()
        );
        let embedding = &encoded.embedding;
        let first = predictor
            .predict(
                embedding,
                &prompts_for_batch(&image, None),
                PredictOptions::default(),
            )
            .unwrap();
        for with_masks in [false, true] {
            let prompts = prompts_for_batch(&image, with_masks.then_some(&first));
            for multimask in [false, true] {
                let options = PredictOptions { multimask };
                let batch = predictor.predict(embedding, &prompts, options).unwrap();
                assert_eq!(batch.objects, 8);
                let m = batch.candidates;
                let expect_m = if multimask && pair.multimask_decoder {
                    3
                } else {
                    1
                };
                assert_eq!(m, expect_m, "{}", pair.decoder.display());
                for (l, prompt) in prompts.iter().enumerate() {
                    let one = predictor
                        .predict(embedding, std::slice::from_ref(prompt), options)
                        .unwrap();
                    for k in 0..m {
                        let what = format!(
                            "{} prompt {l} candidate {k} (mask input {with_masks}, multimask {multimask})",
                            pair.decoder.display()
                        );
                        let agree = iou(batch.mask(l * m + k), one.mask(k));
                        // Batched kernels round differently from single-row ones: a few pixels of 480 000 may
                        // flip (measured: IoU ≥ 0.99998), never more.
                        assert!(agree >= 0.999, "{what}: IoU {agree}");
                        let (a, b) = (batch.scores[l * m + k], one.scores[k]);
                        assert!((a - b).abs() < 1e-4, "{what}: score {a} vs {b}");
                        assert_eq!(batch.candidate_index[l * m + k], one.candidate_index[k]);
                    }
                }
            }
        }
    }
}

/// Multimask returns the model's candidates; the single-mask answer is the best of them for the
/// decoders that return three, and each candidate differs from the others.
#[test]
fn multimask_returns_the_candidates_and_the_best_is_the_single_answer() {
    init_runtime();
    for pair in tiny_pairs() {
        let (encoded, predictor) = open_encoded(&pair);
        let embedding = &encoded.embedding;
        let prompt = click(580.0, 190.0);
        let multi = predictor
            .predict(
                embedding,
                std::slice::from_ref(&prompt),
                PredictOptions { multimask: true },
            )
            .unwrap();
        let one = single(&predictor, embedding, prompt);
        if pair.multimask_decoder {
            assert_eq!(multi.candidates, 3);
            let best = (0..3)
                .max_by(|&a, &b| multi.scores[a].total_cmp(&multi.scores[b]))
                .unwrap();
            assert_eq!(multi.mask(best), one.mask(0));
            assert!(multi.mask(0) != multi.mask(1) || multi.mask(1) != multi.mask(2));
        } else {
            assert_eq!(
                multi.candidates, 1,
                "ONNX Runtime's default decoder returns one"
            );
            assert_eq!(multi.mask(0), one.mask(0));
        }
    }
}

/// RGB, BGR, RGBA and BGRA of the same pixels give the same embedding bytes; grey encodes too.
/// The formats are converted into the model's input before the model runs, the same for every
/// export, so one real export (samexporter's SAM2.1 tiny) checks it here; the generated pairs
/// check every format and stride against their masks (tests/it/pipeline.rs, tests/c/test_segment.c).
#[test]
fn every_pixel_format_encodes() {
    init_runtime();
    let image = demo();
    for pair in tiny_pairs().into_iter().take(1) {
        let (encoded, predictor) = open_encoded(&pair);
        let (encoder, reference) = (&encoded.encoder, &encoded.embedding);
        let px = image.width * image.height;
        let mut bgr = Vec::with_capacity(px * 3);
        let mut rgba = Vec::with_capacity(px * 4);
        let mut bgra = Vec::with_capacity(px * 4);
        let mut gray = Vec::with_capacity(px);
        for p in image.data.chunks(3) {
            bgr.extend([p[2], p[1], p[0]]);
            rgba.extend([p[0], p[1], p[2], 255]);
            bgra.extend([p[2], p[1], p[0], 7]);
            gray.push(((p[0] as u32 * 77 + p[1] as u32 * 150 + p[2] as u32 * 29) >> 8) as u8);
        }
        for (data, format) in [
            (&bgr, PixelFormat::Bgr),
            (&rgba, PixelFormat::Rgba),
            (&bgra, PixelFormat::Bgra),
        ] {
            let view = ImageView::packed(data, image.width, image.height, format).unwrap();
            let e = encoder.encode(&view).unwrap();
            for (a, b) in e.tensors().iter().zip(reference.tensors()) {
                assert!(
                    a.host_bytes().unwrap() == b.host_bytes().unwrap(),
                    "{format:?} gives another embedding than RGB"
                );
            }
        }
        let view = ImageView::packed(&gray, image.width, image.height, PixelFormat::Gray).unwrap();
        let e = encoder.encode(&view).unwrap();
        let r = single(&predictor, &e, click(580.0, 190.0));
        assert!(r.areas[0] > 0 && r.scores[0].is_finite());
    }
}

/// An embedding saved to a file and loaded back predicts the same masks, for SAM2.1 tiny and for
/// EdgeTAM; a file of one model is refused where another model's is expected.
#[test]
fn save_and_load_round_trip() {
    init_runtime();
    let image = demo();
    let dir = std::env::temp_dir().join(format!("sam2-real-files-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let sam2_encoder = open_encoded(&tiny_pairs()[0]).0;
    for pair in tiny_pairs().into_iter().chain(edgetam_pairs()) {
        let (encoded, predictor) = open_encoded(&pair);
        let (encoder, embedding) = (&encoded.encoder, &encoded.embedding);
        let path = dir.join("e.sam2");
        sam2::embedding_file::save(embedding, &path).unwrap();
        let loaded = sam2::embedding_file::load(&path, Some(encoder.fingerprint())).unwrap();
        let prompts = prompts_for_batch(&image, None);
        let a = predictor
            .predict(embedding, &prompts, PredictOptions::default())
            .unwrap();
        let b = predictor
            .predict(&loaded, &prompts, PredictOptions::default())
            .unwrap();
        assert_eq!(a.masks, b.masks);
        assert_eq!(a.scores, b.scores);
        if pair.model != "sam2.1_hiera_tiny" {
            let err = sam2::embedding_file::load(&path, Some(sam2_encoder.encoder.fingerprint()))
                .expect_err("another model's embedding file is refused");
            assert!(
                matches!(err, sam2::Error::ModelMismatch(_)),
                "{}: {err}",
                pair.encoder.display()
            );
        }
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

/// Two encoders and two predictors of one model hold one copy of the weights, and compute what a
/// single one computes.
#[test]
fn sessions_of_a_real_model_share_one_copy_of_the_weights() {
    init_runtime();
    let image = demo();
    let pair = &tiny_pairs()[0];
    let (a, pa) = open(pair);
    let (b, pb) = open(pair);
    assert_eq!(a.weights_address(), b.weights_address());
    assert_eq!(pa.weights_address(), pb.weights_address());
    assert!(
        a.weight_bytes() > 100 << 20,
        "the tiny encoder's weights are shared"
    );
    let (ea, eb) = (
        a.encode(&rgb(&image)).unwrap(),
        b.encode(&rgb(&image)).unwrap(),
    );
    for (x, y) in ea.tensors().iter().zip(eb.tensors()) {
        assert!(x.host_bytes().unwrap() == y.host_bytes().unwrap());
    }
    let ma = single(&pa, &ea, click(580.0, 190.0));
    let mb = single(&pb, &eb, click(580.0, 190.0));
    assert_eq!(ma.masks, mb.masks);
}

/// Every optimisation level encodes and predicts with shared weights, and the masks agree with
/// the default's (levels change the arithmetic slightly: fused kernels). Copied weights are
/// checked at the default level: another copy, and the same embedding bit for bit (a level
/// decides which graph is built, the policy only where its weights live).
#[test]
fn every_optimization_level_and_weight_policy_works() {
    init_runtime();
    let image = demo();
    let pair = &tiny_pairs()[0];
    let (encoded, predictor) = open_encoded(pair);
    let encoder = &encoded.encoder;
    let baseline = single(&predictor, &encoded.embedding, click(580.0, 190.0));
    use sam2::device::{Optimization, WeightSharing};
    for (level, weights) in [
        (Optimization::None, WeightSharing::Shared),
        (Optimization::Basic, WeightSharing::Shared),
        (Optimization::All, WeightSharing::Copy),
    ] {
        let mut options = EncoderOptions::default();
        options.session.optimization = level;
        options.session.weights = weights;
        let mut poptions = PredictorOptions::default();
        poptions.session.optimization = level;
        poptions.session.weights = weights;
        let what = format!("{level:?} {weights:?}");
        let e = Encoder::new(&pair.encoder, &options).expect(&what);
        let p = Predictor::new(&pair.decoder, &poptions).expect(&what);
        let emb = e.encode(&rgb(&image)).expect(&what);
        if weights == WeightSharing::Copy {
            assert_ne!(e.weights_address(), encoder.weights_address(), "{what}");
            assert_eq!(
                level,
                Optimization::default(),
                "{what}: compared with the default"
            );
            for (a, b) in emb.tensors().iter().zip(encoded.embedding.tensors()) {
                assert!(
                    a.host_bytes().unwrap() == b.host_bytes().unwrap(),
                    "{what}: another embedding than the shared weights'"
                );
            }
        }
        let r = single(&p, &emb, click(580.0, 190.0));
        let agree = iou(r.mask(0), baseline.mask(0));
        println!("{what}: IoU with the default {agree:.4}");
        assert!(
            agree >= 0.98,
            "{what}: IoU {agree} with the default options"
        );
    }
}

/// The embedding cache serves a real encoder (SAM2.1 tiny's, EdgeTAM's): a second request is a
/// hit on the same embedding.
#[test]
fn the_cache_serves_real_encoders() {
    init_runtime();
    let image = demo();
    let pairs = tiny_pairs();
    let edgetam = edgetam_pairs();
    for pair in pairs.iter().take(1).chain(edgetam.iter().take(1)) {
        cache_serves(pair, &image);
    }
}

fn cache_serves(pair: &Pair, image: &Image) {
    let (encoder, predictor) = open(pair);
    let encoder = Arc::new(encoder);
    let cache = EmbeddingCache::new(Default::default()).unwrap();
    let (first, _) = cache.encode(&encoder, &rgb(image)).unwrap();
    let (second, source) = cache.encode(&encoder, &rgb(image)).unwrap();
    assert!(Arc::ptr_eq(&first, &second));
    assert_eq!(source, sam2::cache::Source::Cache);
    assert_eq!(cache.stats().misses, 1);
    let r = single(&predictor, &second, click(580.0, 190.0));
    let direct = single(
        &predictor,
        &encoder.encode(&rgb(image)).unwrap(),
        click(580.0, 190.0),
    );
    assert_eq!(r.masks, direct.masks, "{}", pair.decoder.display());
}

/// Issue 32: an image larger than the model's input is shrunk as `SAM2ImagePredictor` shrinks it
/// (torchvision's antialiased bilinear `Resize`), so on a 1920×1080 landscape and a 1080×1920
/// portrait (tools/references/resize_reference.py) the library's input tensor is Meta's transform's
/// to float32 rounding, the SAM2.1 tiny embedding is Meta's, and the masks of a click and a box
/// match Meta's predictor with the tolerances of the parity test above (IoU ≥ 0.99, score within
/// 0.02). Without the antialiasing the tensor differs by tenths and the embedding by 5e-3.
#[test]
fn large_images_are_resized_as_sam2_image_predictor_resizes_them() {
    const MAX_INPUT_DIFF: f64 = 1e-5;
    const MAX_EMBED_DIFF: f64 = 1e-4;
    init_runtime();
    let dir = real_dir().join("resize");
    let reference = json(&dir.join("reference.json"));
    let pair = tiny_pairs()
        .into_iter()
        .find(|p| p.family == "samexporter")
        .expect("the samexporter export of SAM2.1 tiny");
    let (encoded, predictor) = open_encoded(&pair);
    let encoder = &encoded.encoder;
    let mut lines = vec![format!(
        "{:<10} {:>9} {:>12} {:>12} {:<6} {:>8} {:>10}",
        "image", "size", "input diff", "embed diff", "case", "IoU", "score diff"
    )];
    let mut failures = Vec::new();
    for img in reference["images"].as_array().unwrap() {
        let name = img["name"].as_str().unwrap();
        let (w, h) = (
            img["width"].as_u64().unwrap() as usize,
            img["height"].as_u64().unwrap() as usize,
        );
        let pixels = std::fs::read(dir.join(img["pixels"].as_str().unwrap())).unwrap();
        let view = ImageView::packed(&pixels, w, h, PixelFormat::Rgb).unwrap();
        let (shape, meta_input) = npy_f32(&dir.join(img["input"].as_str().unwrap()));
        assert_eq!(shape, [3, 1024, 1024]);
        let input_diff = max_abs_diff(&sam2::test_support::preprocess(&view, 1024), &meta_input);
        let embedding = encoder.encode(&view).unwrap();
        let ours = le_floats(embedding.tensors()[2].host_bytes().unwrap());
        let (_, meta_embed) = npy_f32(&dir.join(img["embed"].as_str().unwrap()));
        let embed_diff = max_abs_diff(&ours, &meta_embed);
        if input_diff > MAX_INPUT_DIFF || embed_diff > MAX_EMBED_DIFF {
            failures.push(format!(
                "{name}: input differs by {input_diff:.2e} (≤ {MAX_INPUT_DIFF:e}), embedding by \
                 {embed_diff:.2e} (≤ {MAX_EMBED_DIFF:e})"
            ));
        }
        for case in img["cases"].as_array().unwrap() {
            let case_name = case["name"].as_str().unwrap();
            let got = single(&predictor, &embedding, prompt_of(case));
            let want = decode_rle(&case["rle"], w * h);
            let agree = iou(got.mask(0), &want);
            let score_diff = (got.scores[0] as f64 - case["score"].as_f64().unwrap()).abs();
            lines.push(format!(
                "{name:<10} {:>9} {input_diff:>12.2e} {embed_diff:>12.2e} {case_name:<6} \
                 {agree:>8.4} {score_diff:>10.4}",
                format!("{w}×{h}")
            ));
            if agree < 0.99 || score_diff > 0.02 {
                failures.push(format!(
                    "{name} {case_name}: IoU {agree:.4} with Meta's predictor, score off by \
                     {score_diff:.4}"
                ));
            }
        }
    }
    let text = lines.join("\n");
    println!("{text}");
    report("resize_parity.txt", &text);
    assert!(failures.is_empty(), "{failures:#?}");
}

/// Every rewrite switched off at once (`SessionOptions::rewrites`): the real SAM2.1 tiny encoder
/// (its attention fused, its joint projections split) and EdgeTAM's (its depthwise branches
/// merged) load as exported, say so, and give the embedding they give with the rewrites, within
/// float noise. The embeddings with the rewrites come from `open_encoded` (no extra encode).
#[test]
fn the_rewrites_switched_off_leave_the_real_encoders_embeddings_as_they_are() {
    use sam2::models::{Rewrite, Rewrites};
    init_runtime();
    let tiny = tiny_pairs().into_iter().next().expect("a SAM2.1 tiny pair");
    let edgetam = edgetam_pairs().into_iter().next().expect("an EdgeTAM pair");
    for (pair, ran) in [
        (tiny, &[Rewrite::Attention, Rewrite::QkvSplit][..]),
        (edgetam, &[Rewrite::DepthwiseBranches][..]),
    ] {
        let (on, _) = open_encoded(&pair);
        let counts = on.encoder.attention_fusion().counts();
        for r in ran {
            assert!(
                counts.iter().any(|(c, n)| c == r && *n > 0),
                "{}: {r} did not run: {counts:?}",
                pair.encoder.display()
            );
        }
        let mut options = EncoderOptions::default();
        options.session.rewrites = Rewrites::NONE;
        let off = Encoder::new(&pair.encoder, &options).unwrap();
        let report = off.attention_fusion();
        assert_eq!(report.off, Rewrite::ALL, "{report}");
        assert!(
            report.counts().is_empty() && report.fused_count() == 0,
            "{report}"
        );
        assert!(
            report.to_string().ends_with(
                "switched off: attention, values-after-attention, int8-scores, channel-means, \
                 qkv-split, depthwise-branches"
            ),
            "{report}"
        );
        let embedding = off.encode(&rgb(&demo())).unwrap();
        for (a, b) in on.embedding.tensors().iter().zip(embedding.tensors()) {
            let floats = |t: &sam2::embedding::EmbeddingTensor| -> Vec<f32> {
                t.host_bytes()
                    .unwrap()
                    .chunks_exact(4)
                    .map(|c| f32::from_le_bytes(c.try_into().unwrap()))
                    .collect()
            };
            let (a, b) = (floats(a), floats(b));
            let largest = a.iter().fold(0f32, |m, v| m.max(v.abs()));
            let worst = a
                .iter()
                .zip(&b)
                .fold(0f32, |m, (x, y)| m.max((x - y).abs()));
            println!(
                "{}: rewrites off against on: largest {largest}, worst difference {worst}",
                pair.encoder.display()
            );
            assert!(worst <= 1e-4 * largest.max(1.0), "{worst} of {largest}");
        }
    }
}
