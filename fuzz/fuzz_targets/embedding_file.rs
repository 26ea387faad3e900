//! Any byte string given to the embedding-file validator gives Ok or a format error: never a
//! panic, never an allocation driven by an unchecked size (see sam2::test_support::fuzzing::embedding_file).
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| sam2::test_support::fuzzing::embedding_file(data));
