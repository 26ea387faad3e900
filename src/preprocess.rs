//! Host pixels → the encoder's input tensor, in one fused pass per output row: the resize to the
//! model's square input (stretch), channel reorder to RGB, ImageNet normalisation and NCHW layout.
//!
//! Two resizes, each the one Meta's predictors apply, so the tensor the encoder sees is the one
//! PyTorch SAM2 feeds its own encoder (docs/models.md, "Preprocessing"):
//!
//! - images ([`preprocess_into`]): `SAM2ImagePredictor`'s transforms, torchvision's `Resize` on
//!   the float image. Along an axis that shrinks that is an antialiased bilinear resize (ATen's
//!   `_upsample_bilinear2d_aa`: a triangle filter whose support is scaled by the shrink factor,
//!   weights normalised per output pixel, half-pixel centres); along an axis that grows or keeps
//!   its size it is plain bilinear with half-pixel centres and edge clamp, which the library
//!   computes in the arithmetic of the Python reference client
//!   (`tools/references/reference_check.py`) so the two give the same bits;
//! - video frames ([`preprocess_video_frame_into`]): `SAM2VideoPredictor.init_state`'s loader,
//!   PIL's `Image.resize((1024, 1024))` of the 8-bit frame (bicubic, a = −0.5, support scaled by
//!   the shrink factor, 22-bit fixed-point weights, rounding and clipping to 8 bits after each of
//!   its two passes), then `/ 255`, `− mean`, `/ std` in float32: bit for bit what Meta computes.
//!
//! Both are separable: per axis, a table of source taps and weights is computed once per image
//! size ([`Axis`]); each source row a band of output rows needs is resampled horizontally once
//! (all three channels, one pass over the interleaved pixels) into a small cache of rows, and
//! output rows blend cached rows over contiguous memory and are normalised as they are written.
//! Output rows are split into bands of [`BAND_ROWS`], which the calling thread and the library's
//! helper threads ([`helpers`], woken on the other CPUs) take in turn until none is left (see
//! [`resize_into`]). The inner loops are in [`kernels`] (SIMD, the same bits as plain loops); the
//! previous implementation stays in the tests as the oracle they are held to, bit for bit
//! (`preprocess/oracle.rs`).

use crate::image::ImageView;

pub(crate) mod helpers;
mod kernels;
#[cfg(test)]
mod oracle;

/// ImageNet mean and standard deviation, in [0, 1] units, RGB order.
pub(crate) const MEAN: [f64; 3] = [0.485, 0.456, 0.406];
pub(crate) const STD: [f64; 3] = [0.229, 0.224, 0.225];

/// `(v / 255 − mean) / std` as `v · scale + bias`: one multiply and one add per value instead of
/// two divisions. The constants are computed in f64 and rounded once to f32, as the reference
/// client does, so both give the same bits.
fn normalisation() -> ([f32; 3], [f32; 3]) {
    (
        std::array::from_fn(|c| (1.0 / (255.0 * STD[c])) as f32),
        std::array::from_fn(|c| (-MEAN[c] / STD[c]) as f32),
    )
}

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

/// Number of worker threads for per-image work.
pub(crate) fn worker_threads() -> usize {
    std::thread::available_parallelism()
        .map_or(1, |n| n.get())
        .min(8)
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
    fn identity(n: usize, one: W) -> Axis<W> {
        Axis {
            taps: 1,
            first: (0..n).collect(),
            weight: vec![one; n],
        }
    }

    /// An axis from each output's first source pixel and its weights; as many taps as the
    /// widest output needs.
    fn from_windows(windows: Vec<(usize, Vec<W>)>, zero: W) -> Self {
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
    fn len(&self) -> usize {
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
fn antialiased_bilinear_axis(src: usize, dst: usize) -> Axis<f32> {
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
const PIL_PRECISION_BITS: u32 = kernels::PIL_BITS;

/// PIL's bicubic filter (a = −0.5), in f64 as Pillow evaluates it.
fn pil_bicubic(x: f64) -> f64 {
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

/// One of the two resizes, as the banded pass drives it: a source row widened to `Wide` values,
/// resampled horizontally into a cached row of `Cached` values ([`kernels::LANES`] per output
/// pixel), cached rows blended into an output row of the three planes.
trait Resize: Sync {
    type Wide: Copy + Default + From<u8>;
    type Cached: Copy + Default + Send;
    /// The vertical axis: output row `y` reads the rows from `y_axis.first[y]`.
    fn y_first(&self, y: usize) -> usize;
    fn y_taps(&self) -> usize;
    /// Values a widened row holds (`channels` per pixel).
    fn wide_len(&self, channels: usize) -> usize;
    fn horizontal(&self, wide: &[Self::Wide], channels: usize, out: &mut [Self::Cached]);
    /// Output row `y` from the cached rows of its taps, in order.
    fn vertical(&self, rows: &[&[Self::Cached]], y: usize, planes: [&mut [f32]; 3]);
}

/// Source row `row` converted value by value (its own channel order) into `out`, `len` values:
/// the row, then copies of its last pixel (what windows reaching past the end read).
fn widen_row<W: Copy + From<u8>>(image: &ImageView<'_>, row: usize, len: usize, out: &mut Vec<W>) {
    let channels = image.format.channels();
    let start = row * image.stride;
    let src = &image.data[start..start + image.width * channels];
    let n = src.len();
    out.resize(len.max(n), W::from(0));
    for (o, &v) in out.iter_mut().zip(src) {
        *o = W::from(v);
    }
    for p in n..out.len() {
        out[p] = out[n - channels + (p - n) % channels];
    }
}

/// The image path: float taps, normalised by `v · scale + bias`.
struct TorchvisionResize {
    x: kernels::Horizontal<[f32; 4]>,
    y: Axis<f32>,
    output: kernels::FloatOutput,
}

impl TorchvisionResize {
    fn new(image: &ImageView<'_>, size: usize) -> TorchvisionResize {
        let (scale, bias) = normalisation();
        let xa = image_axis(image.width, size);
        TorchvisionResize {
            x: kernels::float_horizontal_table(xa.taps, &xa.first, &xa.weight),
            y: image_axis(image.height, size),
            output: kernels::FloatOutput {
                offsets: image.format.rgb_offsets(),
                scale,
                bias,
            },
        }
    }
}

impl Resize for TorchvisionResize {
    type Wide = f32;
    type Cached = f32;

    fn y_first(&self, y: usize) -> usize {
        self.y.first[y]
    }

    fn y_taps(&self) -> usize {
        self.y.taps
    }

    fn wide_len(&self, channels: usize) -> usize {
        self.x.wide_len(channels)
    }

    fn horizontal(&self, wide: &[f32], channels: usize, out: &mut [f32]) {
        kernels::float_horizontal(&self.x, wide, channels, out);
    }

    fn vertical(&self, rows: &[&[f32]], y: usize, planes: [&mut [f32]; 3]) {
        let weights = &self.y.weight[y * self.y.taps..(y + 1) * self.y.taps];
        kernels::float_vertical(rows, weights, &self.output, planes);
    }
}

/// Meta's float32 normalisation of an 8-bit value, per channel and value: `init_state`'s loader,
/// `uint8 / 255.0` in float64 stored as float32, then `-= mean` and `/= std` on float32 tensors.
fn meta_normalised() -> [[f32; 256]; 3] {
    std::array::from_fn(|c| {
        std::array::from_fn(|v| ((v as f64 / 255.0) as f32 - MEAN[c] as f32) / STD[c] as f32)
    })
}

/// [`meta_normalised`] for the kernels, with the mean and std its values come from.
fn meta_normalisation() -> kernels::Normalised {
    kernels::Normalised {
        table: meta_normalised(),
        mean: MEAN.map(|m| m as f32),
        std: STD.map(|s| s as f32),
    }
}

/// The video path: PIL's integer passes, then Meta's float32 normalisation of the 8-bit result,
/// per channel and value.
struct PilResize {
    x: kernels::Horizontal<[i16; 8]>,
    y: Axis<f64>,
    /// Each output row's vertical weights, split in pairs for the kernel.
    y_pairs: Vec<Vec<[[i16; 8]; 2]>>,
    offsets: [usize; 3],
    normalised: kernels::Normalised,
}

impl PilResize {
    fn new(image: &ImageView<'_>, size: usize) -> PilResize {
        let xa = pil_bicubic_axis(image.width, size);
        let ya = pil_bicubic_axis(image.height, size);
        let ints = |a: &Axis<f64>| a.weight.iter().map(|&w| w as i32).collect::<Vec<_>>();
        let y_ints = ints(&ya);
        PilResize {
            x: kernels::pil_horizontal_table(xa.taps, &xa.first, &ints(&xa)),
            y_pairs: y_ints
                .chunks_exact(ya.taps)
                .map(kernels::pil_vertical_pairs)
                .collect(),
            y: ya,
            offsets: image.format.rgb_offsets(),
            normalised: meta_normalisation(),
        }
    }
}

impl Resize for PilResize {
    type Wide = i16;
    type Cached = u8;

    fn y_first(&self, y: usize) -> usize {
        self.y.first[y]
    }

    fn y_taps(&self) -> usize {
        self.y.taps
    }

    fn wide_len(&self, channels: usize) -> usize {
        self.x.wide_len(channels)
    }

    fn horizontal(&self, wide: &[i16], channels: usize, out: &mut [u8]) {
        kernels::pil_horizontal(&self.x, wide, channels, out);
    }

    fn vertical(&self, rows: &[&[u8]], y: usize, planes: [&mut [f32]; 3]) {
        let pairs = &self.y_pairs[y];
        // An odd last tap pairs with a zero weight: any row will do as its partner.
        if rows.len() % 2 == 0 {
            kernels::pil_vertical(rows, pairs, self.offsets, &self.normalised, planes);
        } else if rows.len() < 32 {
            let mut paired = [rows[0]; 32];
            paired[..rows.len()].copy_from_slice(rows);
            let paired = &paired[..rows.len() + 1];
            kernels::pil_vertical(paired, pairs, self.offsets, &self.normalised, planes);
        } else {
            let paired: Vec<&[u8]> = rows.iter().chain(&rows[..1]).copied().collect();
            kernels::pil_vertical(&paired, pairs, self.offsets, &self.normalised, planes);
        }
    }
}

/// Writes the normalised NCHW tensor (`3 × size × size`, planes R, G, B) of `image` into `out`,
/// resized as `SAM2ImagePredictor` resizes (torchvision's antialiased bilinear `Resize`).
pub fn preprocess_into(image: &ImageView<'_>, size: usize, out: &mut [f32]) {
    resize_into(image, &TorchvisionResize::new(image, size), size, out);
}

/// Writes the normalised NCHW tensor of a video frame into `out`, resized and normalised as
/// `SAM2VideoPredictor.init_state` loads frames (PIL's bicubic resize of the 8-bit RGB frame).
pub fn preprocess_video_frame_into(image: &ImageView<'_>, size: usize, out: &mut [f32]) {
    resize_into(image, &PilResize::new(image, size), size, out);
}

/// Output rows per band. The calling thread starts on the first band at once, and a helper that
/// wakes later still finds bands to take; a band's first `taps − 1` source rows are
/// resampled again by the band that follows, a few percent of the horizontal work at 64 rows.
const BAND_ROWS: usize = 64;

fn resize_into<R: Resize>(image: &ImageView<'_>, resize: &R, size: usize, out: &mut [f32]) {
    assert_eq!(
        out.len(),
        3 * size * size,
        "output must hold 3 planes of size²"
    );
    let plane = size * size;
    let (r_plane, rest) = out.split_at_mut(plane);
    let (g_plane, b_plane) = rest.split_at_mut(plane);
    let chunk = BAND_ROWS * size;
    // Each band's rows of the three planes, taken once by whichever thread reaches it first: the
    // calling thread works too rather than waiting for a helper to wake (the helpers are
    // persistent threads; none is started per call).
    let bands: Vec<[&mut [f32]; 3]> = r_plane
        .chunks_mut(chunk)
        .zip(g_plane.chunks_mut(chunk))
        .zip(b_plane.chunks_mut(chunk))
        .map(|((r, g), b)| [r, g, b])
        .collect();
    helpers::take_in_turn(
        bands,
        worker_threads() - 1,
        || Scratch::new(image, resize, size),
        |i, planes, scratch| resize_band(image, resize, size, i * BAND_ROWS, planes, scratch),
    );
}

/// One thread's working rows for [`resize_band`], kept from band to band.
struct Scratch<R: Resize> {
    /// Horizontally resampled source rows, one slot per tap, and which source row each holds.
    cache: Vec<Vec<R::Cached>>,
    held: Vec<usize>,
    slot_of: Vec<usize>,
    wanted: Vec<usize>,
    /// The source row being resampled, widened to the kernels' type.
    wide: Vec<R::Wide>,
}

impl<R: Resize> Scratch<R> {
    fn new(image: &ImageView<'_>, resize: &R, size: usize) -> Self {
        let taps = resize.y_taps();
        let wide_len = resize.wide_len(image.format.channels());
        Scratch {
            cache: vec![vec![R::Cached::default(); kernels::LANES * size]; taps],
            held: vec![usize::MAX; taps],
            slot_of: vec![0; taps],
            wanted: vec![0; taps],
            wide: Vec::with_capacity(wide_len.max(image.width * image.format.channels())),
        }
    }
}

/// Output rows `first_row..` (as many as `planes` hold) of the three planes.
fn resize_band<R: Resize>(
    image: &ImageView<'_>,
    resize: &R,
    size: usize,
    first_row: usize,
    planes: [&mut [f32]; 3],
    scratch: &mut Scratch<R>,
) {
    let rows = planes[0].len() / size;
    let taps = resize.y_taps();
    let channels = image.format.channels();
    // A row already held is never resampled again; the source rows of successive output rows
    // never go back, so a slot whose row the current output does not read is free. What the
    // slots hold from another band is not reused (bands need not be taken in order).
    let Scratch {
        cache,
        held,
        slot_of,
        wanted,
        wide,
    } = scratch;
    held.fill(usize::MAX);
    let wide_len = resize.wide_len(channels);
    let [pr, pg, pb] = planes;
    for row in 0..rows {
        let y = first_row + row;
        // Taps past the last row read the last row (with weight zero, or as the edge clamp).
        for (j, w) in wanted.iter_mut().enumerate() {
            *w = (resize.y_first(y) + j).min(image.height - 1);
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
                    widen_row(image, src_row, wide_len, wide);
                    resize.horizontal(wide, channels, &mut cache[slot]);
                    held[slot] = src_row;
                    slot
                }
            };
        }
        // The tap rows by reference, on the stack unless there are many.
        let mut fixed: [&[R::Cached]; 32];
        let spill: Vec<&[R::Cached]>;
        let tap_rows: &[&[R::Cached]] = if taps <= 32 {
            fixed = [&[]; 32];
            for (t, &s) in fixed.iter_mut().zip(slot_of.iter()) {
                *t = &cache[s];
            }
            &fixed[..taps]
        } else {
            spill = slot_of.iter().map(|&s| &cache[s][..]).collect();
            &spill
        };
        let at = row * size..(row + 1) * size;
        resize.vertical(
            tap_rows,
            y,
            [&mut pr[at.clone()], &mut pg[at.clone()], &mut pb[at]],
        );
    }
}

/// The normalised tensor as a new buffer (the image path).
pub fn preprocess(image: &ImageView<'_>, size: usize) -> Vec<f32> {
    let mut out = vec![0.0f32; 3 * size * size];
    preprocess_into(image, size, &mut out);
    out
}

/// The normalised tensor of a video frame as a new buffer (the tracker writes into a buffer it
/// keeps: [`preprocess_video_frame_into`]).
#[cfg(any(test, feature = "test-support"))]
pub fn preprocess_video_frame(image: &ImageView<'_>, size: usize) -> Vec<f32> {
    let mut out = vec![0.0f32; 3 * size * size];
    preprocess_video_frame_into(image, size, &mut out);
    out
}

/// IEEE 754 binary32 → binary16 bits, rounding to nearest even (what `numpy.astype(float16)` does).
pub fn f32_to_f16_bits(value: f32) -> u16 {
    let bits = value.to_bits();
    let sign = ((bits >> 16) & 0x8000) as u16;
    let exp = ((bits >> 23) & 0xff) as i32;
    let mant = bits & 0x007f_ffff;
    if exp == 0xff {
        // Inf or NaN (keep NaN quiet).
        return sign | 0x7c00 | if mant != 0 { 0x0200 } else { 0 };
    }
    let e = exp - 127 + 15;
    if e >= 0x1f {
        return sign | 0x7c00;
    }
    if e <= 0 {
        if e < -10 {
            return sign;
        }
        let m = mant | 0x0080_0000;
        let shift = (14 - e) as u32;
        let half = 1u32 << (shift - 1);
        let rest = m & ((1u32 << shift) - 1);
        let mut h = (m >> shift) as u16;
        if rest > half || (rest == half && (h & 1) == 1) {
            h += 1;
        }
        return sign | h;
    }
    let mut h = ((e as u32) << 10 | (mant >> 13)) as u16;
    let rest = mant & 0x1fff;
    if rest > 0x1000 || (rest == 0x1000 && (h & 1) == 1) {
        h += 1; // may carry into the exponent, which is the correct rounding
    }
    sign | h
}

/// binary16 bits → f32 (the inverse the unit tests check the conversion against).
#[cfg(test)]
fn f16_bits_to_f32(h: u16) -> f32 {
    let sign = ((h & 0x8000) as u32) << 16;
    let exp = ((h >> 10) & 0x1f) as u32;
    let mant = (h & 0x03ff) as u32;
    let bits = match (exp, mant) {
        (0, 0) => sign,
        (0, m) => {
            // subnormal: normalise
            let mut e: i32 = -14;
            let mut m = m;
            while m & 0x0400 == 0 {
                m <<= 1;
                e -= 1;
            }
            sign | (((e + 127) as u32) << 23) | ((m & 0x03ff) << 13)
        }
        (0x1f, 0) => sign | 0x7f80_0000,
        (0x1f, m) => sign | 0x7f80_0000 | (m << 13),
        (e, m) => sign | ((e + 127 - 15) << 23) | (m << 13),
    };
    f32::from_bits(bits)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::image::PixelFormat;

    #[test]
    fn f16_round_trip_matches_known_values() {
        for (v, bits) in [
            (0.0f32, 0u16),
            (1.0, 0x3c00),
            (-2.0, 0xc000),
            (65504.0, 0x7bff),
            (1e-8, 0),
            (0.1, 0x2e66),
        ] {
            assert_eq!(f32_to_f16_bits(v), bits, "{v}");
        }
        for h in [0x3c00u16, 0x2e66, 0x0001, 0x03ff, 0x7bff, 0xfbff] {
            assert_eq!(f32_to_f16_bits(f16_bits_to_f32(h)), h);
        }
        assert_eq!(f32_to_f16_bits(1e6), 0x7c00);
    }

    /// A deterministic test image: `(w, h)` pixels of `format`, `pad` spare bytes per row.
    fn pattern(w: usize, h: usize, format: PixelFormat, pad: usize) -> (Vec<u8>, usize) {
        let stride = w * format.channels() + pad;
        (
            (0..stride * h).map(|i| (i * 7919 % 251) as u8).collect(),
            stride,
        )
    }

    fn max_abs_diff(a: &[f32], b: &[f32]) -> f32 {
        a.iter()
            .zip(b)
            .map(|(x, y)| (x - y).abs())
            .fold(0.0, f32::max)
    }

    #[test]
    fn constant_images_stay_constant_through_both_resizes() {
        let px = [200u8, 100, 50];
        let normalised = meta_normalised();
        // Shrinking, growing, mixed and equal sizes, along both axes.
        for (w, h, size) in [
            (7, 5, 16),
            (300, 200, 64),
            (40, 300, 64),
            (64, 64, 64),
            (1, 1, 8),
        ] {
            let data: Vec<u8> = px.iter().copied().cycle().take(w * h * 3).collect();
            let img = ImageView::packed(&data, w, h, PixelFormat::Rgb).unwrap();
            let image = preprocess(&img, size);
            let video = preprocess_video_frame(&img, size);
            let plane = size * size;
            for c in 0..3 {
                let want = ((px[c] as f64 / 255.0 - MEAN[c]) / STD[c]) as f32;
                for v in &image[c * plane..(c + 1) * plane] {
                    assert!((v - want).abs() < 1e-5, "{w}×{h} → {size}: {v} vs {want}");
                }
                // PIL's fixed point gives the byte back, and the normalisation is Meta's bits.
                let want = normalised[c][px[c] as usize];
                assert!(
                    video[c * plane..(c + 1) * plane]
                        .iter()
                        .all(|v| v.to_bits() == want.to_bits()),
                    "{w}×{h} → {size}, channel {c}"
                );
            }
        }
    }

    #[test]
    fn equal_size_is_a_copy_normalised() {
        let (data, stride) = pattern(24, 24, PixelFormat::Bgr, 2);
        let img = ImageView::new(&data, 24, 24, stride, PixelFormat::Bgr).unwrap();
        let (scale, bias) = normalisation();
        let normalised = meta_normalised();
        let (image, video) = (preprocess(&img, 24), preprocess_video_frame(&img, 24));
        for c in 0..3 {
            for y in 0..24 {
                for x in 0..24 {
                    let v = data[y * stride + x * 3 + (2 - c)];
                    let at = c * 576 + y * 24 + x;
                    assert_eq!(
                        image[at].to_bits(),
                        (v as f32 * scale[c] + bias[c]).to_bits()
                    );
                    assert_eq!(video[at].to_bits(), normalised[c][v as usize].to_bits());
                }
            }
        }
    }

    #[test]
    fn float_weights_sum_to_one_and_integer_weights_to_the_fixed_point_unit() {
        let unit = (1i64 << PIL_PRECISION_BITS) as f64;
        for (src, dst) in [
            (1920, 1024),
            (1080, 1024),
            (4000, 1024),
            (640, 1024),
            (480, 1024),
            (3, 1024),
            (1025, 1024),
            (5, 2),
        ] {
            let a = image_axis(src, dst);
            let p = pil_bicubic_axis(src, dst);
            for w in a.weight.chunks_exact(a.taps) {
                let sum: f32 = w.iter().sum();
                assert!((sum - 1.0).abs() < 1e-5, "image {src} → {dst}: {sum}");
                assert!(w.iter().all(|&v| v >= 0.0), "image {src} → {dst}: {w:?}");
            }
            for w in p.weight.chunks_exact(p.taps) {
                // Each weight is rounded once: the sum is off by at most half a unit per tap.
                let sum: i64 = w.iter().map(|&v| v as i64).sum();
                assert!(
                    ((sum as f64) - unit).abs() <= p.taps as f64 / 2.0,
                    "pil {src} → {dst}: {sum}"
                );
            }
            assert!(a.first.iter().chain(&p.first).all(|&i| i < src));
        }
    }

    #[test]
    fn antialiasing_widens_the_filter_by_the_shrink_factor() {
        // Shrinking 4 → 2 (factor 2): the triangle spans two source pixels on each side of the
        // output's centre (1 and 3). Output 0 reads pixels 0, 1, 2 at distances 0.5, 0.5, 1.5
        // (in units of 2 source pixels: 0.25, 0.25, 0.75): weights 0.75, 0.75, 0.25 over their
        // sum 1.75, i.e. 3/7, 3/7, 1/7; output 1 mirrors it.
        let a = antialiased_bilinear_axis(4, 2);
        assert_eq!(a.taps, 3);
        let expect: [(usize, [f32; 3]); 2] = [
            (0, [3.0 / 7.0, 3.0 / 7.0, 1.0 / 7.0]),
            (1, [1.0 / 7.0, 3.0 / 7.0, 3.0 / 7.0]),
        ];
        for (i, (first, w)) in expect.iter().enumerate() {
            let wt = &a.weight[i * 3..i * 3 + 3];
            assert_eq!(a.first[i], *first);
            for j in 0..3 {
                assert!((wt[j] - w[j]).abs() < 1e-7, "{wt:?}");
            }
        }
        // A 4 → 2 row [0, 70, 140, 210]: antialiased 50 and 160, where plain bilinear (the
        // midpoints) gives 35 and 175.
        let data: Vec<u8> = [0u8, 70, 140, 210]
            .iter()
            .flat_map(|&v| [v, v, v])
            .collect();
        let img = ImageView::packed(&data, 4, 1, PixelFormat::Rgb).unwrap();
        let (scale, bias) = normalisation();
        let out = preprocess(&img, 2);
        for (got, want) in out[..2].iter().zip([50.0f32, 160.0]) {
            let v = (got - bias[0]) / scale[0];
            assert!((v - want).abs() < 1e-3, "{v} vs {want}");
        }
        // Growing keeps the two-tap bilinear of the reference client.
        assert_eq!(image_axis(2, 4).taps, 2);
    }

    #[test]
    fn pil_bicubic_filter_and_axis() {
        // Keys' cubic with a = −0.5 at its knots and half-way points.
        for (x, want) in [
            (0.0, 1.0),
            (0.5, 0.5625),
            (1.0, 0.0),
            (1.5, -0.0625),
            (2.0, 0.0),
            (-0.5, 0.5625),
            (2.5, 0.0),
        ] {
            assert_eq!(pil_bicubic(x), want, "{x}");
        }
        // Growing 2 → 4 (filter support 2 source pixels): output 1's centre is at 0.75, so it
        // reads pixel 0 at distance 0.25 and pixel 1 at 0.75 (pixel −1 lies outside): weights
        // 0.8671875 and 0.2265625, normalised by their sum and scaled by 2²².
        let p = pil_bicubic_axis(2, 4);
        let (w0, w1) = (0.8671875f64, 0.2265625f64);
        let unit = (1 << PIL_PRECISION_BITS) as f64;
        let want = [
            (w0 / (w0 + w1) * unit + 0.5) as i32 as f64,
            (w1 / (w0 + w1) * unit + 0.5) as i32 as f64,
        ];
        assert_eq!(p.first[1], 0);
        assert_eq!(&p.weight[p.taps..p.taps + 2], &want);
        // Shrinking by 3 widens the support to 6 source pixels on each side: 12 taps.
        assert_eq!(pil_bicubic_axis(3000, 1000).taps, 12);
        // Overshoot is clipped to 8 bits: a hard edge grown 4× stays within 0..=255.
        let data: Vec<u8> = [0u8, 0, 255, 255].iter().flat_map(|&v| [v, v, v]).collect();
        let img = ImageView::packed(&data, 4, 1, PixelFormat::Rgb).unwrap();
        let normalised = meta_normalised();
        let out = preprocess_video_frame(&img, 16);
        let bytes: Vec<usize> = out[..16]
            .iter()
            .map(|v| {
                normalised[0]
                    .iter()
                    .position(|n| n == v)
                    .expect("a byte's value")
            })
            .collect();
        assert_eq!((bytes[0], bytes[15]), (0, 255));
        assert!(bytes.windows(2).all(|w| w[0] <= w[1]), "{bytes:?}");
    }

    /// The resize computed pixel by pixel from the axes: every output the sum over its vertical
    /// taps of the sums over its horizontal taps (in the banded pass's order and arithmetic).
    fn direct<L: Copy>(
        image: &ImageView<'_>,
        xa: &Axis<L>,
        ya: &Axis<L>,
        size: usize,
        pixel: impl Fn(u8, L) -> L,
        vertical: impl Fn(&[L], &[L], usize) -> f32,
        horizontal_finish: impl Fn(&[L]) -> L,
    ) -> Vec<f32> {
        let ch = image.format.channels();
        let offsets = image.format.rgb_offsets();
        let mut out = vec![0.0f32; 3 * size * size];
        for c in 0..3 {
            for y in 0..size {
                for x in 0..size {
                    let rows: Vec<L> = (0..ya.taps)
                        .map(|i| {
                            let sy = (ya.first[y] + i).min(image.height - 1);
                            let terms: Vec<L> = (0..xa.taps)
                                .map(|j| {
                                    let sx = (xa.first[x] + j).min(image.width - 1);
                                    pixel(
                                        image.data[sy * image.stride + sx * ch + offsets[c]],
                                        xa.weight[x * xa.taps + j],
                                    )
                                })
                                .collect();
                            horizontal_finish(&terms)
                        })
                        .collect();
                    out[c * size * size + y * size + x] =
                        vertical(&rows, &ya.weight[y * ya.taps..(y + 1) * ya.taps], c);
                }
            }
        }
        out
    }

    /// PIL's two passes pixel by pixel in integers (i64), from the axes' weights.
    fn direct_pil_integer(
        image: &ImageView<'_>,
        xa: &Axis<f64>,
        ya: &Axis<f64>,
        size: usize,
        normalised: &[[f32; 256]; 3],
    ) -> Vec<f32> {
        let (ch, offsets) = (image.format.channels(), image.format.rgb_offsets());
        let half = 1i64 << (PIL_PRECISION_BITS - 1);
        let clip = |s: i64| (s >> PIL_PRECISION_BITS).clamp(0, 255);
        let mut out = vec![0.0f32; 3 * size * size];
        for c in 0..3 {
            for y in 0..size {
                for x in 0..size {
                    let mut vertical = half;
                    for i in 0..ya.taps {
                        let sy = (ya.first[y] + i).min(image.height - 1);
                        let mut horizontal = half;
                        for j in 0..xa.taps {
                            let sx = (xa.first[x] + j).min(image.width - 1);
                            let v = image.data[sy * image.stride + sx * ch + offsets[c]] as i64;
                            horizontal += v * xa.weight[x * xa.taps + j] as i64;
                        }
                        vertical += clip(horizontal) * ya.weight[y * ya.taps + i] as i64;
                    }
                    out[c * size * size + y * size + x] = normalised[c][clip(vertical) as usize];
                }
            }
        }
        out
    }

    #[test]
    fn the_banded_passes_are_bit_identical_to_the_direct_sums() {
        let (scale, bias) = normalisation();
        let normalised = meta_normalised();
        for (w, h, format, pad) in [
            (37, 23, PixelFormat::Rgb, 0),
            (150, 91, PixelFormat::Bgra, 5),
            (64, 200, PixelFormat::Gray, 3),
            (300, 41, PixelFormat::Rgba, 1),
            (1, 1, PixelFormat::Rgba, 0),
        ] {
            let (data, stride) = pattern(w, h, format, pad);
            let image = ImageView::new(&data, w, h, stride, format).unwrap();
            for size in [16, 64, 97] {
                let (xa, ya) = (image_axis(w, size), image_axis(h, size));
                let slow = direct::<f32>(
                    &image,
                    &xa,
                    &ya,
                    size,
                    |v, w| w * v as f32,
                    |rows, wy, c| {
                        let v = rows
                            .iter()
                            .zip(wy)
                            .skip(1)
                            .fold(wy[0] * rows[0], |s, (r, w)| s + w * r);
                        v * scale[c] + bias[c]
                    },
                    |terms| terms.iter().fold(-0.0f32, |s, t| s + t),
                );
                let fast = preprocess(&image, size);
                assert!(
                    fast.iter()
                        .zip(&slow)
                        .all(|(a, b)| a.to_bits() == b.to_bits()),
                    "image path {w}×{h} {format:?} → {size}: max diff {}",
                    max_abs_diff(&fast, &slow)
                );
                let (xa, ya) = (pil_bicubic_axis(w, size), pil_bicubic_axis(h, size));
                let slow = direct_pil_integer(&image, &xa, &ya, size, &normalised);
                let fast = preprocess_video_frame(&image, size);
                assert!(
                    fast.iter()
                        .zip(&slow)
                        .all(|(a, b)| a.to_bits() == b.to_bits()),
                    "video path {w}×{h} {format:?} → {size}: max diff {}",
                    max_abs_diff(&fast, &slow)
                );
            }
        }
    }

    #[test]
    fn the_passes_are_bit_identical_to_the_previous_implementation() {
        // The camera sizes the benchmark measures, shrinking and growing to 1024, then odd sizes,
        // every pixel format, padded strides, one-pixel images, extreme shrink factors (windows of
        // more taps than the kernels unroll) and sizes that leave a tail of fewer than 4 pixels.
        let mut cases = vec![
            (1920, 1080, PixelFormat::Rgb, 0, 1024),
            (1080, 1920, PixelFormat::Bgr, 0, 1024),
            (640, 480, PixelFormat::Rgba, 0, 1024),
        ];
        for (w, h, format, pad) in [
            (37, 23, PixelFormat::Bgra, 3),
            (1025, 999, PixelFormat::Rgb, 1),
            (3, 5, PixelFormat::Gray, 0),
            (1, 1, PixelFormat::Rgb, 0),
            (2000, 7, PixelFormat::Bgr, 2),
            (9, 1500, PixelFormat::Rgba, 0),
        ] {
            for size in [1, 6, 97, 130] {
                cases.push((w, h, format, pad, size));
            }
        }
        // Where AVX2 is present, its kernels and then the SSE2 ones alone.
        let sse2_only = &kernels::tests::SSE2_ONLY;
        let kernel_sets = cases.iter().flat_map(|&c| [(c, false), (c, true)]);
        for ((w, h, format, pad, size), sse2) in kernel_sets {
            sse2_only.store(sse2, std::sync::atomic::Ordering::Relaxed);
            let (data, stride) = pattern(w, h, format, pad);
            let image = ImageView::new(&data, w, h, stride, format).unwrap();
            let mut want = vec![f32::NAN; 3 * size * size];
            oracle::preprocess_into(&image, size, &mut want);
            let got = preprocess(&image, size);
            assert!(
                got.iter()
                    .zip(&want)
                    .all(|(a, b)| a.to_bits() == b.to_bits()),
                "image path {w}×{h} {format:?} → {size} (SSE2 only: {sse2}): max diff {}",
                max_abs_diff(&got, &want)
            );
            oracle::preprocess_video_frame_into(&image, size, &mut want);
            let got = preprocess_video_frame(&image, size);
            assert!(
                got.iter()
                    .zip(&want)
                    .all(|(a, b)| a.to_bits() == b.to_bits()),
                "video path {w}×{h} {format:?} → {size} (SSE2 only: {sse2}): max diff {}",
                max_abs_diff(&got, &want)
            );
        }
        sse2_only.store(false, std::sync::atomic::Ordering::Relaxed);
    }

    #[test]
    fn the_video_normalisation_is_computed_as_the_table_gives_it() {
        // The AVX2 kernel computes Meta's normalisation (a reciprocal and a fused correction per
        // quotient) rather than looking it up: it must give the table's bits for every byte and
        // channel. Weights of a copy, so every byte value reaches the normalisation.
        let normalisation = meta_normalisation();
        let n = 256 + 5;
        // Pixel x's lane k holds (x + 85k) mod 256: every byte in every lane.
        let row: Vec<u8> = (0..kernels::LANES * n)
            .map(|i| ((i / kernels::LANES + 85 * (i % kernels::LANES)) % 256) as u8)
            .collect();
        let pairs = kernels::pil_vertical_pairs(&[1 << kernels::PIL_BITS, 0]);
        let mut planes = vec![vec![f32::NAN; n]; 3];
        let [r, g, b] = &mut planes[..] else {
            unreachable!()
        };
        let rows = [&row[..], &row[..]];
        kernels::pil_vertical(&rows, &pairs, [2, 1, 0], &normalisation, [r, g, b]);
        for c in 0..3 {
            for x in 0..n {
                let v = row[x * kernels::LANES + [2, 1, 0][c]] as usize;
                assert_eq!(
                    planes[c][x].to_bits(),
                    normalisation.table[c][v].to_bits(),
                    "channel {c} pixel {x}"
                );
            }
        }
    }

    /// The reference client's four-tap bilinear formula, pixel by pixel.
    fn reference_bilinear(image: &ImageView<'_>, size: usize) -> Vec<f32> {
        let (xt, yt) = (taps(image.width, size), taps(image.height, size));
        let ch = image.format.channels();
        let offsets = image.format.rgb_offsets();
        let px = |x: usize, y: usize, c: usize| {
            image.data[y * image.stride + x * ch + offsets[c]] as f32
        };
        let mut out = vec![0.0f32; 3 * size * size];
        let (scale, bias) = normalisation();
        for c in 0..3 {
            for (y, ty) in yt.iter().enumerate() {
                for (x, tx) in xt.iter().enumerate() {
                    let v = ty.w0 * (tx.w0 * px(tx.i0, ty.i0, c) + tx.w1 * px(tx.i1, ty.i0, c))
                        + ty.w1 * (tx.w0 * px(tx.i0, ty.i1, c) + tx.w1 * px(tx.i1, ty.i1, c));
                    out[c * size * size + y * size + x] = v * scale[c] + bias[c];
                }
            }
        }
        out
    }

    #[test]
    fn growing_is_bit_identical_to_the_reference_bilinear_formula() {
        for (w, h, format, pad) in [
            (37, 23, PixelFormat::Rgb, 0),
            (150, 91, PixelFormat::Bgra, 5),
            (64, 64, PixelFormat::Gray, 3),
            (1, 1, PixelFormat::Rgba, 0),
        ] {
            let (data, stride) = pattern(w, h, format, pad);
            let image = ImageView::new(&data, w, h, stride, format).unwrap();
            for size in [150, 197] {
                let fast = preprocess(&image, size);
                let slow = reference_bilinear(&image, size);
                assert!(
                    fast.iter()
                        .zip(&slow)
                        .all(|(a, b)| a.to_bits() == b.to_bits()),
                    "{w}×{h} {format:?} → {size}"
                );
            }
        }
    }

    #[test]
    fn half_pixel_taps_match_opencv_convention() {
        // Upscaling 2 → 4: output centres map to -0.25 (clamped to 0), 0.25, 0.75, 1.25 (clamped).
        let t = taps(2, 4);
        assert_eq!((t[0].i0, t[0].w0, t[0].w1), (0, 1.0, 0.0));
        assert_eq!((t[1].i0, t[1].i1), (0, 1));
        assert!((t[1].w1 - 0.25).abs() < 1e-6);
        assert!((t[2].w1 - 0.75).abs() < 1e-6);
        assert_eq!((t[3].i0, t[3].i1), (1, 1));
    }
}
