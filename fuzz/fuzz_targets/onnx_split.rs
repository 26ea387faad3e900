//! The ONNX initializer splitter walks untrusted model bytes: any input gives Ok or Err, and
//! every initializer it reports lies inside the input (see sam2::test_support::fuzzing::onnx_split).
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| sam2::test_support::fuzzing::onnx_split(data));
