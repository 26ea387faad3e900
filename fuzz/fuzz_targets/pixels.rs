//! Host pixel buffers as C passes them (width, height, stride, format, length): refused naming
//! the bad argument, or accepted with every row inside the buffer and preprocessed into finite
//! values (see sam2::test_support::fuzzing::pixels).
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| sam2::test_support::fuzzing::pixels(data));
