//! The banded passes as they were before the SIMD kernels (f32 lanes for the image path, f64 lanes
//! holding PIL's integer sums for the video path): the oracle the tests hold the new passes to,
//! bit for bit.

use rayon::prelude::*;

use super::axis::{image_axis, pil_bicubic_axis, Axis, PIL_PRECISION_BITS};
use super::{normalisation, worker_threads, MEAN, STD};
use crate::image::{ImageView, PixelFormat};

/// A value of a resampled row: f32 (the image path) or f64 (PIL's fixed point: integer weights
/// times bytes, whose sums f64 holds exactly, so the integer arithmetic is PIL's bit for bit while
/// the lanes vectorise).
trait Lane:
    Copy + Default + Send + Sync + std::ops::Add<Output = Self> + std::ops::Mul<Output = Self> + 'static
{
    fn from_byte(v: u8) -> Self;

    /// `start + Σ w[j] · window[j·stride + k]` in each lane `k` of four, tap by tap in order.
    /// `window` holds at least `(N − 1)·stride + 4` values.
    #[inline(always)]
    fn dot4<const N: usize>(
        start: Self,
        window: &[Self],
        stride: usize,
        w: &[Self; N],
    ) -> [Self; 4] {
        let mut sum = [start; 4];
        for j in 0..N {
            let (w, p) = (w[j], &window[j * stride..j * stride + 4]);
            sum = [
                sum[0] + w * p[0],
                sum[1] + w * p[1],
                sum[2] + w * p[2],
                sum[3] + w * p[3],
            ];
        }
        sum
    }
}

impl Lane for f32 {
    fn from_byte(v: u8) -> f32 {
        v as f32
    }

    /// One SSE2 multiply and add per tap (the compiler leaves the four lanes scalar otherwise);
    /// lane by lane the same IEEE operations in the same order, so the same bits.
    #[cfg(target_arch = "x86_64")]
    #[inline(always)]
    #[allow(unused_unsafe)] // the arithmetic intrinsics are safe from Rust 1.87 on, unsafe before
    fn dot4<const N: usize>(start: f32, window: &[f32], stride: usize, w: &[f32; N]) -> [f32; 4] {
        use std::arch::x86_64::*;
        assert!(window.len() >= (N - 1) * stride + 4);
        let mut out = [0.0f32; 4];
        // SAFETY: SSE2 is part of x86_64; each load reads the 4 floats from j·stride, within
        // `window` (asserted above), and the store writes the 4 of `out` (unaligned accesses).
        unsafe {
            let mut acc = _mm_set1_ps(start);
            for (j, &wj) in w.iter().enumerate() {
                let p = _mm_loadu_ps(window.as_ptr().add(j * stride));
                acc = _mm_add_ps(acc, _mm_mul_ps(_mm_set1_ps(wj), p));
            }
            _mm_storeu_ps(out.as_mut_ptr(), acc);
        }
        out
    }
}

impl Lane for f64 {
    fn from_byte(v: u8) -> f64 {
        v as f64
    }

    /// Two SSE2 multiply-adds per tap (lanes 0–1 and 2–3).
    #[cfg(target_arch = "x86_64")]
    #[inline(always)]
    #[allow(unused_unsafe)] // as for f32
    fn dot4<const N: usize>(start: f64, window: &[f64], stride: usize, w: &[f64; N]) -> [f64; 4] {
        use std::arch::x86_64::*;
        assert!(window.len() >= (N - 1) * stride + 4);
        let mut out = [0.0f64; 4];
        // SAFETY: SSE2 is part of x86_64; the loads read the 4 doubles from j·stride, within
        // `window` (asserted above), and the stores write the 4 of `out` (unaligned accesses).
        unsafe {
            let (mut lo, mut hi) = (_mm_set1_pd(start), _mm_set1_pd(start));
            for (j, &wj) in w.iter().enumerate() {
                let wj = _mm_set1_pd(wj);
                let p = window.as_ptr().add(j * stride);
                lo = _mm_add_pd(lo, _mm_mul_pd(wj, _mm_loadu_pd(p)));
                hi = _mm_add_pd(hi, _mm_mul_pd(wj, _mm_loadu_pd(p.add(2))));
            }
            _mm_storeu_pd(out.as_mut_ptr(), lo);
            _mm_storeu_pd(out[2..].as_mut_ptr(), hi);
        }
        out
    }
}

/// One of the two resizes: the sums' start, what a horizontal sum becomes in the cache, and how
/// cached rows blend into an output row.
trait Resize: Sync {
    type L: Lane;
    /// Where every horizontal sum starts.
    const START: Self::L;
    /// A horizontal sum → the value cached for the vertical pass.
    fn finish(sum: Self::L) -> Self::L;
    /// Blends channel `c` of the cached rows `cache[slots[j]]` (tap `j`, weight `weights[j]`) into
    /// `dst`, normalised.
    fn vertical(
        &self,
        cache: &[Vec<Self::L>],
        slots: &[usize],
        weights: &[Self::L],
        c: usize,
        dst: &mut [f32],
    );
}

/// Source row `row` converted to `L` value by value (its own channel order), followed by `pad`
/// copies of the last pixel (what windows reaching past the end read) and 3 spare values, so that
/// four lanes can be read from any pixel of a window.
fn widen_row<L: Lane>(image: &ImageView<'_>, row: usize, pad: usize, out: &mut Vec<L>) {
    let channels = image.format.channels();
    let start = row * image.stride;
    let src = &image.data[start..start + image.width * channels];
    let n = src.len();
    out.resize(n + pad * channels + 3, L::default());
    for (o, &v) in out.iter_mut().zip(src) {
        *o = L::from_byte(v);
    }
    for p in 0..pad * channels {
        out[n + p] = out[n - channels + p % channels];
    }
}

/// The horizontal pass with `N` taps per output (`N` known at compile time, so the tap loop
/// unrolls into one four-lane multiply-add per tap, the lanes a pixel's channels). Each output's
/// sums start at `R::START` and add `weight · value` tap by tap, in order.
fn horizontal_n<R: Resize, const N: usize>(
    wide: &[R::L],
    channels: usize,
    [ro, go, bo]: [usize; 3],
    axis: &Axis<R::L>,
    out: &mut [R::L],
) {
    let width = axis.len();
    let (r, rest) = out.split_at_mut(width);
    let (g, b) = rest.split_at_mut(width);
    for ((((&first, w), r), g), b) in axis
        .first
        .iter()
        .zip(axis.weight.chunks_exact(N))
        .zip(r)
        .zip(g)
        .zip(b)
    {
        let at = first * channels;
        let window = &wide[at..at + (N - 1) * channels + 4];
        let w: &[R::L; N] = w.try_into().expect("N weights");
        let sum = R::L::dot4(R::START, window, channels, w);
        *r = R::finish(sum[ro]);
        *g = R::finish(sum[go]);
        *b = R::finish(sum[bo]);
    }
}

/// [`horizontal_n`] for any number of taps.
fn horizontal_any<R: Resize>(
    wide: &[R::L],
    channels: usize,
    offsets: [usize; 3],
    axis: &Axis<R::L>,
    out: &mut [R::L],
) {
    let (n, width) = (axis.taps, axis.len());
    for (x, (&first, w)) in axis
        .first
        .iter()
        .zip(axis.weight.chunks_exact(n))
        .enumerate()
    {
        for (c, &off) in offsets.iter().enumerate() {
            let mut sum = R::START;
            for (j, &w) in w.iter().enumerate() {
                sum = sum + w * wide[(first + j) * channels + off];
            }
            out[c * width + x] = R::finish(sum);
        }
    }
}

/// Resamples the widened source row `wide` horizontally into `out` (planes R, G, B).
fn horizontal<R: Resize>(wide: &[R::L], format: PixelFormat, axis: &Axis<R::L>, out: &mut [R::L]) {
    let (ch, off) = (format.channels(), format.rgb_offsets());
    match axis.taps {
        1 => horizontal_n::<R, 1>(wide, ch, off, axis, out),
        2 => horizontal_n::<R, 2>(wide, ch, off, axis, out),
        3 => horizontal_n::<R, 3>(wide, ch, off, axis, out),
        4 => horizontal_n::<R, 4>(wide, ch, off, axis, out),
        5 => horizontal_n::<R, 5>(wide, ch, off, axis, out),
        6 => horizontal_n::<R, 6>(wide, ch, off, axis, out),
        7 => horizontal_n::<R, 7>(wide, ch, off, axis, out),
        8 => horizontal_n::<R, 8>(wide, ch, off, axis, out),
        9 => horizontal_n::<R, 9>(wide, ch, off, axis, out),
        _ => horizontal_any::<R>(wide, ch, off, axis, out),
    }
}

/// PIL's `clip8`: a fixed-point sum (its rounding half-unit included) back to 8 bits. The sum is
/// an integer, held exactly by the f64.
#[inline(always)]
fn clip8(sum: f64) -> u8 {
    ((sum as i32) >> PIL_PRECISION_BITS).clamp(0, 255) as u8
}

/// The image path: float taps, normalised by `v · scale + bias`.
struct TorchvisionResize {
    scale: [f32; 3],
    bias: [f32; 3],
}

impl Resize for TorchvisionResize {
    type L = f32;
    // −0.0 is the identity of float addition (−0 + x is x bit for bit), so with two taps the
    // arithmetic is the reference client's `w0·a + w1·b`.
    const START: f32 = -0.0;

    fn finish(sum: f32) -> f32 {
        sum
    }

    fn vertical(
        &self,
        cache: &[Vec<f32>],
        slots: &[usize],
        weights: &[f32],
        c: usize,
        dst: &mut [f32],
    ) {
        // Tap by tap over the whole row (contiguous, so each pass vectorises); the sum's order is
        // the reference client's.
        let n = dst.len();
        let row = |j: usize| &cache[slots[j]][c * n..(c + 1) * n];
        for (d, &h) in dst.iter_mut().zip(row(0)) {
            *d = weights[0] * h;
        }
        for (j, &w) in weights.iter().enumerate().skip(1) {
            for (d, &h) in dst.iter_mut().zip(row(j)) {
                *d += w * h;
            }
        }
        let (s, b) = (self.scale[c], self.bias[c]);
        for d in dst.iter_mut() {
            *d = *d * s + b;
        }
    }
}

/// The video path: PIL's integer passes, then Meta's float32 normalisation of the 8-bit result,
/// looked up per channel and value.
struct PilResize {
    normalised: [[f32; 256]; 3],
}

impl PilResize {
    fn new() -> PilResize {
        // `init_state`'s loader: `uint8 / 255.0` in float64, stored as float32, then `-= mean` and
        // `/= std` on float32 tensors.
        PilResize {
            normalised: std::array::from_fn(|c| {
                std::array::from_fn(|v| {
                    ((v as f64 / 255.0) as f32 - MEAN[c] as f32) / STD[c] as f32
                })
            }),
        }
    }
}

impl Resize for PilResize {
    type L = f64;
    // Pillow starts each sum at half a unit, so the shift rounds.
    const START: f64 = (1 << (PIL_PRECISION_BITS - 1)) as f64;

    fn finish(sum: f64) -> f64 {
        clip8(sum) as f64
    }

    fn vertical(
        &self,
        cache: &[Vec<f64>],
        slots: &[usize],
        weights: &[f64],
        c: usize,
        dst: &mut [f32],
    ) {
        // Integer sums of the 8-bit values of the horizontal pass times the weights (exact), in
        // chunks that stay in L1.
        const CHUNK: usize = 256;
        let mut sum = [0.0f64; CHUNK];
        let lut = &self.normalised[c];
        let n = dst.len();
        for (k, dst) in dst.chunks_mut(CHUNK).enumerate() {
            let sum = &mut sum[..dst.len()];
            sum.fill(Self::START);
            for (&slot, &w) in slots.iter().zip(weights) {
                let at = c * n + k * CHUNK;
                let row = &cache[slot][at..at + dst.len()];
                for (s, &v) in sum.iter_mut().zip(row) {
                    *s += w * v;
                }
            }
            for (d, &s) in dst.iter_mut().zip(sum.iter()) {
                *d = lut[clip8(s) as usize];
            }
        }
    }
}

/// Writes the normalised NCHW tensor (`3 × size × size`, planes R, G, B) of `image` into `out`,
/// resized as `SAM2ImagePredictor` resizes (torchvision's antialiased bilinear `Resize`).
pub(super) fn preprocess_into(image: &ImageView<'_>, size: usize, out: &mut [f32]) {
    let (scale, bias) = normalisation();
    let xa = image_axis(image.width, size);
    let ya = image_axis(image.height, size);
    resize_into(
        image,
        &TorchvisionResize { scale, bias },
        &xa,
        &ya,
        size,
        out,
    );
}

/// Writes the normalised NCHW tensor of a video frame into `out`, resized and normalised as
/// `SAM2VideoPredictor.init_state` loads frames (PIL's bicubic resize of the 8-bit RGB frame).
pub(super) fn preprocess_video_frame_into(image: &ImageView<'_>, size: usize, out: &mut [f32]) {
    let xa = pil_bicubic_axis(image.width, size);
    let ya = pil_bicubic_axis(image.height, size);
    resize_into(image, &PilResize::new(), &xa, &ya, size, out);
}

fn resize_into<R: Resize>(
    image: &ImageView<'_>,
    resize: &R,
    xa: &Axis<R::L>,
    ya: &Axis<R::L>,
    size: usize,
    out: &mut [f32],
) {
    assert_eq!(
        out.len(),
        3 * size * size,
        "output must hold 3 planes of size²"
    );
    assert_eq!((xa.len(), ya.len()), (size, size));
    let plane = size * size;
    let (r_plane, rest) = out.split_at_mut(plane);
    let (g_plane, b_plane) = rest.split_at_mut(plane);

    // Bands of output rows, one per worker of the persistent pool (no thread is started per call).
    let threads = worker_threads().min(size);
    let band = size.div_ceil(threads);
    let chunk = band * size;
    r_plane
        .par_chunks_mut(chunk)
        .zip(g_plane.par_chunks_mut(chunk))
        .zip(b_plane.par_chunks_mut(chunk))
        .enumerate()
        .for_each(|(i, ((r, g), b))| resize_band(image, resize, xa, ya, size, i * band, [r, g, b]));
}

/// Output rows `first_row..` (as many as `planes` hold) of the three planes.
fn resize_band<R: Resize>(
    image: &ImageView<'_>,
    resize: &R,
    xa: &Axis<R::L>,
    ya: &Axis<R::L>,
    size: usize,
    first_row: usize,
    planes: [&mut [f32]; 3],
) {
    let rows = planes[0].len() / size;
    let taps = ya.taps;
    // Horizontally resampled source rows, one slot per tap, and which source row each holds. A
    // row already held is never resampled again; the source rows of successive output rows never
    // go back, so a slot whose row the current output does not read is free.
    let mut cache = vec![vec![R::L::default(); 3 * size]; taps];
    let mut held = vec![usize::MAX; taps];
    let mut slot_of = vec![0usize; taps];
    let mut wanted = vec![0usize; taps];
    let mut wide = Vec::with_capacity((image.width + xa.taps) * image.format.channels() + 3);
    let [pr, pg, pb] = planes;
    for row in 0..rows {
        let y = first_row + row;
        // Taps past the last row read the last row (with weight zero, or as the edge clamp).
        for (j, w) in wanted.iter_mut().enumerate() {
            *w = (ya.first[y] + j).min(image.height - 1);
        }
        for j in 0..taps {
            let src_row = wanted[j];
            slot_of[j] = match held.iter().position(|&h| h == src_row) {
                Some(slot) => slot,
                None => {
                    let slot = held
                        .iter()
                        .position(|h| !wanted.contains(h))
                        .expect("one slot per tap: one is free");
                    widen_row(image, src_row, xa.taps, &mut wide);
                    horizontal::<R>(&wide, image.format, xa, &mut cache[slot]);
                    held[slot] = src_row;
                    slot
                }
            };
        }
        let weights = &ya.weight[y * taps..(y + 1) * taps];
        for (c, plane) in [&mut *pr, &mut *pg, &mut *pb].into_iter().enumerate() {
            let dst = &mut plane[row * size..(row + 1) * size];
            resize.vertical(&cache, &slot_of, weights, c, dst);
        }
    }
}
