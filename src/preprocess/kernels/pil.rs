//! The video path's kernels: PIL's bicubic resize of the 8-bit frame in its 32-bit fixed point
//! (22-bit weights; each pass's sums start at half a unit and are shifted back and clipped to 8
//! bits, as Pillow's `clip8`), then Meta's float32 normalisation of each byte into its plane.
//! The sums are PIL's exactly, on every path (SSE2, AVX2, plain loops), so all give its bits.
//!
//! PIL's sums on 16-bit lanes: a weight `w` (22-bit fixed point, signed) is split as
//! `hi · 2¹¹ + lo` with `0 ≤ lo < 2¹¹`; both halves fit 16 bits, so `pmaddwd` multiplies the 8-bit
//! values by each half and adds tap pairs into 32-bit sums; `(Σ v·hi) · 2¹¹ + Σ v·lo` is then
//! `Σ v·w` exactly (arithmetic modulo 2³², and the true sum fits 32 bits: at most 255 times the
//! weights' positive part, about 1.2 · 2²²).

#[cfg(target_arch = "x86_64")]
use super::avx2;
use super::{Horizontal, LANES};

/// PIL's fixed-point precision for 8-bit images (Pillow's `PRECISION_BITS`).
pub(in crate::preprocess) const PIL_BITS: u32 = 22;
/// Where each of PIL's sums starts: half a unit, so the final shift rounds.
const PIL_HALF: i32 = 1 << (PIL_BITS - 1);
/// Where a weight splits into the halves `pmaddwd` takes.
const SPLIT: u32 = 11;

/// PIL's `clip8`: a fixed-point sum (its half-unit included) back to 8 bits.
#[inline(always)]
fn clip8(sum: i32) -> u8 {
    (sum >> PIL_BITS).clamp(0, 255) as u8
}

/// Weights split for `pmaddwd`, a tap pair at a time: `[lo(a), lo(b)] × 4` and `[hi(a), hi(b)] × 4`
/// (one pair per pixel lane).
fn split_pair(a: i32, b: i32) -> [[i16; 8]; 2] {
    let lo = |w: i32| (w & ((1 << SPLIT) - 1)) as i16;
    let hi = |w: i32| {
        let h = w >> SPLIT;
        i16::try_from(h).expect("PIL weights fit 27 bits")
    };
    let pair = |f: &dyn Fn(i32) -> i16| std::array::from_fn(|i| f(if i % 2 == 0 { a } else { b }));
    [pair(&lo), pair(&hi)]
}

/// PIL's vertical weights of one output row: `(rows[2p], rows[2p + 1])` pairs split for `pmaddwd`,
/// an odd last tap paired with a zero weight.
pub(in crate::preprocess) fn pil_vertical_pairs(weights: &[i32]) -> Vec<[[i16; 8]; 2]> {
    weights
        .chunks(2)
        .map(|w| split_pair(w[0], w.get(1).copied().unwrap_or(0)))
        .collect()
}

/// Where output `x`'s low halves for tap pair `q` lie in PIL's horizontal table (`pairs` pairs
/// per output); its high halves lie two entries further. Outputs go by twos: for outputs 2k and
/// 2k + 1 and pair q, four entries `lo(2k), lo(2k + 1), hi(2k), hi(2k + 1)`, so that AVX2 reads
/// two outputs' halves in one load.
#[inline(always)]
fn pil_entry(x: usize, q: usize, pairs: usize) -> usize {
    ((x / 2) * pairs + q) * 4 + x % 2
}

/// PIL's horizontal table: the integer weights split into halves, a pair of taps at a time (an odd
/// last tap pairs with a zero weight, reading one pixel further), laid out as [`pil_entry`] says
/// (an odd number of outputs padded with one of zero weights).
pub(in crate::preprocess) fn pil_horizontal_table(
    taps: usize,
    first: &[usize],
    weights: &[i32],
) -> Horizontal<[i16; 8]> {
    assert_eq!(weights.len(), taps * first.len());
    let pairs = taps.div_ceil(2);
    let outputs = first.len().next_multiple_of(2);
    let mut table = vec![[0i16; 8]; outputs * pairs * 2];
    for (x, w) in weights.chunks_exact(taps).enumerate() {
        for q in 0..pairs {
            let [lo, hi] = split_pair(w[2 * q], w.get(2 * q + 1).copied().unwrap_or(0));
            table[pil_entry(x, q, pairs)] = lo;
            table[pil_entry(x, q, pairs) + 2] = hi;
        }
    }
    Horizontal {
        taps: 2 * pairs,
        first: first.to_vec(),
        weights: table,
        reach: first.iter().max().map_or(0, |&f| f + 2 * pairs),
    }
}

/// Resamples the widened row `wide` (`channels` values 0..=255 per pixel) into `out` (four bytes
/// per output pixel): each lane `clip8(½ + Σ w·p)`, PIL's horizontal pass.
pub(in crate::preprocess) fn pil_horizontal(
    table: &Horizontal<[i16; 8]>,
    wide: &[i16],
    channels: usize,
    out: &mut [u8],
) {
    assert!(wide.len() >= table.wide_len(channels));
    assert!(out.len() >= LANES * table.first.len());
    match table.taps / 2 {
        1 => pil_horizontal_n::<1>(table, wide, channels, out),
        2 => pil_horizontal_n::<2>(table, wide, channels, out),
        3 => pil_horizontal_n::<3>(table, wide, channels, out),
        4 => pil_horizontal_n::<4>(table, wide, channels, out),
        5 => pil_horizontal_n::<5>(table, wide, channels, out),
        6 => pil_horizontal_n::<6>(table, wide, channels, out),
        7 => pil_horizontal_n::<7>(table, wide, channels, out),
        8 => pil_horizontal_n::<8>(table, wide, channels, out),
        pairs => pil_horizontal_portable(table, pairs, wide, channels, out, 0),
    }
}

#[cfg(target_arch = "x86_64")]
#[inline(always)]
fn pil_horizontal_n<const PAIRS: usize>(
    table: &Horizontal<[i16; 8]>,
    wide: &[i16],
    channels: usize,
    out: &mut [u8],
) {
    let done = if avx2() {
        // SAFETY: AVX2 is present (checked just now); the bounds were asserted by the caller.
        unsafe { pil_horizontal_avx2::<PAIRS>(table, wide, channels, out) }
    } else {
        0
    };
    pil_horizontal_sse2::<PAIRS>(table, wide, channels, out, done);
}

/// PIL's horizontal pass from output `start` on, one output per SSE2 register.
#[cfg(target_arch = "x86_64")]
#[inline(always)]
#[allow(unused_unsafe)]
fn pil_horizontal_sse2<const PAIRS: usize>(
    table: &Horizontal<[i16; 8]>,
    wide: &[i16],
    channels: usize,
    out: &mut [u8],
    start: usize,
) {
    use std::arch::x86_64::*;
    let (src, dst) = (wide.as_ptr(), out.as_mut_ptr());
    let weights = table.weights.as_ptr() as *const __m128i;
    for (x, &first) in table.first.iter().enumerate().skip(start) {
        // SAFETY: SSE2 is part of x86_64. The reads, pixels first + j for j < 2·PAIRS = taps,
        // four i16 each, end below `reach · channels + 4` values, which `wide` holds (asserted by
        // the caller); the weight entries are the table's (`pil_entry` of an output below its
        // length); the store writes out[4x..4x + 4] (asserted).
        unsafe {
            let p = src.add(first * channels);
            let mut lo = _mm_set1_epi32(PIL_HALF);
            let mut hi = _mm_setzero_si128();
            for q in 0..PAIRS {
                let a = _mm_loadl_epi64(p.add(2 * q * channels) as *const __m128i);
                let b = _mm_loadl_epi64(p.add((2 * q + 1) * channels) as *const __m128i);
                let v = _mm_unpacklo_epi16(a, b);
                let w = weights.add(pil_entry(x, q, PAIRS));
                lo = _mm_add_epi32(lo, _mm_madd_epi16(v, _mm_loadu_si128(w)));
                hi = _mm_add_epi32(hi, _mm_madd_epi16(v, _mm_loadu_si128(w.add(2))));
            }
            let sum = _mm_add_epi32(_mm_slli_epi32(hi, SPLIT as i32), lo);
            let v = _mm_srai_epi32(sum, PIL_BITS as i32);
            let v = _mm_packs_epi32(v, v);
            let v = _mm_packus_epi16(v, v);
            (dst.add(x * LANES) as *mut i32).write_unaligned(_mm_cvtsi128_si32(v));
        }
    }
}

/// PIL's horizontal pass two outputs per AVX2 register (the first in the low half), over the
/// whole pairs of outputs; returns how many outputs it wrote.
///
/// # Safety
/// AVX2 must be present, and the bounds [`pil_horizontal`] asserts must hold.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
unsafe fn pil_horizontal_avx2<const PAIRS: usize>(
    table: &Horizontal<[i16; 8]>,
    wide: &[i16],
    channels: usize,
    out: &mut [u8],
) -> usize {
    use std::arch::x86_64::*;
    let (src, dst) = (wide.as_ptr(), out.as_mut_ptr());
    let weights = table.weights.as_ptr() as *const __m256i;
    let outputs = table.first.len() / 2 * 2;
    // Eight values from a tap pair's first pixel hold both pixels (`channels` apart); this
    // shuffle pairs them up lane by lane, `[a₀ b₀ a₁ b₁ a₂ b₂ a₃ b₃]` (lanes past the channels
    // are never read).
    let order: [i8; 8] = match channels {
        4 => [0, 4, 1, 5, 2, 6, 3, 7],
        3 => [0, 3, 1, 4, 2, 5, 6, 7],
        _ => [0, 1, 2, 3, 4, 5, 6, 7],
    };
    let mut bytes = [0i8; 16];
    for (i, &o) in order.iter().enumerate() {
        bytes[2 * i] = 2 * o;
        bytes[2 * i + 1] = 2 * o + 1;
    }
    let shuffle = _mm256_broadcastsi128_si256(_mm_loadu_si128(bytes.as_ptr() as *const __m128i));
    for (k, first) in table.first[..outputs].chunks_exact(2).enumerate() {
        // The writes of `pil_horizontal_sse2` for outputs 2k and 2k + 1; each read takes eight
        // values from pixel first + 2q, ending below (first + 2q)·channels + 8 ≤ reach · channels
        // + 8 (first + 2q + 2 ≤ reach), which `wide` holds; the 32-byte weight loads read entries
        // pil_entry(2k, q) and the next three, inside the table.
        let (p0, p1) = (src.add(first[0] * channels), src.add(first[1] * channels));
        let mut lo = _mm256_set1_epi32(PIL_HALF);
        let mut hi = _mm256_setzero_si256();
        for q in 0..PAIRS {
            let a = 2 * q * channels;
            let v0 = _mm_loadu_si128(p0.add(a) as *const __m128i);
            let v1 = _mm_loadu_si128(p1.add(a) as *const __m128i);
            let v = _mm256_inserti128_si256::<1>(_mm256_castsi128_si256(v0), v1);
            let v = _mm256_shuffle_epi8(v, shuffle);
            let w = weights.add((k * PAIRS + q) * 2);
            lo = _mm256_add_epi32(lo, _mm256_madd_epi16(v, _mm256_loadu_si256(w)));
            hi = _mm256_add_epi32(hi, _mm256_madd_epi16(v, _mm256_loadu_si256(w.add(1))));
        }
        let sum = _mm256_add_epi32(_mm256_slli_epi32::<{ SPLIT as i32 }>(hi), lo);
        let v = _mm256_srai_epi32::<{ PIL_BITS as i32 }>(sum);
        let v = _mm256_packs_epi32(v, v);
        let v = _mm256_packus_epi16(v, v);
        let d = dst.add(2 * k * LANES) as *mut i32;
        d.write_unaligned(_mm_cvtsi128_si32(_mm256_castsi256_si128(v)));
        d.add(1)
            .write_unaligned(_mm_cvtsi128_si32(_mm256_extracti128_si256::<1>(v)));
    }
    outputs
}

#[cfg(not(target_arch = "x86_64"))]
#[inline(always)]
fn pil_horizontal_n<const PAIRS: usize>(
    table: &Horizontal<[i16; 8]>,
    wide: &[i16],
    channels: usize,
    out: &mut [u8],
) {
    pil_horizontal_portable(table, PAIRS, wide, channels, out, 0)
}

/// The weight of a split pair's first (`i = 0`) or second tap, from its low and high halves.
#[inline(always)]
fn joined(lo: &[i16; 8], hi: &[i16; 8], i: usize) -> i32 {
    ((hi[i] as i32) << SPLIT) + lo[i] as i32
}

/// [`pil_horizontal`] in plain Rust, on 32-bit integers, from output `start` on.
#[inline(always)]
fn pil_horizontal_portable(
    table: &Horizontal<[i16; 8]>,
    pairs: usize,
    wide: &[i16],
    channels: usize,
    out: &mut [u8],
    start: usize,
) {
    for (x, &first) in table.first.iter().enumerate().skip(start) {
        let mut acc = [PIL_HALF; LANES];
        for q in 0..pairs {
            let at = pil_entry(x, q, pairs);
            let (lo, hi) = (&table.weights[at], &table.weights[at + 2]);
            for i in 0..2 {
                let w = joined(lo, hi, i);
                let p = &wide[(first + 2 * q + i) * channels..][..LANES];
                for k in 0..LANES {
                    acc[k] = acc[k].wrapping_add(w.wrapping_mul(p[k] as i32));
                }
            }
        }
        for k in 0..LANES {
            out[x * LANES + k] = clip8(acc[k]);
        }
    }
}

/// What PIL's vertical pass makes of the bytes it computes: lane `offsets[c]` of each pixel (the
/// lane holding channel `c`) goes to plane `c` as a value of the planes' type. Two kinds: Meta's
/// float32 normalisation of each byte ([`Normalised`], the video path) and the byte itself
/// ([`Bytes`], SAM 3's uint8 input).
pub(in crate::preprocess) trait PilOutput: Sync {
    type Value: Copy + Send;
    /// What byte `v` of channel `c` becomes.
    fn value(&self, c: usize, v: u8) -> Self::Value;
    /// Writes pixels 4g..4g + 4 from their 16 bytes (four lanes a pixel).
    ///
    /// # Safety
    /// Each plane must hold 4g + 4 values.
    #[cfg(target_arch = "x86_64")]
    unsafe fn store4(
        &self,
        bytes: &[u8; 16],
        offsets: [usize; 3],
        planes: [*mut Self::Value; 3],
        g: usize,
    );
    /// What [`PilOutput::store8`] needs, made once per output row.
    #[cfg(target_arch = "x86_64")]
    type Avx2;
    /// # Safety
    /// AVX2 and FMA must be present.
    #[cfg(target_arch = "x86_64")]
    unsafe fn avx2(&self, offsets: [usize; 3]) -> Self::Avx2;
    /// Writes pixels 8g..8g + 8 from their 32 bytes (four lanes a pixel, in pixel order).
    ///
    /// # Safety
    /// AVX2 and FMA must be present, and each plane must hold 8g + 8 values.
    #[cfg(target_arch = "x86_64")]
    unsafe fn store8(
        avx2: &Self::Avx2,
        bytes: std::arch::x86_64::__m256i,
        planes: [*mut Self::Value; 3],
        g: usize,
    );
}

/// Meta's float32 normalisation of PIL's 8-bit values, per channel: the value of each byte,
/// which the plain and SSE2 paths look up, and the mean and std from which the AVX2 path
/// computes the same values (a gather of eight floats costs several times as much there).
pub(in crate::preprocess) struct Normalised {
    pub(in crate::preprocess) table: [[f32; 256]; 3],
    /// Read by the x86_64 kernels only.
    #[cfg_attr(not(target_arch = "x86_64"), allow(dead_code))]
    pub(in crate::preprocess) mean: [f32; 3],
    #[cfg_attr(not(target_arch = "x86_64"), allow(dead_code))]
    pub(in crate::preprocess) std: [f32; 3],
}

/// [`Normalised`]'s constants for AVX2, broadcast once per row: the channels' lanes and means,
/// and the divisors with their reciprocals (see [`PilOutput::store8`] for [`Normalised`]).
#[cfg(target_arch = "x86_64")]
pub(in crate::preprocess) struct NormalisedAvx2 {
    offsets: [usize; 3],
    mean: [std::arch::x86_64::__m256; 3],
    /// 255, then each channel's std: `[divisor, 1 / divisor]`.
    byte: [std::arch::x86_64::__m256; 2],
    std: [[std::arch::x86_64::__m256; 2]; 3],
}

impl PilOutput for Normalised {
    type Value = f32;

    fn value(&self, c: usize, v: u8) -> f32 {
        self.table[c][v as usize]
    }

    #[cfg(target_arch = "x86_64")]
    #[inline(always)]
    unsafe fn store4(&self, b: &[u8; 16], offsets: [usize; 3], planes: [*mut f32; 3], g: usize) {
        use std::arch::x86_64::*;
        for c in 0..3 {
            let (lut, o) = (&self.table[c], offsets[c]);
            let v = _mm_set_ps(
                lut[b[12 + o] as usize],
                lut[b[8 + o] as usize],
                lut[b[4 + o] as usize],
                lut[b[o] as usize],
            );
            _mm_storeu_ps(planes[c].add(4 * g), v);
        }
    }

    #[cfg(target_arch = "x86_64")]
    type Avx2 = NormalisedAvx2;

    #[cfg(target_arch = "x86_64")]
    #[inline]
    #[target_feature(enable = "avx2,fma")]
    unsafe fn avx2(&self, offsets: [usize; 3]) -> NormalisedAvx2 {
        use std::arch::x86_64::*;
        let divisor = |d: f32| [_mm256_set1_ps(d), _mm256_set1_ps(1.0 / d)];
        NormalisedAvx2 {
            offsets,
            mean: self.mean.map(|m| _mm256_set1_ps(m)),
            byte: divisor(255.0),
            std: self.std.map(divisor),
        }
    }

    /// Each 32-bit element is one pixel's four lanes, in pixel order: lane `o` of each is its
    /// channel's byte v, normalised as Meta does, (v / 255 − mean) / std in float32. Each quotient
    /// n / d is computed from the reciprocal and one fused correction step, q = n · (1/d), then
    /// q + (n − q·d) · (1/d), which rounds as the division does for every byte and channel here
    /// (the unit tests hold every value to Meta's table).
    #[cfg(target_arch = "x86_64")]
    #[inline]
    #[target_feature(enable = "avx2,fma")]
    unsafe fn store8(
        out: &NormalisedAvx2,
        bytes: std::arch::x86_64::__m256i,
        planes: [*mut f32; 3],
        g: usize,
    ) {
        use std::arch::x86_64::*;
        let quotient = |n: __m256, [d, inv]: [__m256; 2]| {
            let q = _mm256_mul_ps(n, inv);
            _mm256_fmadd_ps(_mm256_fnmadd_ps(q, d, n), inv, q)
        };
        for (c, plane) in planes.into_iter().enumerate() {
            let shift = _mm256_set1_epi32(8 * out.offsets[c] as i32);
            let index = _mm256_and_si256(_mm256_srlv_epi32(bytes, shift), _mm256_set1_epi32(0xff));
            let x = quotient(_mm256_cvtepi32_ps(index), out.byte);
            let v = quotient(_mm256_sub_ps(x, out.mean[c]), out.std[c]);
            _mm256_storeu_ps(plane.add(8 * g), v);
        }
    }
}

/// The bytes themselves, each channel into its plane.
pub(in crate::preprocess) struct Bytes;

impl PilOutput for Bytes {
    type Value = u8;

    fn value(&self, _: usize, v: u8) -> u8 {
        v
    }

    #[cfg(target_arch = "x86_64")]
    #[inline(always)]
    unsafe fn store4(&self, b: &[u8; 16], offsets: [usize; 3], planes: [*mut u8; 3], g: usize) {
        for (plane, o) in planes.into_iter().zip(offsets) {
            let v = [b[o], b[4 + o], b[8 + o], b[12 + o]];
            (plane.add(4 * g) as *mut [u8; 4]).write_unaligned(v);
        }
    }

    /// Per channel, the shuffle that gathers lane `offsets[c]` of the four pixels of each 128-bit
    /// half into that half's first four bytes.
    #[cfg(target_arch = "x86_64")]
    type Avx2 = [std::arch::x86_64::__m256i; 3];

    #[cfg(target_arch = "x86_64")]
    #[inline]
    #[target_feature(enable = "avx2,fma")]
    unsafe fn avx2(&self, offsets: [usize; 3]) -> Self::Avx2 {
        use std::arch::x86_64::*;
        offsets.map(|o| {
            let mut order = [-1i8; 16];
            for (p, b) in order[..4].iter_mut().enumerate() {
                *b = (4 * p + o) as i8;
            }
            _mm256_broadcastsi128_si256(_mm_loadu_si128(order.as_ptr() as *const __m128i))
        })
    }

    #[cfg(target_arch = "x86_64")]
    #[inline]
    #[target_feature(enable = "avx2,fma")]
    unsafe fn store8(
        gather: &Self::Avx2,
        bytes: std::arch::x86_64::__m256i,
        planes: [*mut u8; 3],
        g: usize,
    ) {
        use std::arch::x86_64::*;
        for (plane, order) in planes.into_iter().zip(gather) {
            let v = _mm256_shuffle_epi8(bytes, *order);
            let low = _mm256_cvtsi256_si32(v) as u32 as u64;
            let high = _mm256_extract_epi32::<4>(v) as u32 as u64;
            (plane.add(8 * g) as *mut u64).write_unaligned((low | high << 32).to_le());
        }
    }
}

/// PIL's vertical pass for one output row: each value `clip8(½ + Σ w·r)` over the resampled rows
/// (paired as [`pil_vertical_pairs`] pairs the weights; an odd last row pairs with any row, its
/// weight zero), then lane `offsets[c]` into plane `c` as `output` makes it.
pub(in crate::preprocess) fn pil_vertical<O: PilOutput>(
    rows: &[&[u8]],
    pairs: &[[[i16; 8]; 2]],
    offsets: [usize; 3],
    output: &O,
    planes: [&mut [O::Value]; 3],
) {
    let n = planes[0].len();
    assert!(!rows.is_empty() && rows.len() == 2 * pairs.len());
    assert!(rows.iter().all(|r| r.len() >= LANES * n));
    assert!(planes.iter().all(|p| p.len() == n) && offsets.iter().all(|&o| o < 3));
    let [p0, p1, p2] = planes;
    let mut planes = [p0, p1, p2];
    let done = pil_vertical_simd(
        rows,
        pairs,
        offsets,
        output,
        planes.each_mut().map(|p| p.as_mut_ptr()),
        n,
    );
    for x in done..n {
        let mut lanes = [0u8; LANES];
        for (k, l) in lanes.iter_mut().enumerate() {
            let mut acc = PIL_HALF;
            for (q, pair) in pairs.iter().enumerate() {
                for i in 0..2 {
                    let v = rows[2 * q + i][x * LANES + k] as i32;
                    acc = acc.wrapping_add(joined(&pair[0], &pair[1], i).wrapping_mul(v));
                }
            }
            *l = clip8(acc);
        }
        for (c, plane) in planes.iter_mut().enumerate() {
            plane[x] = output.value(c, lanes[offsets[c]]);
        }
    }
}

/// The whole groups of four pixels of [`pil_vertical`]; returns how many pixels it wrote.
#[cfg(target_arch = "x86_64")]
#[allow(unused_unsafe)]
fn pil_vertical_simd<O: PilOutput>(
    rows: &[&[u8]],
    pairs: &[[[i16; 8]; 2]],
    offsets: [usize; 3],
    output: &O,
    planes: [*mut O::Value; 3],
    n: usize,
) -> usize {
    use std::arch::x86_64::*;
    let groups = n / 4;
    let start = if avx2() {
        // SAFETY: AVX2 and FMA are present (checked just now); the bounds are the caller's, as
        // below.
        unsafe { pil_vertical_avx2(rows, pairs, offsets, output, planes, n) / 4 }
    } else {
        0
    };
    // SAFETY: SSE2 is part of x86_64. Each row holds 4n bytes (asserted by the caller); the loads
    // read bytes 16g..16g + 16 ≤ 4n for g < n / 4; the weight pairs are read by index within
    // `pairs`; the planes hold n values (asserted), the stores write 4g..4g + 4 ≤ n. The planes
    // are the caller's exclusive `&mut` slices.
    unsafe {
        let zero = _mm_setzero_si128();
        let weights: Vec<[__m128i; 2]> = pairs
            .iter()
            .map(|p| p.map(|w| _mm_loadu_si128(w.as_ptr() as *const __m128i)))
            .collect();
        for g in start..groups {
            let at = g * 16;
            let mut lo = [_mm_set1_epi32(PIL_HALF); 4];
            let mut hi = [zero; 4];
            for (q, [wl, wh]) in weights.iter().enumerate() {
                let a = _mm_loadu_si128(rows[2 * q].as_ptr().add(at) as *const __m128i);
                let b = _mm_loadu_si128(rows[2 * q + 1].as_ptr().add(at) as *const __m128i);
                let (l, h) = (_mm_unpacklo_epi8(a, b), _mm_unpackhi_epi8(a, b));
                let v = [
                    _mm_unpacklo_epi8(l, zero),
                    _mm_unpackhi_epi8(l, zero),
                    _mm_unpacklo_epi8(h, zero),
                    _mm_unpackhi_epi8(h, zero),
                ];
                for i in 0..4 {
                    lo[i] = _mm_add_epi32(lo[i], _mm_madd_epi16(v[i], *wl));
                    hi[i] = _mm_add_epi32(hi[i], _mm_madd_epi16(v[i], *wh));
                }
            }
            let r: [__m128i; 4] = std::array::from_fn(|i| {
                let sum = _mm_add_epi32(_mm_slli_epi32(hi[i], SPLIT as i32), lo[i]);
                _mm_srai_epi32(sum, PIL_BITS as i32)
            });
            let bytes = _mm_packus_epi16(_mm_packs_epi32(r[0], r[1]), _mm_packs_epi32(r[2], r[3]));
            let mut b = [0u8; 16];
            _mm_storeu_si128(b.as_mut_ptr() as *mut __m128i, bytes);
            output.store4(&b, offsets, planes, g);
        }
    }
    groups * 4
}

/// [`pil_vertical_simd`] eight pixels per AVX2 register pair (its 128-bit halves each the SSE2
/// kernel's, so the bytes come out in order); returns how many pixels it wrote.
///
/// # Safety
/// AVX2 and FMA must be present, and the bounds [`pil_vertical`] asserts must hold (`planes` its
/// planes).
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
unsafe fn pil_vertical_avx2<O: PilOutput>(
    rows: &[&[u8]],
    pairs: &[[[i16; 8]; 2]],
    offsets: [usize; 3],
    output: &O,
    planes: [*mut O::Value; 3],
    n: usize,
) -> usize {
    let out = output.avx2(offsets);
    match pairs.len() {
        1 => pil_vertical_avx2_n::<1, O>(rows, pairs, &out, planes, n),
        2 => pil_vertical_avx2_n::<2, O>(rows, pairs, &out, planes, n),
        3 => pil_vertical_avx2_n::<3, O>(rows, pairs, &out, planes, n),
        4 => pil_vertical_avx2_n::<4, O>(rows, pairs, &out, planes, n),
        5 => pil_vertical_avx2_n::<5, O>(rows, pairs, &out, planes, n),
        6 => pil_vertical_avx2_n::<6, O>(rows, pairs, &out, planes, n),
        _ => pil_vertical_avx2_any::<O>(rows, pairs, &out, planes, n),
    }
}

/// [`pil_vertical_avx2`] for `PAIRS` tap pairs: the weights broadcast and the rows' addresses
/// taken once per row, the pair loop unrolled.
///
/// # Safety
/// As [`pil_vertical_avx2`]; `rows` holds `2 · PAIRS` rows and `pairs` `PAIRS` pairs.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
unsafe fn pil_vertical_avx2_n<const PAIRS: usize, O: PilOutput>(
    rows: &[&[u8]],
    pairs: &[[[i16; 8]; 2]],
    out: &O::Avx2,
    planes: [*mut O::Value; 3],
    n: usize,
) -> usize {
    use std::arch::x86_64::*;
    let mut w = [[_mm256_setzero_si256(); 2]; PAIRS];
    let mut r = [[std::ptr::null::<u8>(); 2]; PAIRS];
    for q in 0..PAIRS {
        for h in 0..2 {
            let half = _mm_loadu_si128(pairs[q][h].as_ptr() as *const __m128i);
            w[q][h] = _mm256_broadcastsi128_si256(half);
            r[q][h] = rows[2 * q + h].as_ptr();
        }
    }
    for g in 0..n / 8 {
        // Bytes 32g..32g + 32 ≤ 4n of each row; values 8g..8g + 8 ≤ n of each plane.
        let at = g * 32;
        let mut lo = [_mm256_set1_epi32(PIL_HALF); 4];
        let mut hi = [_mm256_setzero_si256(); 4];
        for q in 0..PAIRS {
            let a = _mm256_loadu_si256(r[q][0].add(at) as *const __m256i);
            let b = _mm256_loadu_si256(r[q][1].add(at) as *const __m256i);
            pil_vertical_pair(a, b, w[q], &mut lo, &mut hi);
        }
        O::store8(out, pil_bytes(lo, hi), planes, g);
    }
    n / 8 * 8
}

/// [`pil_vertical_avx2`] for any number of tap pairs.
///
/// # Safety
/// As [`pil_vertical_avx2`].
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
unsafe fn pil_vertical_avx2_any<O: PilOutput>(
    rows: &[&[u8]],
    pairs: &[[[i16; 8]; 2]],
    out: &O::Avx2,
    planes: [*mut O::Value; 3],
    n: usize,
) -> usize {
    use std::arch::x86_64::*;
    for g in 0..n / 8 {
        // Bytes 32g..32g + 32 ≤ 4n of each row; values 8g..8g + 8 ≤ n of each plane.
        let at = g * 32;
        let mut lo = [_mm256_set1_epi32(PIL_HALF); 4];
        let mut hi = [_mm256_setzero_si256(); 4];
        for (q, [wl, wh]) in pairs.iter().enumerate() {
            let wl = _mm256_broadcastsi128_si256(_mm_loadu_si128(wl.as_ptr() as *const __m128i));
            let wh = _mm256_broadcastsi128_si256(_mm_loadu_si128(wh.as_ptr() as *const __m128i));
            let a = _mm256_loadu_si256(rows[2 * q].as_ptr().add(at) as *const __m256i);
            let b = _mm256_loadu_si256(rows[2 * q + 1].as_ptr().add(at) as *const __m256i);
            pil_vertical_pair(a, b, [wl, wh], &mut lo, &mut hi);
        }
        O::store8(out, pil_bytes(lo, hi), planes, g);
    }
    n / 8 * 8
}

/// One tap pair of PIL's vertical pass: the 32 bytes of rows `a` and `b` times the pair's split
/// weights, added to the four registers of low and of high sums.
///
/// # Safety
/// AVX2 and FMA must be present.
#[cfg(target_arch = "x86_64")]
#[inline]
#[target_feature(enable = "avx2,fma")]
unsafe fn pil_vertical_pair(
    a: std::arch::x86_64::__m256i,
    b: std::arch::x86_64::__m256i,
    [wl, wh]: [std::arch::x86_64::__m256i; 2],
    lo: &mut [std::arch::x86_64::__m256i; 4],
    hi: &mut [std::arch::x86_64::__m256i; 4],
) {
    use std::arch::x86_64::*;
    let zero = _mm256_setzero_si256();
    let (l, h) = (_mm256_unpacklo_epi8(a, b), _mm256_unpackhi_epi8(a, b));
    let v = [
        _mm256_unpacklo_epi8(l, zero),
        _mm256_unpackhi_epi8(l, zero),
        _mm256_unpacklo_epi8(h, zero),
        _mm256_unpackhi_epi8(h, zero),
    ];
    for i in 0..4 {
        lo[i] = _mm256_add_epi32(lo[i], _mm256_madd_epi16(v[i], wl));
        hi[i] = _mm256_add_epi32(hi[i], _mm256_madd_epi16(v[i], wh));
    }
}

/// PIL's vertical sums of eight pixels back to their 32 bytes (four lanes a pixel, in pixel
/// order): shifted, then clipped to 8 bits by the saturating packs.
///
/// # Safety
/// AVX2 and FMA must be present.
#[cfg(target_arch = "x86_64")]
#[inline]
#[target_feature(enable = "avx2,fma")]
unsafe fn pil_bytes(
    lo: [std::arch::x86_64::__m256i; 4],
    hi: [std::arch::x86_64::__m256i; 4],
) -> std::arch::x86_64::__m256i {
    use std::arch::x86_64::*;
    let mut r = [_mm256_setzero_si256(); 4];
    for i in 0..4 {
        let sum = _mm256_add_epi32(_mm256_slli_epi32::<{ SPLIT as i32 }>(hi[i]), lo[i]);
        r[i] = _mm256_srai_epi32::<{ PIL_BITS as i32 }>(sum);
    }
    _mm256_packus_epi16(
        _mm256_packs_epi32(r[0], r[1]),
        _mm256_packs_epi32(r[2], r[3]),
    )
}

#[cfg(not(target_arch = "x86_64"))]
fn pil_vertical_simd<O: PilOutput>(
    _: &[&[u8]],
    _: &[[[i16; 8]; 2]],
    _: [usize; 3],
    _: &O,
    _: [*mut O::Value; 3],
    _: usize,
) -> usize {
    0
}
