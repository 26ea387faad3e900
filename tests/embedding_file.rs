//! Embedding residency and files: save/load round trips, refusal of device memory, hostile
//! files, and atomic saves that survive a killed process.

mod common;

use std::path::{Path, PathBuf};
use std::sync::Arc;

use common::*;
use sam2::{
    embedding_file, Embedding, Encoder, Error, ImageView, PixelFormat, PredictOptions, Predictor,
    Prompt,
};

fn setup(pair: &str) -> (Encoder, Predictor, Arc<Embedding>) {
    let (encoder, predictor) = open_pair(pair);
    let embedding = Arc::new(encode_shapes(&encoder));
    (encoder, predictor, embedding)
}

fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("sam2-files-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

fn prompts() -> Vec<Prompt> {
    shape_clicks()
}

#[test]
fn a_saved_embedding_loads_and_predicts_bit_for_bit_the_same() {
    for pair in ["tiny_a", "tiny_b", "tiny_c", "tiny_a_fp16"] {
        let (_, predictor, embedding) = setup(pair);
        let dir = scratch(pair);
        let path = dir.join("e.sam2");
        embedding_file::save(&embedding, &path).unwrap();
        let loaded = embedding_file::load(&path, predictor.expected_fingerprint()).unwrap();
        assert_eq!(loaded.image_size(), embedding.image_size());
        assert_eq!(loaded.fingerprint(), embedding.fingerprint());
        for (a, b) in loaded.tensors().iter().zip(embedding.tensors()) {
            assert_eq!(a.host_bytes().unwrap(), b.host_bytes().unwrap());
        }
        let opts = PredictOptions { multimask: true };
        let before = predictor.predict(&embedding, &prompts(), opts).unwrap();
        let after = predictor.predict(&loaded, &prompts(), opts).unwrap();
        assert_eq!(before.masks, after.masks, "{pair}");
        assert_eq!(before.scores, after.scores, "{pair}");
        assert_eq!(before.low_res, after.low_res, "{pair}");
        // No temporary file is left behind.
        let names: Vec<_> = std::fs::read_dir(&dir)
            .unwrap()
            .flatten()
            .map(|e| e.file_name())
            .collect();
        assert_eq!(names.len(), 1, "{names:?}");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}

#[test]
fn a_device_embedding_is_refused_and_nothing_is_written() {
    let (_, predictor, embedding) = setup("tiny_a");
    let dir = scratch("device");
    for allocator in ["Cuda", "DML"] {
        let device = Embedding::simulate_device(&embedding, allocator, 0).unwrap();
        assert!(!device.is_serializable());
        assert_eq!(device.allocator_name(), allocator);
        // A fresh path stays absent.
        let fresh = dir.join(format!("fresh-{allocator}.sam2"));
        match embedding_file::save(&device, &fresh) {
            Err(Error::EmbeddingNotSerializable { allocator: a }) => assert_eq!(a, allocator),
            other => panic!("expected EmbeddingNotSerializable, got {other:?}"),
        }
        assert!(!fresh.exists());
        // An existing file is untouched.
        let existing = dir.join("existing.sam2");
        embedding_file::save(&embedding, &existing).unwrap();
        let before = std::fs::read(&existing).unwrap();
        assert!(embedding_file::save(&device, &existing).is_err());
        assert_eq!(std::fs::read(&existing).unwrap(), before);
        assert_eq!(
            std::fs::read_dir(&dir).unwrap().count(),
            1,
            "no temporary file left"
        );
        // Its tensors' bytes are never read from the host.
        assert!(matches!(
            device.tensors()[0].host_bytes(),
            Err(Error::EmbeddingNotSerializable { .. })
        ));
        // The stand-in is never handed to ONNX Runtime.
        assert!(matches!(
            predictor.predict(&device, &prompts(), PredictOptions::default()),
            Err(Error::InvalidArgument {
                name: "embedding",
                ..
            })
        ));
        assert!(matches!(
            Arc::new(device).to_host(),
            Err(Error::EnvironmentConfiguration(_))
        ));
        // The host tensors behind it still predict as before.
        predictor
            .predict(&embedding, &prompts(), PredictOptions::default())
            .unwrap();
    }
    // A host embedding's to_host is the same embedding, shared.
    let host = embedding.to_host().unwrap();
    assert!(Arc::ptr_eq(&host, &embedding));
    std::fs::remove_dir_all(&dir).unwrap();
}

fn expect_format_error(bytes: &[u8], what: &str, dir: &Path) {
    assert!(
        matches!(
            embedding_file::validate_bytes(bytes),
            Err(Error::EmbeddingFormat(_))
        ),
        "{what}: validate_bytes"
    );
    let path = dir.join("bad.sam2");
    std::fs::write(&path, bytes).unwrap();
    match embedding_file::load(&path, None) {
        Err(Error::EmbeddingFormat(msg)) => assert!(!msg.is_empty()),
        other => panic!(
            "{what}: expected EmbeddingFormat, got {:?}",
            other.map(|_| ())
        ),
    }
}

fn with_header(good: &[u8], edit: impl Fn(&mut serde_json::Value)) -> Vec<u8> {
    let n = u64::from_le_bytes(good[..8].try_into().unwrap()) as usize;
    let mut header: serde_json::Value = serde_json::from_slice(&good[8..8 + n]).unwrap();
    edit(&mut header);
    let text = serde_json::to_vec(&header).unwrap();
    let mut out = (text.len() as u64).to_le_bytes().to_vec();
    out.extend_from_slice(&text);
    out.extend_from_slice(&good[8 + n..]);
    out
}

#[test]
fn hostile_files_are_format_errors_never_crashes() {
    let (_, predictor, embedding) = setup("tiny_a");
    let dir = scratch("hostile");
    let good_path = dir.join("good.sam2");
    embedding_file::save(&embedding, &good_path).unwrap();
    let good = std::fs::read(&good_path).unwrap();
    embedding_file::validate_bytes(&good).unwrap();

    expect_format_error(&[], "zero-length", &dir);
    expect_format_error(&good[..7], "7 bytes", &dir);
    for cut in [8, 100, good.len() / 2, good.len() - 1] {
        expect_format_error(&good[..cut], &format!("truncated at {cut}"), &dir);
    }
    let mut longer = good.clone();
    longer.extend_from_slice(b"junk");
    expect_format_error(&longer, "trailing bytes", &dir);
    // Bit flips in the length, the header and the payload.
    let n = u64::from_le_bytes(good[..8].try_into().unwrap()) as usize;
    for at in [
        0,
        3,
        7,
        8 + 2,
        8 + n / 2,
        8 + n + 5,
        good.len() / 2,
        good.len() - 1,
    ] {
        let mut flipped = good.clone();
        flipped[at] ^= 0x10;
        expect_format_error(&flipped, &format!("bit flip at {at}"), &dir);
    }
    // Huge declared sizes.
    let mut huge = good.clone();
    huge[..8].copy_from_slice(&u64::MAX.to_le_bytes());
    expect_format_error(&huge, "huge header length", &dir);
    let big_offsets = with_header(&good, |h| {
        h["image_embed"]["data_offsets"] = serde_json::json!([0u64, u64::MAX / 2]);
    });
    expect_format_error(&big_offsets, "huge data_offsets", &dir);
    let big_shape = with_header(&good, |h| {
        h["image_embed"]["shape"] = serde_json::json!([1, 256, 4096, 4096]);
    });
    expect_format_error(&big_shape, "huge shape", &dir);
    // Foreign and wrong-version files.
    let png = b"\x89PNG\r\n\x1a\n\0\0\0\rIHDR\0\0\0\x01\0\0\0\x01\x08\x06\0\0\0\x1f\x15\xc4\x89";
    expect_format_error(png, "a PNG", &dir);
    let no_meta = with_header(&good, |h| {
        h.as_object_mut().unwrap().remove("__metadata__");
    });
    expect_format_error(&no_meta, "safetensors without sam2 metadata", &dir);
    let v2 = with_header(&good, |h| h["__metadata__"]["format_version"] = "2".into());
    expect_format_error(&v2, "version 2", &dir);
    let f64_dtype = with_header(&good, |h| h["high_res_feats_0"]["dtype"] = "F64".into());
    expect_format_error(&f64_dtype, "F64 dtype", &dir);
    let zero_width = with_header(&good, |h| h["__metadata__"]["image_width"] = "0".into());
    expect_format_error(&zero_width, "zero width", &dir);
    let not_json = {
        let mut b = good.clone();
        b[8] = b'!';
        b
    };
    expect_format_error(&not_json, "not JSON", &dir);

    // A missing file is an OS error.
    assert!(matches!(
        embedding_file::load(&dir.join("missing.sam2"), None),
        Err(Error::Io { .. })
    ));
    // A file made by another model is a model mismatch.
    let (encoder_b, _, _) = setup("tiny_b");
    match embedding_file::load(&good_path, Some(encoder_b.fingerprint())) {
        Err(Error::ModelMismatch(msg)) => assert!(msg.contains("good.sam2"), "{msg}"),
        other => panic!("expected ModelMismatch, got {:?}", other.map(|_| ())),
    }
    embedding_file::load(&good_path, predictor.expected_fingerprint()).unwrap();
    std::fs::remove_dir_all(&dir).unwrap();
}

/// Child half of the kill test: saves two different embeddings to one path, alternately, forever.
#[test]
#[ignore = "run by kill_during_save_leaves_a_valid_file as a child process"]
fn child_saving_forever() {
    let Some(path) = std::env::var_os("SAM2_SAVE_LOOP_PATH") else {
        return;
    };
    let (encoder, _, a) = setup("tiny_a");
    let img = read_pnm(&testdata("demo.ppm"));
    let view = ImageView::packed(&img.data, img.width, img.height, PixelFormat::Rgb).unwrap();
    let b = encoder.encode(&view).unwrap();
    println!("ready");
    let path = PathBuf::from(path);
    loop {
        embedding_file::save(&a, &path).unwrap();
        embedding_file::save(&b, &path).unwrap();
    }
}

#[test]
fn kill_during_save_leaves_a_valid_file() {
    let dir = scratch("kill");
    let path = dir.join("e.sam2");
    let (_, _, first) = setup("tiny_a");
    embedding_file::save(&first, &path).unwrap();
    for round in 0..6u64 {
        let mut child = std::process::Command::new(std::env::current_exe().unwrap())
            .args([
                "--ignored",
                "--exact",
                "child_saving_forever",
                "--nocapture",
            ])
            .env("SAM2_SAVE_LOOP_PATH", &path)
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap();
        // Wait until it is saving, then kill it at a varying moment.
        let mut out = child.stdout.take().unwrap();
        let mut buf = [0u8; 256];
        let mut seen = String::new();
        while !seen.contains("ready") {
            let n = std::io::Read::read(&mut out, &mut buf).unwrap();
            assert!(n > 0, "child exited before saving");
            seen.push_str(&String::from_utf8_lossy(&buf[..n]));
        }
        std::thread::sleep(std::time::Duration::from_millis(20 + 37 * round));
        child.kill().unwrap();
        child.wait().unwrap();
        let bytes = std::fs::read(&path).unwrap();
        let header = embedding_file::validate_bytes(&bytes)
            .unwrap_or_else(|e| panic!("round {round}: the file at the path is damaged: {e}"));
        assert!(header.image_width == 512 || header.image_width == 800);
        embedding_file::load(&path, None).unwrap();
    }
    // The kills really landed inside saves: their temporary files are still there (a killed
    // process cannot clean up), next to the intact target.
    let temps = std::fs::read_dir(&dir)
        .unwrap()
        .flatten()
        .filter(|e| e.file_name().to_string_lossy().ends_with(".sam2tmp"))
        .count();
    assert!(temps >= 1, "no kill interrupted a save");
    std::fs::remove_dir_all(&dir).unwrap();
}
