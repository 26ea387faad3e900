//! The tables of the two resizes, one per axis and image size: which source pixels each output
//! reads, and with what weights. The image path's ([`image_axis`]): torchvision's antialiased
//! bilinear (ATen's weights, in ATen's precision) where the axis shrinks, the reference client's
//! bilinear ([`taps`], which the resizes of masks and logits share) where it grows, a copy where
//! its size stays. The video path's ([`pil_bicubic_axis`]): Pillow's bicubic coefficients, rounded
//! to fixed point as its 8-bit resize rounds them.

/// Source taps of one output coordinate: the two neighbours and their weights. Computed in f64
/// and rounded to f32, so the reference client (tools/references/reference_check.py) gets the same
/// bits.
#[derive(Clone, Copy)]
pub(crate) struct Tap {
    pub(crate) i0: usize,
    pub(crate) i1: usize,
    pub(crate) w0: f32,
    pub(crate) w1: f32,
}

pub(crate) fn taps(src: usize, dst: usize) -> Vec<Tap> {
    let scale = src as f64 / dst as f64;
    (0..dst)
        .map(|d| {
            let s = ((d as f64 + 0.5) * scale - 0.5).max(0.0);
            let floor = s.floor();
            let i0 = (floor as usize).min(src - 1);
            let i1 = (floor as usize + 1).min(src - 1);
            let w1 = (s - floor) as f32;
            Tap {
                i0,
                i1,
                w0: (1.0 - (s - floor)) as f32,
                w1,
            }
        })
        .collect()
}

/// How one axis is resampled: output `i` reads the `taps` consecutive source pixels from
/// `first[i]` with the weights `weight[i * taps..(i + 1) * taps]`. Outputs that need fewer taps
/// than the widest are padded with zero weights (adding `0 · x` changes no sum), so every output
/// has the same, fixed number of taps and the loops over them unroll. A window may reach up to
/// `taps − 1` pixels past the source's end; those read the last pixel (rows: the last row), which
/// is also what the bilinear edge clamp reads.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Axis<W> {
    pub(crate) taps: usize,
    pub(crate) first: Vec<usize>,
    pub(crate) weight: Vec<W>,
}

impl<W: Copy> Axis<W> {
    /// Each output is its own source pixel (the size does not change: both Meta's resizes are then
    /// copies).
    pub(super) fn identity(n: usize, one: W) -> Axis<W> {
        Axis {
            taps: 1,
            first: (0..n).collect(),
            weight: vec![one; n],
        }
    }

    /// An axis from each output's first source pixel and its weights; as many taps as the
    /// widest output needs.
    pub(super) fn from_windows(windows: Vec<(usize, Vec<W>)>, zero: W) -> Self {
        let taps = windows
            .iter()
            .map(|(_, w)| w.len())
            .max()
            .unwrap_or(1)
            .max(1);
        let mut first = Vec::with_capacity(windows.len());
        let mut weight = Vec::with_capacity(windows.len() * taps);
        for (f, w) in windows {
            first.push(f);
            weight.extend((0..taps).map(|j| w.get(j).copied().unwrap_or(zero)));
        }
        Axis {
            taps,
            first,
            weight,
        }
    }

    #[cfg(test)]
    pub(super) fn len(&self) -> usize {
        self.first.len()
    }
}

/// The image path's axis: torchvision's antialiased bilinear when it shrinks, the reference
/// client's bilinear ([`taps`]) when it grows, a copy when the size stays.
pub(crate) fn image_axis(src: usize, dst: usize) -> Axis<f32> {
    use std::cmp::Ordering::*;
    match src.cmp(&dst) {
        Equal => Axis::identity(dst, 1.0),
        Greater => antialiased_bilinear_axis(src, dst),
        Less => {
            // i1 is i0 + 1, or i0 itself at the clamped edge, where the window's second pixel
            // (one past the end) reads the last pixel: the same value either way.
            let t = taps(src, dst);
            debug_assert!(t.iter().all(|t| t.i1 == t.i0 + 1 || t.i1 == t.i0));
            Axis {
                taps: 2,
                first: t.iter().map(|t| t.i0).collect(),
                weight: t.iter().flat_map(|t| [t.w0, t.w1]).collect(),
            }
        }
    }
}

/// ATen's antialiased bilinear weights for a float tensor (`_upsample_bilinear2d_aa`,
/// align_corners=False, no explicit scale), with its precision: the scale, the support, each
/// output's centre and the weights are float32, the intermediate sums around them double where
/// C++'s promotions make them double. `src > dst`.
pub(super) fn antialiased_bilinear_axis(src: usize, dst: usize) -> Axis<f32> {
    let scale = src as f32 / dst as f32;
    // The triangle's support (1) scaled by the shrink factor; ATen's bound on the taps,
    // 2·ceil(support) + 1, clips the rare window that rounding widens by one.
    let support = scale as f64 as f32;
    let max_taps = support.ceil() as i64 * 2 + 1;
    let invscale = (1.0 / scale as f64) as f32;
    let windows = (0..dst)
        .map(|i| {
            let center = (scale as f64 * (i as f64 + 0.5)) as f32;
            let first = (((center - support) as f64 + 0.5) as i64).max(0);
            let end = (((center + support) as f64 + 0.5) as i64).min(src as i64);
            let size = (end - first).clamp(1, max_taps);
            let mut w: Vec<f32> = (0..size)
                .map(|j| {
                    let x =
                        (((((j + first) as f32 - center) as f64) + 0.5) * invscale as f64) as f32;
                    let x = x.abs();
                    if x < 1.0 {
                        (1.0 - x as f64) as f32
                    } else {
                        0.0
                    }
                })
                .collect();
            let total: f32 = w.iter().fold(0.0, |a, &b| a + b);
            if total != 0.0 {
                w.iter_mut().for_each(|v| *v /= total);
            }
            (first as usize, w)
        })
        .collect();
    Axis::from_windows(windows, 0.0)
}

/// PIL's fixed-point precision for 8-bit images: 32 bits less 8 for the value and 2 for the
/// filter's overshoot.
pub(super) const PIL_PRECISION_BITS: u32 = super::kernels::PIL_BITS;

/// PIL's bicubic filter (a = −0.5), in f64 as Pillow evaluates it.
pub(super) fn pil_bicubic(x: f64) -> f64 {
    const A: f64 = -0.5;
    let x = x.abs();
    if x < 1.0 {
        ((A + 2.0) * x - (A + 3.0)) * x * x + 1.0
    } else if x < 2.0 {
        (((x - 5.0) * x + 8.0) * x - 4.0) * A
    } else {
        0.0
    }
}

/// The video path's axis: Pillow's `precompute_coeffs` for the bicubic filter over the whole
/// image (box 0..src), then its `normalize_coeffs_8bpc` (weights × 2²², rounded half away from
/// zero to integers).
pub(crate) fn pil_bicubic_axis(src: usize, dst: usize) -> Axis<f64> {
    let one = (1i32 << PIL_PRECISION_BITS) as f64;
    if src == dst {
        return Axis::identity(dst, one);
    }
    // Pillow takes the box's edges as float32; (in1 − in0) / outSize in double.
    let scale = (src as f32 - 0.0f32) as f64 / dst as f64;
    let filterscale = scale.max(1.0);
    let support = 2.0 * filterscale;
    let inv_filterscale = 1.0 / filterscale;
    let windows = (0..dst)
        .map(|xx| {
            let center = (xx as f64 + 0.5) * scale;
            let first = ((center - support + 0.5) as i64).max(0);
            let end = ((center + support + 0.5) as i64).min(src as i64);
            let size = (end - first).max(1);
            let mut k: Vec<f64> = (0..size)
                .map(|x| pil_bicubic(((x + first) as f64 - center + 0.5) * inv_filterscale))
                .collect();
            let total: f64 = k.iter().sum();
            if total != 0.0 {
                k.iter_mut().for_each(|v| *v /= total);
            }
            let fixed = k
                .iter()
                .map(|&v| {
                    let scaled = v * one;
                    (if v < 0.0 { scaled - 0.5 } else { scaled + 0.5 }) as i32 as f64
                })
                .collect();
            (first as usize, fixed)
        })
        .collect();
    Axis::from_windows(windows, 0.0)
}
