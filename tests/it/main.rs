//! The library's integration tests, one binary with a module per suite: each suite used to be a
//! test crate of its own, and each linked the library and `ort` again (the build of 23 binaries
//! cost more than some suites' run). `cargo test --release --test it MODULE::` runs one suite.
//!
//! Beside this binary stay the suites whose process is what they test, so that no other suite can
//! share it: `runtime` (loading ONNX Runtime from a bad path before anything loaded it),
//! `telemetry` (a cleared environment and a private home), `webgpu` (another build of ONNX
//! Runtime, loaded once per process), `cache_memory`, `soak` and `video_soak` (process-wide
//! counters of live bytes and resident memory).
//!
//! Tests here run side by side across suites: what is process-wide (the log sink) is taken in
//! turns through `common::LOG_TURN`.

#[path = "../common/mod.rs"]
mod common;

mod cache;
mod concept;
mod concept_model;
mod device;
mod embedding_file;
mod everything;
mod everything_real;
mod fuzz_regressions;
mod gpu;
mod hostile_models;
mod limits;
mod model_pair;
mod parity;
mod pipeline;
mod precision;
mod real_models;
mod video;
mod video_real;
mod weights;
