//! Any byte string given to the embedding-file validator gives Ok or a format error: never a
//! panic, never an allocation driven by an unchecked size.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    match sam2::embedding_file::validate_bytes(data) {
        Ok(header) => assert_eq!(header.payload_len() + 8, data.len() - header_len(data)),
        Err(sam2::Error::EmbeddingFormat(_)) => {}
        Err(other) => panic!("unexpected error kind: {other:?}"),
    }
});

fn header_len(data: &[u8]) -> usize {
    u64::from_le_bytes(data[..8].try_into().unwrap()) as usize
}
