//! The ONNX initializer splitter walks untrusted model bytes: any input gives Ok or Err, and
//! every initializer it reports lies inside the input.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(split) = sam2::onnx_split::split(data, 1) {
        for init in &split.initializers {
            assert!(init.offset + init.len <= data.len());
        }
    }
});
