//! Encoder/decoder pairs found by file name, on the two directory layouts users have: the
//! generated models (`models/`, this project's naming) and the real exports of
//! tools/setup/setup-real.sh (samexporter's and ONNX Runtime's namings side by side).

use crate::common;

use std::path::{Path, PathBuf};

use sam2::models::{find_model_pair, DecoderExport, ModelNaming};
use sam2::{Predictor, PredictorOptions};

fn real_dir() -> PathBuf {
    std::env::var_os("SAM2_REAL_MODELS")
        .map(PathBuf::from)
        .expect(
            "SAM2_REAL_MODELS is not set: run tools/setup/setup-real.sh (the README's test command does)",
        )
}

fn name(p: &Path) -> &str {
    p.file_name().unwrap().to_str().unwrap()
}

#[test]
fn the_generated_models_are_found_by_name_and_the_directory_lists_them() {
    let dir = common::models_dir();
    let e = find_model_pair(&dir).unwrap_err().to_string();
    for pair in ["tiny_a ", "tiny_a_fp16 ", "tiny_b ", "tiny_c ", "bench_a "] {
        assert!(e.contains(pair), "{pair:?} missing from: {e}");
    }
    assert!(
        !e.contains("faulty_a"),
        "an encoder without a decoder is no pair: {e}"
    );
    let pair = find_model_pair(dir.join("tiny_c")).unwrap();
    assert_eq!(pair.naming, ModelNaming::Generator);
    assert_eq!(
        (name(&pair.encoder), name(&pair.decoder)),
        ("tiny_c_encoder.onnx", "tiny_c_decoder.onnx")
    );
    common::init_runtime();
    let predictor = Predictor::new(&pair.decoder, &PredictorOptions::default()).unwrap();
    assert_eq!(predictor.export(), DecoderExport::OnnxRuntime);
}

#[test]
fn the_real_exports_are_found_by_name_and_ambiguity_lists_the_candidates() {
    let dir = real_dir();
    let e = find_model_pair(&dir).unwrap_err();
    assert!(matches!(e, sam2::Error::Model { .. }));
    let e = e.to_string();
    assert!(e.contains("holds 4 encoder/decoder pairs"), "{e}");
    assert!(
        e.contains("sam2.1_hiera_small (samexporter: sam2.1_hiera_small.encoder.onnx)"),
        "{e}"
    );
    assert!(
        e.contains("sam2_hiera_tiny (ONNX Runtime's tools: sam2_hiera_tiny_image_encoder.onnx)"),
        "{e}"
    );

    // Two exporters wrote sam2.1_hiera_tiny: the name alone is ambiguous, a file is not.
    let e = find_model_pair(dir.join("sam2.1_hiera_tiny"))
        .unwrap_err()
        .to_string();
    assert!(e.contains("names 2 pairs"), "{e}");
    let ort = find_model_pair(dir.join("sam2.1_hiera_tiny_image_encoder.onnx")).unwrap();
    assert_eq!(
        name(&ort.decoder),
        "sam2.1_hiera_tiny_image_decoder_multi.onnx"
    );
    let sx = find_model_pair(dir.join("sam2.1_hiera_tiny.decoder.onnx")).unwrap();
    assert_eq!(name(&sx.encoder), "sam2.1_hiera_tiny.encoder.onnx");
    let small = find_model_pair(dir.join("sam2.1_hiera_small")).unwrap();
    assert_eq!(small.naming, ModelNaming::SamExporter);

    // A directory holding one export, as a user downloads it, is enough.
    let alone = std::env::temp_dir().join(format!("sam2-pair-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&alone);
    std::fs::create_dir_all(&alone).unwrap();
    for file in [
        "sam2_hiera_tiny_image_encoder.onnx",
        "sam2_hiera_tiny_image_decoder.onnx",
        "sam2_hiera_tiny_image_decoder_multi.onnx",
    ] {
        #[cfg(unix)]
        std::os::unix::fs::symlink(dir.join(file), alone.join(file)).unwrap();
        #[cfg(not(unix))]
        std::fs::copy(dir.join(file), alone.join(file)).unwrap();
    }
    let pair = find_model_pair(&alone).unwrap();
    assert_eq!(
        name(&pair.decoder),
        "sam2_hiera_tiny_image_decoder_multi.onnx"
    );
    common::init_runtime();
    let predictor = Predictor::new(&pair.decoder, &PredictorOptions::default()).unwrap();
    assert_eq!(predictor.export(), DecoderExport::OnnxRuntime);
    std::fs::remove_dir_all(alone).unwrap();
}

/// A directory of 20,000 models (10,000 encoders, most with a decoder, some alone) is searched
/// in linear time (each encoder used to scan every name: 11.6-22 s), and the message that lists
/// them stays short (it used to hold every name: 1 MB on one line).
#[test]
fn twenty_thousand_files_are_searched_quickly_and_the_message_is_bounded() {
    let dir = std::env::temp_dir().join(format!("sam2-pairs-20000-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    for i in 0..10_000 {
        std::fs::write(dir.join(format!("model{i:05}_encoder.onnx")), b"").unwrap();
        // Every tenth encoder has no decoder, and every tenth name is of samexporter's naming.
        let decoder = if i % 10 == 3 {
            format!("orphan{i:05}.decoder.onnx")
        } else {
            format!("model{i:05}_decoder.onnx")
        };
        std::fs::write(dir.join(decoder), b"").unwrap();
    }
    for (path, what) in [
        (dir.clone(), "holds 9000 encoder/decoder pairs"),
        (
            dir.join("model00003"),
            "no encoder/decoder pair of that name",
        ),
    ] {
        let started = std::time::Instant::now();
        let e = find_model_pair(&path).unwrap_err().to_string();
        let took = started.elapsed();
        println!(
            "find_model_pair({}) over 20,000 files: {:.3} s, message {} bytes",
            name(&path),
            took.as_secs_f64(),
            e.len()
        );
        assert!(e.contains(what), "{e}");
        assert!(e.contains("and 8980 more"), "{e}");
        assert!(e.len() < 4096, "the message is {} bytes", e.len());
        // A guard, not a benchmark: linear time is milliseconds; quadratic was 11.6-22 s.
        assert!(took.as_secs_f64() < 3.0, "took {took:?}");
    }
    let pair = find_model_pair(dir.join("model09999")).unwrap();
    assert_eq!(name(&pair.decoder), "model09999_decoder.onnx");
    std::fs::remove_dir_all(&dir).unwrap();
}
