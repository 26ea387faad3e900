//! Prompt batches with any counts and coordinate bits, for any image size: refused as invalid,
//! or turned into point tensors inside SAM2's 1024 frame (see sam2::test_support::fuzzing::prompts).
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| sam2::test_support::fuzzing::prompts(data));
