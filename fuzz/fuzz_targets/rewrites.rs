//! The load-time graph rewrites never change what a valid model computes: near-miss attention
//! blocks drawn from the bytes give the same outputs rewritten as written (see
//! sam2::test_support::fuzzing::rewrites). Needs ONNX Runtime (SAM2_ONNXRUNTIME_PATH).
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| sam2::test_support::fuzzing::rewrites(data));
