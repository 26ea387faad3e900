//! Precision variants (sam2-variant): the library recognises an int8 variant and
//! an fp16 one, reports them, and runs them exactly as the original, as other models (their own
//! fingerprint and precision, in memory and in embedding files). Agreement with the original: on
//! the generated tiny_a pair (masks against the ground truth of testdata/shapes.ppm, made by the
//! set-up in `$SAM2_MODELS/variants`) and on the real SAM2.1 tiny exports of both exporters
//! (`$SAM2_REAL_VARIANTS`, tools/setup/setup-real.sh): embedding correlation and mask agreement per
//! parity case of the real reference, printed and written to the report
//! (`precision_agreement.txt`). The fp16 variant on a device: tests/webgpu.rs.

use crate::common;

use std::path::{Path, PathBuf};

use common::*;
use sam2::models::Precision;
use sam2::{Encoder, EncoderOptions, Error, ImageView, PixelFormat, Predictor};

const VARIANTS: [(&str, Precision); 2] = [("int8", Precision::Int8), ("fp16", Precision::Fp16)];

/// The tiny_a variant of this precision (`int8`, `fp16`), made by the set-up.
fn variant_pair(precision: &str) -> (Encoder, Predictor) {
    init_runtime();
    let dir = models_dir()
        .join("variants")
        .join(format!("tiny_a_{precision}"));
    let encoder = Encoder::new(dir.join("tiny_a_encoder.onnx"), &EncoderOptions::default())
        .unwrap_or_else(|e| panic!("{}: {e} (tools/setup/setup.sh makes it)", dir.display()));
    let predictor = Predictor::new(
        dir.join("tiny_a_decoder.onnx"),
        &sam2::PredictorOptions {
            encoder_fingerprint: Some(encoder.fingerprint()),
            ..Default::default()
        },
    )
    .unwrap();
    (encoder, predictor)
}

#[test]
fn each_variant_says_what_it_is_and_the_original_is_float32() {
    let (original, _) = open_pair("tiny_a");
    assert_eq!(original.variant().precision, Precision::Fp32);
    for (name, precision) in VARIANTS {
        let (encoder, _) = variant_pair(name);
        let variant = encoder.variant();
        assert_eq!(variant.precision, precision);
        assert!(!variant.inferred, "{name}: declared in its metadata");
        let source = variant.source.as_deref().unwrap();
        assert!(
            source.starts_with("tiny_a_encoder.onnx sha256:") && source.len() == 27 + 64,
            "{source}"
        );
        let tool = if precision == Precision::Int8 {
            "quantize_dynamic"
        } else {
            "convert_float_to_float16"
        };
        assert!(
            variant.tool.as_deref().unwrap().contains(tool),
            "{variant:?}"
        );
        assert_ne!(original.fingerprint(), encoder.fingerprint());
    }
}

#[test]
fn each_variants_masks_match_the_ground_truth_as_the_original_does() {
    let (fp32_encoder, fp32_predictor) = open_pair("tiny_a");
    let reference = encode_shapes(&fp32_encoder);
    assert_eq!(reference.precision(), Precision::Fp32);
    let all = shapes();
    for (name, precision) in VARIANTS {
        let (encoder, predictor) = variant_pair(name);
        let embedding = encode_shapes(&encoder);
        assert_eq!(embedding.precision(), precision);
        for (shape, prompt) in all.iter().zip(shape_clicks()) {
            let want = expected_click_mask(shape, &all);
            let got = predictor
                .predict(
                    &embedding,
                    std::slice::from_ref(&prompt),
                    Default::default(),
                )
                .unwrap();
            let fp32 = fp32_predictor
                .predict(&reference, &[prompt], Default::default())
                .unwrap();
            let (iou_variant, iou_fp32) = (iou(got.mask(0), &want), iou(fp32.mask(0), &want));
            println!(
                "{:<12} IoU with the ground truth: {name} {iou_variant:.4}, fp32 {iou_fp32:.4}",
                shape.name
            );
            assert!(
                iou_variant >= 0.95 && iou_variant >= iou_fp32 - 0.02,
                "{}: {name} IoU {iou_variant:.4}, fp32 {iou_fp32:.4}",
                shape.name
            );
        }
        // The original's predictor (bound to the original encoder) refuses it, naming the variant.
        let err = fp32_predictor
            .predict(&embedding, &[click(10.0, 10.0)], Default::default())
            .unwrap_err();
        assert!(
            matches!(err, Error::ModelMismatch(ref m) if m.contains(&format!("({name})"))),
            "{err}"
        );
    }
}

#[test]
fn a_variants_embedding_is_another_models_in_memory_and_in_files() {
    let (encoder, _) = variant_pair("int8");
    let (fp32_encoder, fp32_predictor) = open_pair("tiny_a");
    let embedding = encode_shapes(&encoder);
    // The original's predictor (bound to the original encoder) refuses it, naming the variant.
    let err = fp32_predictor
        .predict(&embedding, &[click(10.0, 10.0)], Default::default())
        .unwrap_err();
    assert!(
        matches!(err, Error::ModelMismatch(ref m) if m.contains("(int8)")),
        "{err}"
    );
    // Saved and loaded, the file keeps the precision; loading it for the original is refused.
    let dir = tempdir();
    let path = dir.join("int8.sam2emb");
    sam2::embedding_file::save(&embedding, &path).unwrap();
    let text = header_text(&path);
    assert!(text.contains("\"encoder_precision\":\"int8\""), "{text}");
    assert!(text.contains("\"format_version\":\"3\""), "{text}");
    let loaded = sam2::embedding_file::load(&path, Some(encoder.fingerprint())).unwrap();
    assert_eq!(loaded.precision(), Precision::Int8);
    let err = sam2::embedding_file::load(&path, Some(fp32_encoder.fingerprint())).unwrap_err();
    assert!(
        matches!(err, Error::ModelMismatch(ref m) if m.contains("(int8)")),
        "{err}"
    );
    // The original's embedding files say fp32.
    let fp32_path = dir.join("fp32.sam2emb");
    sam2::embedding_file::save(&encode_shapes(&fp32_encoder), &fp32_path).unwrap();
    assert!(header_text(&fp32_path).contains("\"encoder_precision\":\"fp32\""));
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn the_cache_keeps_a_variant_apart_from_its_original() {
    let encoder = std::sync::Arc::new(variant_pair("int8").0);
    let fp32_encoder = std::sync::Arc::new(open_pair("tiny_a").0);
    let img = read_pnm(&testdata("shapes.ppm"));
    let view = ImageView::packed(&img.data, img.width, img.height, PixelFormat::Rgb).unwrap();
    let cache = sam2::cache::EmbeddingCache::new(sam2::cache::CacheOptions::default()).unwrap();
    let (a, _) = cache.encode(&encoder, &view).unwrap();
    let (b, _) = cache.encode(&fp32_encoder, &view).unwrap();
    assert_eq!(a.precision(), Precision::Int8);
    assert_eq!(b.precision(), Precision::Fp32);
    assert_ne!(a.fingerprint(), b.fingerprint());
    assert_eq!(cache.stats().entries, 2, "one entry per model");
}

/// The JSON header of an embedding file, without spaces.
fn header_text(path: &Path) -> String {
    let bytes = std::fs::read(path).unwrap();
    let n = u64::from_le_bytes(bytes[..8].try_into().unwrap()) as usize;
    let value: serde_json::Value = serde_json::from_slice(&bytes[8..8 + n]).unwrap();
    serde_json::to_string(&value).unwrap()
}

fn tempdir() -> PathBuf {
    let dir = std::env::temp_dir().join(format!("sam2-precision-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// The real SAM2.1 tiny pairs against their int8 and fp16 variants, on the parity cases of the
/// real reference (the prompts of tools/references/real_reference.py on testdata/demo.ppm).
/// Random weights are not trained ones: these figures show that a variant computes what the
/// original computes, to its rounding, not how a trained model's masks degrade.
#[test]
fn real_variants_agree_with_their_originals() {
    let Some(variants) = std::env::var_os("SAM2_REAL_VARIANTS").map(PathBuf::from) else {
        panic!("SAM2_REAL_VARIANTS is not set: run tools/setup/setup-real.sh (the README's test command does)");
    };
    init_runtime();
    let real = PathBuf::from(std::env::var_os("SAM2_REAL_MODELS").unwrap());
    let reference: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(real.join("reference.json")).unwrap())
            .unwrap();
    let image = read_pnm(&testdata("demo.ppm"));
    let view = ImageView::packed(&image.data, image.width, image.height, PixelFormat::Rgb).unwrap();
    let mut lines = vec![format!(
        "{:<9} {:<12} {:<14} {:>10} {:>10} {:>10} {:>12} {:>9}",
        "precision", "exporter", "case", "corr hr0", "corr hr1", "corr emb", "IoU |l|>=1", "Δscore"
    )];
    let mut failures = Vec::new();
    for (name, precision) in VARIANTS {
        // What each precision's rounding should keep: int8 weights and activations move an
        // embedding more than float16 arithmetic does.
        let (min_corr, min_agreement) = match precision {
            Precision::Int8 => (0.999, 0.97),
            _ => (0.9999, 0.99),
        };
        for family in ["samexporter", "onnxruntime"] {
            let (encoder_path, decoder_path) = real_pair(family);
            let dir = match precision {
                Precision::Int8 => family.to_string(),
                _ => format!("{family}-{name}"),
            };
            let variant_path = variants.join(dir).join(encoder_path.file_name().unwrap());
            let variant = Encoder::new(&variant_path, &EncoderOptions::default())
                .unwrap_or_else(|e| panic!("{}: {e}", variant_path.display()));
            assert_eq!(variant.variant().precision, precision);
            if family == "onnxruntime" && precision == Precision::Int8 {
                // The same network as samexporter's (one checkpoint, the same quantisation: the
                // figures came out identical to the last digit): recognised, with its own naming.
                assert_eq!(variant.spec().family.name(), "onnxruntime");
                continue;
            }
            let original = Encoder::new(&encoder_path, &EncoderOptions::default()).unwrap();
            assert_eq!(variant.spec().family, original.spec().family);
            // The variant's own decoder is the original's, copied.
            let decoder = Predictor::new(&decoder_path, &Default::default()).unwrap();
            let (a, b) = (
                original.encode(&view).unwrap(),
                variant.encode(&view).unwrap(),
            );
            let corr: Vec<f64> = (0..3)
                .map(|i| {
                    correlation(
                        &le_floats(a.tensors()[i].host_bytes().unwrap()),
                        &le_floats(b.tensors()[i].host_bytes().unwrap()),
                    )
                })
                .collect();
            for case in reference["cases"].as_array().unwrap() {
                let case_name = case["name"].as_str().unwrap();
                if case["mask_from"].is_string() {
                    continue; // a mask prompt needs the previous case's logits: the point cases cover it
                }
                let prompt = prompt_of(case);
                let ra = decoder
                    .predict(&a, std::slice::from_ref(&prompt), Default::default())
                    .unwrap();
                let rb = decoder.predict(&b, &[prompt], Default::default()).unwrap();
                let agreement = confident_iou(rb.low_res_logits(0), ra.low_res_logits(0));
                let dscore = (ra.scores[0] - rb.scores[0]).abs();
                lines.push(format!(
                    "{name:<9} {family:<12} {case_name:<14} {:>10.7} {:>10.7} {:>10.7} {agreement:>12.4} {dscore:>9.4}",
                    corr[0], corr[1], corr[2]
                ));
                if agreement < min_agreement || corr.iter().any(|&c| c < min_corr) {
                    failures.push(format!(
                        "{name} {family} {case_name}: mask agreement {agreement:.4}, correlations {corr:?}"
                    ));
                }
            }
        }
    }
    let text = lines.join("\n");
    println!("{text}");
    if let Some(dir) = std::env::var_os("SAM2_REPORT_DIR") {
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(PathBuf::from(dir).join("precision_agreement.txt"), &text).unwrap();
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}
