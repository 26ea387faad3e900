//! Finding ONNX Runtime: a bad path is a clear error naming what was tried, the good one loads,
//! and loading writes nothing into the user's home. (One process, so one runtime, per test file.)

use std::path::PathBuf;

use sam2::Error;

fn ort_path() -> PathBuf {
    PathBuf::from(
        std::env::var_os("SAM2_ONNXRUNTIME_PATH")
            .expect("SAM2_ONNXRUNTIME_PATH is set by tools/setup/setup.sh"),
    )
}

#[test]
fn bad_paths_fail_clearly_then_the_right_library_loads_without_touching_home() {
    // A private home: ONNX Runtime's telemetry would write under it.
    let home = std::env::temp_dir().join(format!("sam2-home-{}", std::process::id()));
    std::fs::create_dir_all(&home).unwrap();
    std::env::set_var("HOME", &home);
    std::env::set_var("XDG_CACHE_HOME", home.join(".cache"));
    std::env::remove_var("ORT_DISABLE_TELEMETRY");

    // A file that does not exist.
    let missing = "/nonexistent/dir/libonnxruntime.so";
    match sam2::runtime::init(Some(missing.as_ref())) {
        Err(Error::RuntimeNotFound(msg)) => {
            assert!(msg.contains(missing), "message names the path: {msg}");
            assert!(
                msg.contains("SAM2_ONNXRUNTIME_PATH"),
                "message says how to fix it: {msg}"
            );
        }
        other => panic!("expected RuntimeNotFound, got {other:?}"),
    }
    // A library that is not ONNX Runtime.
    let not_ort = "libz.so.1";
    match sam2::runtime::init(Some(not_ort.as_ref())) {
        Err(Error::RuntimeNotFound(msg)) => assert!(msg.contains("OrtGetApiBase"), "{msg}"),
        other => panic!("expected RuntimeNotFound, got {other:?}"),
    }
    // A file that is not a library at all.
    let junk = home.join("libonnxruntime.so");
    std::fs::write(&junk, b"not a shared object").unwrap();
    assert!(matches!(
        sam2::runtime::init(Some(&junk)),
        Err(Error::RuntimeNotFound(_))
    ));
    std::fs::remove_file(&junk).unwrap();
    assert!(
        sam2::runtime::info().is_none(),
        "nothing was loaded by the failures"
    );

    // The real one.
    let info = sam2::runtime::init(Some(&ort_path())).expect("the pinned ONNX Runtime loads");
    assert_eq!(info.version, "1.31.1");
    // Same path again is fine; another is refused (one runtime per process).
    sam2::runtime::init(Some(&ort_path())).unwrap();
    sam2::runtime::init(None).unwrap();
    assert!(matches!(
        sam2::runtime::init(Some("/other/libonnxruntime.so".as_ref())),
        Err(Error::EnvironmentConfiguration(_))
    ));

    // Create and run a session, then check the private home is still empty.
    let models = std::env::var_os("SAM2_MODELS")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("models"));
    let encoder =
        sam2::Encoder::new(models.join("tiny_a_encoder.onnx"), &Default::default()).unwrap();
    let pixels = vec![128u8; 32 * 24 * 3];
    let image = sam2::ImageView::packed(&pixels, 32, 24, sam2::PixelFormat::Rgb).unwrap();
    encoder.encode(&image).unwrap();
    let left: Vec<_> = walk(&home);
    assert!(
        left.is_empty(),
        "ONNX Runtime wrote into the home directory: {left:?}"
    );
    std::fs::remove_dir_all(&home).unwrap();
}

fn walk(dir: &std::path::Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap().flatten() {
        let p = entry.path();
        if p.is_dir() {
            out.extend(walk(&p));
        }
        out.push(p);
    }
    out
}
