//! What the benchmarks of `src/bin/` share: the statistics of their timings ([`stats`]), where
//! the repository is ([`root`]), the tracking clip ([`track_clip`]), the memory-bandwidth floor
//! of preprocessing and an embedding's tensors as plain ONNX Runtime values (the floors' inputs).

use std::hint::black_box;
use std::path::{Path, PathBuf};

use ort::value::{DynValue, Tensor};
use sam2::embedding::EmbeddingTensor;

pub mod stats;

/// The tracking clip of tools/models/track_clip.py, read from models/track/clip.bin (the reader the
/// tests use).
#[path = "../../tests/common/track_clip.rs"]
pub mod track_clip;

/// The repository (this package's parent directory): its tools/, testdata/ and models/.
pub fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("bench/ is inside the repository")
        .to_path_buf()
}

/// The memory-bandwidth floor of preprocessing: one read of the input and one write of the
/// output, split over `threads` threads.
pub fn bandwidth_floor(input: &[u8], out: &mut [f32], threads: usize) {
    let run = |inp: &[u8], o: &mut [f32]| {
        let mut acc = 0u64;
        for c in inp.chunks_exact(8) {
            acc = acc.wrapping_add(u64::from_ne_bytes(c.try_into().unwrap()));
        }
        black_box(acc);
        o.fill(black_box(0.5));
        black_box(&o[0]);
    };
    if threads <= 1 {
        run(input, out);
        return;
    }
    let ic = input.len().div_ceil(threads).next_multiple_of(8);
    let oc = out.len().div_ceil(threads);
    std::thread::scope(|s| {
        for (i, o) in input.chunks(ic).zip(out.chunks_mut(oc)) {
            s.spawn(move || run(i, o));
        }
    });
}

/// A copy of one of an embedding's tensors, as an ONNX Runtime value a plain session takes.
pub fn tensor_of(t: &EmbeddingTensor) -> Result<DynValue, Box<dyn std::error::Error>> {
    let bytes = t.host_bytes()?;
    let data: Vec<f32> = bytes
        .chunks_exact(4)
        .map(|c| f32::from_ne_bytes([c[0], c[1], c[2], c[3]]))
        .collect();
    Ok(Tensor::from_array((t.shape().to_vec(), data))?.into_dyn())
}
