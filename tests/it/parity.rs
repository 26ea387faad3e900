//! Parity with the Python reference client (tools/references/reference_check.py, onnxruntime's
//! Python API with numpy pre/post-processing written from the public SAM2 conventions): same image,
//! same prompts → the same masks and IoU predictions.

use crate::common;

use common::*;
use sam2::{
    Encoder, EncoderOptions, ImageView, PixelFormat, Point, PredictOptions, Predictor,
    PredictorOptions, Prompt,
};
use sha2::{Digest, Sha256};

fn reference() -> (std::path::PathBuf, serde_json::Value) {
    let dir = models_dir().join("reference");
    let text = std::fs::read_to_string(dir.join("reference.json"))
        .expect("models/reference is written by tools/setup/setup.sh (reference_check.py --dump)");
    (dir, serde_json::from_str(&text).unwrap())
}

#[test]
fn preprocessing_is_bit_identical_to_the_reference() {
    let (dir, _) = reference();
    let expected: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("preprocess.json")).unwrap())
            .unwrap();
    let img = read_pnm(&testdata("shapes.ppm"));
    let view = ImageView::packed(&img.data, img.width, img.height, PixelFormat::Rgb).unwrap();
    let tensor = sam2::test_support::preprocess(&view, 1024);
    let bytes: Vec<u8> = tensor.iter().flat_map(|v| v.to_le_bytes()).collect();
    let got = format!("{:x}", Sha256::digest(&bytes));
    assert_eq!(
        got,
        expected["tensors"]["float32"]["sha256"].as_str().unwrap(),
        "float32 tensor differs"
    );
    let half: Vec<u8> = tensor
        .iter()
        .flat_map(|v| sam2::test_support::f32_to_f16_bits(*v).to_le_bytes())
        .collect();
    let got = format!("{:x}", Sha256::digest(&half));
    assert_eq!(
        got,
        expected["tensors"]["float16"]["sha256"].as_str().unwrap(),
        "float16 tensor differs"
    );
}

#[test]
fn masks_and_scores_match_the_reference_for_every_contract() {
    init_runtime();
    let (dir, cases) = reference();
    let img = read_pnm(&testdata("shapes.ppm"));
    let view = ImageView::packed(&img.data, img.width, img.height, PixelFormat::Rgb).unwrap();
    let mut checked = 0;
    let mut identical = 0;
    for pair in ["tiny_a", "tiny_b", "tiny_c", "tiny_a_fp16"] {
        let encoder = Encoder::new(
            model(&format!("{pair}_encoder.onnx")),
            &EncoderOptions::default(),
        )
        .unwrap();
        let predictor = Predictor::new(
            model(&format!("{pair}_decoder.onnx")),
            &PredictorOptions {
                encoder_fingerprint: Some(encoder.fingerprint()),
                ..Default::default()
            },
        )
        .unwrap();
        let embedding = encoder.encode(&view).unwrap();
        for case in cases
            .as_array()
            .unwrap()
            .iter()
            .filter(|c| c["pair"] == pair)
        {
            let points = case["points"]
                .as_array()
                .unwrap()
                .iter()
                .map(|p| Point {
                    x: p[0].as_f64().unwrap() as f32,
                    y: p[1].as_f64().unwrap() as f32,
                    positive: p[2].as_i64().unwrap() == 1,
                })
                .collect();
            let bbox = case["box"]
                .as_array()
                .map(|b| std::array::from_fn(|i| b[i].as_f64().unwrap() as f32));
            let prompt = Prompt {
                points,
                bbox,
                mask_input: None,
            };
            let multi = predictor
                .predict(
                    &embedding,
                    std::slice::from_ref(&prompt),
                    PredictOptions { multimask: true },
                )
                .unwrap();
            let want_scores: Vec<f32> = case["iou_predictions"]
                .as_array()
                .unwrap()
                .iter()
                .map(|v| v.as_f64().unwrap() as f32)
                .collect();
            for (got, want) in multi.scores.iter().zip(&want_scores) {
                assert!(
                    (got - want).abs() <= 1e-3,
                    "{pair} {}: scores {:?} vs {want_scores:?}",
                    case["case"],
                    multi.scores
                );
            }
            let single = predictor
                .predict(&embedding, &[prompt], PredictOptions::default())
                .unwrap();
            assert_eq!(
                single.candidate_index[0] as u64,
                case["best"].as_u64().unwrap(),
                "{pair} {}",
                case["case"]
            );
            let want = std::fs::read(dir.join(case["mask_file"].as_str().unwrap())).unwrap();
            let score = iou(single.mask(0), &want);
            assert!(
                score >= 0.99,
                "{pair} {}: IoU {score:.4} with the reference mask",
                case["case"]
            );
            checked += 1;
            identical += (single.mask(0) == want.as_slice()) as usize;
        }
    }
    assert_eq!(checked, 40, "every reference case was compared");
    println!("{identical} of {checked} masks identical to the reference, all with IoU >= 0.99");
}
