//! The image path's kernels: torchvision's resize of the float image, in float32. Across a row
//! each lane is `−0 + w₀·p₀ + w₁·p₁ + …`, tap by tap; down the rows each value is
//! `w₀·r₀ + w₁·r₁ + …`, then `v · scale + bias` into its plane. The SSE2, AVX2 and plain loops
//! perform the same IEEE operations in the same order, those of the previous implementation, so
//! all give its bits.

#[cfg(target_arch = "x86_64")]
use super::avx2;
use super::{Horizontal, LANES};

/// Where output `x`'s weight for tap `j` lies in the float path's table (`taps` per output):
/// outputs go by twos, tap by tap, `w(2k, j), w(2k + 1, j)` side by side, so that AVX2 reads both
/// outputs' weights of a tap in one load.
#[inline(always)]
fn float_entry(x: usize, j: usize, taps: usize) -> usize {
    ((x / 2) * taps + j) * 2 + x % 2
}

/// The float path's table: each weight broadcast to the four lanes (one load per tap), laid out
/// as [`float_entry`] says (an odd number of outputs padded with one of zero weights).
pub(in crate::preprocess) fn float_horizontal_table(
    taps: usize,
    first: &[usize],
    weights: &[f32],
) -> Horizontal<[f32; 4]> {
    assert_eq!(weights.len(), taps * first.len());
    let mut table = vec![[0.0f32; 4]; first.len().next_multiple_of(2) * taps];
    for (x, w) in weights.chunks_exact(taps).enumerate() {
        for (j, &w) in w.iter().enumerate() {
            table[float_entry(x, j, taps)] = [w; 4];
        }
    }
    Horizontal {
        taps,
        first: first.to_vec(),
        weights: table,
        reach: first.iter().max().map_or(0, |&f| f + taps),
    }
}

/// Resamples the widened row `wide` (`channels` floats per pixel) into `out` (four lanes per
/// output pixel): each lane `−0 + w₀·p₀ + w₁·p₁ + …`, tap by tap.
pub(in crate::preprocess) fn float_horizontal(
    table: &Horizontal<[f32; 4]>,
    wide: &[f32],
    channels: usize,
    out: &mut [f32],
) {
    assert!(wide.len() >= table.wide_len(channels));
    assert!(out.len() >= LANES * table.first.len());
    match table.taps {
        1 => float_horizontal_n::<1>(table, wide, channels, out),
        2 => float_horizontal_n::<2>(table, wide, channels, out),
        3 => float_horizontal_n::<3>(table, wide, channels, out),
        4 => float_horizontal_n::<4>(table, wide, channels, out),
        5 => float_horizontal_n::<5>(table, wide, channels, out),
        6 => float_horizontal_n::<6>(table, wide, channels, out),
        7 => float_horizontal_n::<7>(table, wide, channels, out),
        8 => float_horizontal_n::<8>(table, wide, channels, out),
        9 => float_horizontal_n::<9>(table, wide, channels, out),
        10 => float_horizontal_n::<10>(table, wide, channels, out),
        _ => float_horizontal_portable(table, table.taps, wide, channels, out),
    }
}

#[cfg(target_arch = "x86_64")]
#[inline(always)]
fn float_horizontal_n<const N: usize>(
    table: &Horizontal<[f32; 4]>,
    wide: &[f32],
    channels: usize,
    out: &mut [f32],
) {
    let done = if avx2() {
        // SAFETY: AVX2 is present (checked just now); the bounds were asserted by the caller.
        unsafe { float_horizontal_avx2::<N>(table, wide, channels, out) }
    } else {
        0
    };
    float_horizontal_sse2::<N>(table, wide, channels, out, done);
}

/// The float horizontal pass from output `start` on, one output per SSE2 register.
#[cfg(target_arch = "x86_64")]
#[inline(always)]
#[allow(unused_unsafe)] // the arithmetic intrinsics are safe from Rust 1.87 on, unsafe before
fn float_horizontal_sse2<const N: usize>(
    table: &Horizontal<[f32; 4]>,
    wide: &[f32],
    channels: usize,
    out: &mut [f32],
    start: usize,
) {
    use std::arch::x86_64::*;
    let (src, dst) = (wide.as_ptr(), out.as_mut_ptr());
    let weights = table.weights.as_ptr();
    for (x, &first) in table.first.iter().enumerate().skip(start) {
        // SAFETY: SSE2 is part of x86_64. The window's reads, `first + j` for j < N = taps, end
        // below `reach` pixels, and `wide` holds `reach · channels + 4` floats (asserted by the
        // caller), so each four-float load stays inside it; entry `float_entry(x, j)` is one of
        // the table's; the store writes out[4x..4x + 4], inside (asserted).
        unsafe {
            let p = src.add(first * channels);
            let mut acc = _mm_set1_ps(-0.0);
            for j in 0..N {
                let v = _mm_loadu_ps(p.add(j * channels));
                let w = weights.add(float_entry(x, j, N)) as *const f32;
                acc = _mm_add_ps(acc, _mm_mul_ps(_mm_loadu_ps(w), v));
            }
            _mm_storeu_ps(dst.add(x * LANES), acc);
        }
    }
}

/// The float horizontal pass two outputs per AVX2 register (the first in the low half), over the
/// whole pairs of outputs, with the SSE2 kernel's operations lane by lane; returns how many
/// outputs it wrote.
///
/// # Safety
/// AVX2 must be present, and the bounds [`float_horizontal`] asserts must hold.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
unsafe fn float_horizontal_avx2<const N: usize>(
    table: &Horizontal<[f32; 4]>,
    wide: &[f32],
    channels: usize,
    out: &mut [f32],
) -> usize {
    use std::arch::x86_64::*;
    let (src, dst) = (wide.as_ptr(), out.as_mut_ptr());
    let weights = table.weights.as_ptr() as *const f32;
    let outputs = table.first.len() / 2 * 2;
    for (k, first) in table.first[..outputs].chunks_exact(2).enumerate() {
        // The reads and writes of `float_horizontal_sse2` for outputs 2k and 2k + 1; the weight
        // load reads entries float_entry(2k, j) and float_entry(2k + 1, j), side by side.
        let (p0, p1) = (src.add(first[0] * channels), src.add(first[1] * channels));
        let w = weights.add(k * N * 2 * LANES);
        let mut acc = _mm256_set1_ps(-0.0);
        for j in 0..N {
            let v = _mm256_loadu2_m128(p1.add(j * channels), p0.add(j * channels));
            acc = _mm256_add_ps(acc, _mm256_mul_ps(_mm256_loadu_ps(w.add(j * 8)), v));
        }
        _mm256_storeu_ps(dst.add(2 * k * LANES), acc);
    }
    outputs
}

#[cfg(not(target_arch = "x86_64"))]
#[inline(always)]
fn float_horizontal_n<const N: usize>(
    table: &Horizontal<[f32; 4]>,
    wide: &[f32],
    channels: usize,
    out: &mut [f32],
) {
    float_horizontal_portable(table, N, wide, channels, out)
}

/// [`float_horizontal`] in plain Rust (`taps` is the table's, a constant where inlined).
#[inline(always)]
fn float_horizontal_portable(
    table: &Horizontal<[f32; 4]>,
    taps: usize,
    wide: &[f32],
    channels: usize,
    out: &mut [f32],
) {
    for (x, (&first, o)) in table
        .first
        .iter()
        .zip(out.chunks_exact_mut(LANES))
        .enumerate()
    {
        let mut acc = [-0.0f32; LANES];
        for j in 0..taps {
            let w = &table.weights[float_entry(x, j, taps)];
            let p = &wide[(first + j) * channels..][..LANES];
            for k in 0..LANES {
                acc[k] += w[k] * p[k];
            }
        }
        o.copy_from_slice(&acc);
    }
}

/// The image path's vertical pass for one output row: each value `w₀·r₀ + w₁·r₁ + …` over the
/// resampled rows (`rows[j]`, four lanes per pixel), then `v · scale + bias`, lane `offsets[c]`
/// written to plane `c`.
pub(in crate::preprocess) struct FloatOutput {
    pub(in crate::preprocess) offsets: [usize; 3],
    pub(in crate::preprocess) scale: [f32; 3],
    pub(in crate::preprocess) bias: [f32; 3],
}

pub(in crate::preprocess) fn float_vertical(
    rows: &[&[f32]],
    weights: &[f32],
    output: &FloatOutput,
    planes: [&mut [f32]; 3],
) {
    let n = planes[0].len();
    assert!(!rows.is_empty() && rows.len() == weights.len());
    assert!(rows.iter().all(|r| r.len() >= LANES * n));
    assert!(planes.iter().all(|p| p.len() == n) && output.offsets.iter().all(|&o| o < 3));
    let done = float_vertical_simd(
        rows,
        weights,
        output,
        planes.each_ref().map(|p| p.as_ptr()),
        n,
    );
    let [p0, p1, p2] = planes;
    let mut planes = [p0, p1, p2];
    for x in done..n {
        let lane = |k: usize| {
            let mut v = weights[0] * rows[0][x * LANES + k];
            for (r, &w) in rows.iter().zip(weights).skip(1) {
                v += w * r[x * LANES + k];
            }
            v
        };
        for (c, plane) in planes.iter_mut().enumerate() {
            plane[x] = lane(output.offsets[c]) * output.scale[c] + output.bias[c];
        }
    }
}

/// The whole groups of four pixels of [`float_vertical`]; returns how many pixels it wrote.
/// (Stores that bypass the cache, `movntps`, measured slower here.)
#[cfg(target_arch = "x86_64")]
#[allow(unused_unsafe)]
fn float_vertical_simd(
    rows: &[&[f32]],
    weights: &[f32],
    output: &FloatOutput,
    planes: [*const f32; 3],
    n: usize,
) -> usize {
    use std::arch::x86_64::*;
    let groups = n / 4;
    let planes = planes.map(|p| p as *mut f32);
    let start = if avx2() {
        // SAFETY: AVX2 is present (checked just now); the bounds are the caller's, as below.
        unsafe { float_vertical_avx2(rows, weights, output, planes, n) / 4 }
    } else {
        0
    };
    // SAFETY: SSE2 is part of x86_64. Each row holds 4n floats (asserted by the caller) and the
    // loads read floats 16g..16g + 16 < 4n for g < n / 4; the planes hold n floats (asserted),
    // the stores write 4g..4g + 4 < n. The
    // planes are the caller's exclusive `&mut` slices, only written here.
    unsafe {
        let scale = output.scale.map(|s| _mm_set1_ps(s));
        let bias = output.bias.map(|b| _mm_set1_ps(b));
        for g in start..groups {
            let at = g * 16;
            let w0 = _mm_set1_ps(weights[0]);
            let r0 = rows[0].as_ptr().add(at);
            let mut a = [
                _mm_mul_ps(w0, _mm_loadu_ps(r0)),
                _mm_mul_ps(w0, _mm_loadu_ps(r0.add(4))),
                _mm_mul_ps(w0, _mm_loadu_ps(r0.add(8))),
                _mm_mul_ps(w0, _mm_loadu_ps(r0.add(12))),
            ];
            for (r, &w) in rows.iter().zip(weights).skip(1) {
                let (w, r) = (_mm_set1_ps(w), r.as_ptr().add(at));
                for (i, a) in a.iter_mut().enumerate() {
                    *a = _mm_add_ps(*a, _mm_mul_ps(w, _mm_loadu_ps(r.add(4 * i))));
                }
            }
            // Four pixels × four lanes → lanes 0, 1, 2 of the four pixels.
            let t0 = _mm_unpacklo_ps(a[0], a[1]);
            let t1 = _mm_unpacklo_ps(a[2], a[3]);
            let t2 = _mm_unpackhi_ps(a[0], a[1]);
            let t3 = _mm_unpackhi_ps(a[2], a[3]);
            let lanes = [
                _mm_movelh_ps(t0, t1),
                _mm_movehl_ps(t1, t0),
                _mm_movelh_ps(t2, t3),
            ];
            for c in 0..3 {
                let v = _mm_add_ps(_mm_mul_ps(lanes[output.offsets[c]], scale[c]), bias[c]);
                let d = planes[c].add(4 * g);
                _mm_storeu_ps(d, v);
            }
        }
    }
    groups * 4
}

/// [`float_vertical_simd`] eight pixels at a time on AVX2; returns how many pixels it wrote.
///
/// # Safety
/// AVX2 must be present, and the bounds [`float_vertical`] asserts must hold (`planes` its planes).
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
unsafe fn float_vertical_avx2(
    rows: &[&[f32]],
    weights: &[f32],
    output: &FloatOutput,
    planes: [*mut f32; 3],
    n: usize,
) -> usize {
    match rows.len() {
        1 => float_vertical_avx2_n::<1>(rows, weights, output, planes, n),
        2 => float_vertical_avx2_n::<2>(rows, weights, output, planes, n),
        3 => float_vertical_avx2_n::<3>(rows, weights, output, planes, n),
        4 => float_vertical_avx2_n::<4>(rows, weights, output, planes, n),
        5 => float_vertical_avx2_n::<5>(rows, weights, output, planes, n),
        6 => float_vertical_avx2_n::<6>(rows, weights, output, planes, n),
        7 => float_vertical_avx2_n::<7>(rows, weights, output, planes, n),
        8 => float_vertical_avx2_n::<8>(rows, weights, output, planes, n),
        _ => float_vertical_avx2_any(rows, weights, output, planes, n),
    }
}

/// [`float_vertical_avx2`] for `N` taps: the weights broadcast and the rows' addresses taken once
/// per row, the tap loop unrolled.
///
/// # Safety
/// As [`float_vertical_avx2`]; `rows` and `weights` hold `N` entries.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
unsafe fn float_vertical_avx2_n<const N: usize>(
    rows: &[&[f32]],
    weights: &[f32],
    output: &FloatOutput,
    planes: [*mut f32; 3],
    n: usize,
) -> usize {
    use std::arch::x86_64::*;
    let mut w = [_mm256_setzero_ps(); N];
    let mut r = [std::ptr::null::<f32>(); N];
    for i in 0..N {
        w[i] = _mm256_set1_ps(weights[i]);
        r[i] = rows[i].as_ptr();
    }
    let out = AvxPlanes::new(output, planes);
    for g in 0..n / 8 {
        // Floats 32g..32g + 32 ≤ 4n of each row; 8g..8g + 8 ≤ n of each plane.
        let at = g * 32;
        let mut a = [_mm256_setzero_ps(); 4];
        for (k, a) in a.iter_mut().enumerate() {
            *a = _mm256_mul_ps(w[0], _mm256_loadu_ps(r[0].add(at + 8 * k)));
        }
        for i in 1..N {
            for (k, a) in a.iter_mut().enumerate() {
                let v = _mm256_loadu_ps(r[i].add(at + 8 * k));
                *a = _mm256_add_ps(*a, _mm256_mul_ps(w[i], v));
            }
        }
        out.store(a, g);
    }
    n / 8 * 8
}

/// [`float_vertical_avx2`] for any number of taps.
///
/// # Safety
/// As [`float_vertical_avx2`].
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
unsafe fn float_vertical_avx2_any(
    rows: &[&[f32]],
    weights: &[f32],
    output: &FloatOutput,
    planes: [*mut f32; 3],
    n: usize,
) -> usize {
    use std::arch::x86_64::*;
    let out = AvxPlanes::new(output, planes);
    for g in 0..n / 8 {
        // Floats 32g..32g + 32 ≤ 4n of each row; 8g..8g + 8 ≤ n of each plane.
        let at = g * 32;
        let w0 = _mm256_set1_ps(weights[0]);
        let r0 = rows[0].as_ptr().add(at);
        let mut a = [_mm256_setzero_ps(); 4];
        for (k, a) in a.iter_mut().enumerate() {
            *a = _mm256_mul_ps(w0, _mm256_loadu_ps(r0.add(8 * k)));
        }
        for i in 1..rows.len() {
            let (w, r) = (_mm256_set1_ps(weights[i]), rows[i].as_ptr().add(at));
            for (k, a) in a.iter_mut().enumerate() {
                *a = _mm256_add_ps(*a, _mm256_mul_ps(w, _mm256_loadu_ps(r.add(8 * k))));
            }
        }
        out.store(a, g);
    }
    n / 8 * 8
}

/// The float vertical pass's last step on AVX2: eight pixels of four lanes each, normalised
/// channel by channel into the three planes.
#[cfg(target_arch = "x86_64")]
struct AvxPlanes {
    planes: [*mut f32; 3],
    offsets: [usize; 3],
    scale: [std::arch::x86_64::__m256; 3],
    bias: [std::arch::x86_64::__m256; 3],
    order: std::arch::x86_64::__m256i,
}

#[cfg(target_arch = "x86_64")]
impl AvxPlanes {
    /// # Safety
    /// AVX2 must be present.
    #[target_feature(enable = "avx2")]
    unsafe fn new(output: &FloatOutput, planes: [*mut f32; 3]) -> AvxPlanes {
        use std::arch::x86_64::*;
        let mut scale = [_mm256_setzero_ps(); 3];
        let mut bias = [_mm256_setzero_ps(); 3];
        for c in 0..3 {
            scale[c] = _mm256_set1_ps(output.scale[c]);
            bias[c] = _mm256_set1_ps(output.bias[c]);
        }
        AvxPlanes {
            planes,
            offsets: output.offsets,
            scale,
            bias,
            // After the in-lane transpose below a channel's vector holds pixels 0 2 4 6 | 1 3 5 7.
            order: _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7),
        }
    }

    /// Writes pixels 8g..8g + 8 from `a` (`a[i]` holds pixels 2i, low half, and 2i + 1).
    ///
    /// # Safety
    /// AVX2 must be present, and each plane must hold 8g + 8 floats.
    #[inline]
    #[target_feature(enable = "avx2")]
    unsafe fn store(&self, a: [std::arch::x86_64::__m256; 4], g: usize) {
        use std::arch::x86_64::*;
        let t0 = _mm256_unpacklo_ps(a[0], a[1]);
        let t1 = _mm256_unpacklo_ps(a[2], a[3]);
        let t2 = _mm256_unpackhi_ps(a[0], a[1]);
        let t3 = _mm256_unpackhi_ps(a[2], a[3]);
        let lanes = [
            _mm256_shuffle_ps::<0b01_00_01_00>(t0, t1),
            _mm256_shuffle_ps::<0b11_10_11_10>(t0, t1),
            _mm256_shuffle_ps::<0b01_00_01_00>(t2, t3),
        ];
        for c in 0..3 {
            let v = _mm256_permutevar8x32_ps(lanes[self.offsets[c]], self.order);
            let v = _mm256_add_ps(_mm256_mul_ps(v, self.scale[c]), self.bias[c]);
            _mm256_storeu_ps(self.planes[c].add(8 * g), v);
        }
    }
}

#[cfg(not(target_arch = "x86_64"))]
fn float_vertical_simd(
    _: &[&[f32]],
    _: &[f32],
    _: &FloatOutput,
    _: [*const f32; 3],
    _: usize,
) -> usize {
    0
}
