//! The position encodings SAM 3's decoder takes beside the image features: a sine encoding of
//! each level's grid, the same for every image. Computed here once per process and shared by
//! every concept model, instead of being written by each encode (another 111 MB per image) or
//! kept per model.
//!
//! Meta's `PositionEmbeddingSine(256, normalize=True, temperature=10000)`: for a `n × n` grid, the
//! row and column of each cell, counted from 1, are divided by `n + 1e-6` and scaled by 2π; each
//! is divided by `10000^(2⌊k/2⌋/128)` for its 128 channels `k`, of which the even ones take the
//! sine and the odd ones the cosine. Channels 0–127 encode the row, 128–255 the column. The
//! arithmetic is float32, as Meta's; the graph's own output agrees within its sine's rounding
//! (`tests/it/concept_model.rs`).

use std::sync::{Arc, OnceLock};

use ort::value::{DynValue, Tensor};

use crate::error::Result;
use crate::export::SAM3_EMBEDDING_SHAPES;

/// Channels of one axis' half of the encoding.
const HALF: usize = 128;

/// The three levels' encodings, `[1, 256, n, n]` host tensors, in the features' order.
pub(crate) struct Positions {
    pub(crate) levels: [DynValue; 3],
}

impl std::fmt::Debug for Positions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Positions")
    }
}

/// The encoding of an `n × n` grid, `[256, n, n]` in C order.
pub(crate) fn encode_grid(n: usize) -> Vec<f32> {
    let scale = 2.0 * std::f32::consts::PI;
    let dim_t: Vec<f32> = (0..HALF)
        .map(|k| 10000f32.powf((2 * (k / 2)) as f32 / HALF as f32))
        .collect();
    // One axis' 128 channels for each of its n coordinates: [k][i].
    let axis: Vec<f32> = (0..HALF)
        .flat_map(|k| {
            let d = dim_t[k];
            (0..n).map(move |i| {
                let e = (i + 1) as f32 / (n as f32 + 1e-6) * scale;
                let v = e / d;
                if k % 2 == 0 {
                    v.sin()
                } else {
                    v.cos()
                }
            })
        })
        .collect();
    let plane = n * n;
    let mut out = vec![0f32; 2 * HALF * plane];
    for k in 0..HALF {
        let along = &axis[k * n..(k + 1) * n];
        let rows = &mut out[k * plane..(k + 1) * plane];
        for (i, row) in rows.chunks_mut(n).enumerate() {
            row.fill(along[i]);
        }
        let cols = &mut out[(HALF + k) * plane..(HALF + k + 1) * plane];
        for row in cols.chunks_mut(n) {
            row.copy_from_slice(along);
        }
    }
    out
}

/// The process's one copy of the three levels' encodings.
pub(crate) fn shared() -> Result<Arc<Positions>> {
    static SHARED: OnceLock<Arc<Positions>> = OnceLock::new();
    if let Some(p) = SHARED.get() {
        return Ok(Arc::clone(p));
    }
    let make = |level: usize| -> Result<DynValue> {
        let shape = SAM3_EMBEDDING_SHAPES[level];
        let n = shape[3] as usize;
        Ok(Tensor::from_array(([1usize, 2 * HALF, n, n], encode_grid(n)))?.into_dyn())
    };
    let made = Arc::new(Positions {
        levels: [make(0)?, make(1)?, make(2)?],
    });
    Ok(Arc::clone(SHARED.get_or_init(|| made)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rows_then_columns_sine_then_cosine() {
        let n = 4;
        let g = encode_grid(n);
        let plane = n * n;
        // Channel 0: sin of the row's scaled coordinate (dim_t = 1), the same along a row.
        let e = |i: usize| (i + 1) as f32 / (n as f32 + 1e-6) * 2.0 * std::f32::consts::PI;
        for i in 0..n {
            for j in 0..n {
                assert_eq!(g[i * n + j], e(i).sin());
                assert_eq!(g[plane + i * n + j], e(i).cos());
                assert_eq!(g[HALF * plane + i * n + j], e(j).sin());
            }
        }
    }
}
