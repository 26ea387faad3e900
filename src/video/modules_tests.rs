//! Unit tests of the four modules: finding a set by directory or name, and telling its family.

use super::*;

fn dir_with(name: &str, files: &[&str]) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("sam2-find-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    for f in files {
        std::fs::write(dir.join(f), b"").unwrap();
    }
    dir
}

const FOUR: [&str; 4] = [
    "image_encoder.onnx",
    "memory_attention.onnx",
    "image_decoder.onnx",
    "memory_encoder.onnx",
];

#[test]
fn one_set_of_four_modules_is_found_by_directory_or_name() {
    let mut files: Vec<String> = FOUR.iter().map(|f| format!("tiny_{f}")).collect();
    // An image pair of ONNX Runtime's naming beside it is no video model.
    files.push("other_image_encoder.onnx".into());
    files.push("other_image_decoder.onnx".into());
    let names: Vec<&str> = files.iter().map(String::as_str).collect();
    let dir = dir_with("one", &names);
    assert_eq!(
        VideoModelPaths::find(&dir).unwrap(),
        VideoModelPaths::in_dir(&dir, "tiny_")
    );
    assert_eq!(
        VideoModelPaths::find(dir.join("tiny")).unwrap(),
        VideoModelPaths::in_dir(&dir, "tiny_")
    );
    let err = VideoModelPaths::find(dir.join("other")).unwrap_err();
    assert!(matches!(err, Error::Model { .. }), "{err}");
    std::fs::remove_dir_all(&dir).unwrap();
}

/// sam2-export-edgetam's folder: the four modules under the contract's names beside
/// EdgeTAM's image pair (`edgetam_image_encoder.onnx`, two decoders), which is no video model.
#[test]
fn edgetam_s_export_is_found_beside_its_image_pair() {
    let mut files: Vec<&str> = FOUR.to_vec();
    files.extend([
        "edgetam_image_encoder.onnx",
        "edgetam_image_decoder.onnx",
        "edgetam_image_decoder_multi.onnx",
        "edgetam.pt",
        "manifest.json",
    ]);
    let dir = dir_with("edgetam", &files);
    assert_eq!(
        VideoModelPaths::find(&dir).unwrap(),
        VideoModelPaths::in_dir(&dir, "")
    );
    let err = VideoModelPaths::find(dir.join("edgetam")).unwrap_err();
    assert!(err.to_string().contains("holds no video model"), "{err}");
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn the_family_is_told_by_the_memory_s_shape() {
    let shapes = |name: &str, shape: &[i64]| HashMap::from([(name.to_string(), shape.to_vec())]);
    let none = HashMap::new();
    assert_eq!(
        VideoFamily::of_shapes(&shapes(MEMORIES, &[-1, 512, 64]), &none),
        Some(VideoFamily::EdgeTam)
    );
    assert_eq!(
        VideoFamily::of_shapes(&shapes(MEMORIES, &[-1, 64, 64, 64]), &none),
        Some(VideoFamily::Sam2)
    );
    assert_eq!(
        VideoFamily::of_shapes(&none, &shapes(MASKMEM_FEATURES, &[1, 512, 64])),
        Some(VideoFamily::EdgeTam)
    );
    assert_eq!(
        VideoFamily::of_shapes(&none, &shapes(PRED_MASK, &[1, 1, 256, 256])),
        None
    );
}

#[test]
fn several_sets_or_a_missing_module_is_a_model_error_saying_so() {
    let mut files: Vec<String> = FOUR.iter().map(|f| f.to_string()).collect();
    files.extend(FOUR.iter().map(|f| format!("b.{f}")));
    let names: Vec<&str> = files.iter().map(String::as_str).collect();
    let dir = dir_with("two", &names);
    let text = VideoModelPaths::find(&dir).unwrap_err().to_string();
    assert!(
        text.contains("2 video models") && text.contains("b.image_encoder.onnx"),
        "{text}"
    );
    assert_eq!(
        VideoModelPaths::find(dir.join("b")).unwrap(),
        VideoModelPaths::in_dir(&dir, "b.")
    );
    std::fs::remove_dir_all(&dir).unwrap();
    let dir = dir_with("three", &FOUR[..3]);
    let text = VideoModelPaths::find(&dir).unwrap_err().to_string();
    assert!(text.contains("holds no video model"), "{text}");
    std::fs::remove_dir_all(&dir).unwrap();
}
