//! ONNX Runtime 1.31 keeps a device id and a telemetry database under
//! `~/.cache/Microsoft/DeveloperTools/.onnxruntime/` from the moment an environment is created,
//! unless its process-wide opt-out, the `ORT_DISABLE_TELEMETRY` environment variable (or a CI
//! variable), is set when it initialises. The library must leave a host's home alone.
//!
//! Each case runs in a fresh process (this test binary again, `child` below) with a cleared
//! environment and `HOME` pointing at an empty directory, and the directory is inspected after the
//! process exits:
//!
//! * the library used as a host uses it (encode and predict): nothing under `HOME`;
//! * ONNX Runtime driven directly, with telemetry switched off through its API
//!   (`DisableTelemetryEvents`, ort's `with_telemetry(false)`) and no variable: it writes, so the
//!   test can see a write, and the API alone is not enough (should a later ONNX Runtime honour
//!   it, this case fails and the library can stop setting the variable);
//! * the host sets `ORT_DISABLE_TELEMETRY=0` itself: the library leaves the host's choice alone.

mod common;

use std::path::{Path, PathBuf};
use std::process::Command;

use common::*;

const MODE: &str = "SAM2_TELEMETRY_CHILD";

/// What the child process does, by `SAM2_TELEMETRY_CHILD`; nothing when the variable is unset
/// (a plain run of the suite).
#[test]
fn child() {
    let Ok(mode) = std::env::var(MODE) else {
        return;
    };
    let ort_path = PathBuf::from(std::env::var_os("SAM2_ONNXRUNTIME_PATH").unwrap());
    match mode.as_str() {
        "library" | "library-host-opted-in" => {
            sam2::runtime::init(Some(&ort_path)).unwrap();
            let (encoder, predictor) = open_pair("tiny_a");
            let embedding = encode_shapes(&encoder);
            let prediction = predictor
                .predict(&embedding, &shape_clicks()[..1], Default::default())
                .unwrap();
            assert_eq!(prediction.objects, 1);
            println!(
                "ORT_DISABLE_TELEMETRY after use: {:?}",
                std::env::var_os("ORT_DISABLE_TELEMETRY")
            );
        }
        "ort-api-only" => {
            let env = ort::init_from(&ort_path)
                .unwrap()
                .with_name("telemetry-probe")
                .with_telemetry(false)
                .build()
                .unwrap();
            drop(env);
        }
        other => panic!("unknown {MODE} {other}"),
    }
}

/// Runs `child` in a new process whose only environment is `vars` plus a fresh, empty `HOME`;
/// returns the files the process left under that home.
fn run_child(mode: &str, vars: &[(&str, &str)]) -> Vec<PathBuf> {
    let home = std::env::temp_dir().join(format!("sam2-home-{mode}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&home);
    std::fs::create_dir_all(&home).unwrap();
    let ort = std::env::var_os("SAM2_ONNXRUNTIME_PATH").expect("tools/setup/setup.sh sets it");
    let output = Command::new(std::env::current_exe().unwrap())
        .args(["--exact", "child", "--nocapture", "--test-threads=1"])
        .env_clear()
        .env("HOME", &home)
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("SAM2_ONNXRUNTIME_PATH", ort)
        .env("SAM2_MODELS", models_dir())
        .env("SAM2_TESTDATA", root().join("testdata"))
        .env(MODE, mode)
        .envs(vars.iter().copied())
        .output()
        .unwrap();
    assert!(
        output.status.success(),
        "{mode}: the child failed ({}):\n{}\n{}",
        output.status,
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    let left = walk(&home);
    std::fs::remove_dir_all(&home).unwrap();
    left
}

fn walk(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap().flatten() {
        let path = entry.path();
        if path.is_dir() {
            out.extend(walk(&path));
        }
        out.push(path);
    }
    out
}

fn names_developer_tools(files: &[PathBuf]) -> bool {
    files
        .iter()
        .any(|f| f.to_string_lossy().contains("Microsoft/DeveloperTools"))
}

#[test]
fn a_host_that_uses_the_library_finds_nothing_written_in_its_home() {
    let left = run_child("library", &[]);
    assert!(left.is_empty(), "written under HOME: {left:?}");
}

#[test]
fn onnx_runtime_writes_into_home_when_only_its_api_disables_telemetry() {
    let left = run_child("ort-api-only", &[]);
    assert!(
        names_developer_tools(&left),
        "ONNX Runtime wrote nothing with telemetry disabled through its API alone ({left:?}): \
         if this ONNX Runtime honours DisableTelemetryEvents, the library need not set \
         ORT_DISABLE_TELEMETRY any more (src/runtime.rs)"
    );
}

#[test]
fn a_host_that_set_the_variable_itself_is_obeyed() {
    let left = run_child("library-host-opted-in", &[("ORT_DISABLE_TELEMETRY", "0")]);
    assert!(
        names_developer_tools(&left),
        "with ORT_DISABLE_TELEMETRY=0 from the host, ONNX Runtime's own behaviour applies: {left:?}"
    );
}
