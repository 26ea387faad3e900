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

mod axis;
pub(crate) mod helpers;
mod kernels;
#[cfg(test)]
mod oracle;
#[cfg(test)]
mod tests;
mod torchvision_u8;

use axis::{image_axis, pil_bicubic_axis, Axis};
pub(crate) use axis::{taps, Tap};
pub(crate) use torchvision_u8::resize_u8_chw;

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

/// Number of worker threads for per-image work.
pub(crate) fn worker_threads() -> usize {
    std::thread::available_parallelism()
        .map_or(1, |n| n.get())
        .min(8)
}

/// One of the resizes, as the banded pass drives it: a source row widened to `Wide` values,
/// resampled horizontally into a cached row of `Cached` values ([`kernels::LANES`] per output
/// pixel), cached rows blended into an output row of the three planes of `Out` values.
trait Resize: Sync {
    type Wide: Copy + Default + From<u8>;
    type Cached: Copy + Default + Send;
    type Out: Send;
    /// The vertical axis: output row `y` reads the rows from `y_axis.first[y]`.
    fn y_first(&self, y: usize) -> usize;
    fn y_taps(&self) -> usize;
    /// Values a widened row holds (`channels` per pixel).
    fn wide_len(&self, channels: usize) -> usize;
    fn horizontal(&self, wide: &[Self::Wide], channels: usize, out: &mut [Self::Cached]);
    /// Output row `y` from the cached rows of its taps, in order.
    fn vertical(&self, rows: &[&[Self::Cached]], y: usize, planes: [&mut [Self::Out]; 3]);
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
    type Out = f32;

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

/// PIL's integer passes over fixed-point tables with 22-bit weights, then `output` of the 8-bit
/// result, per channel and value: the video path (Meta's float32 normalisation) and SAM 3's image
/// path (the bytes, [`torchvision_u8`]).
struct PilResize<O> {
    x: kernels::Horizontal<[i16; 8]>,
    y: Axis<i32>,
    /// Each output row's vertical weights, split in pairs for the kernel.
    y_pairs: Vec<Vec<[[i16; 8]; 2]>>,
    offsets: [usize; 3],
    output: O,
}

impl PilResize<kernels::Normalised> {
    /// The video path.
    fn new(image: &ImageView<'_>, size: usize) -> Self {
        let ints = |a: Axis<f64>| Axis {
            taps: a.taps,
            first: a.first,
            weight: a.weight.iter().map(|&w| w as i32).collect(),
        };
        PilResize::from_axes(
            image,
            &ints(pil_bicubic_axis(image.width, size)),
            ints(pil_bicubic_axis(image.height, size)),
            meta_normalisation(),
        )
    }
}

impl<O: kernels::PilOutput> PilResize<O> {
    /// From the horizontal and the vertical table (weights in 22-bit fixed point).
    fn from_axes(image: &ImageView<'_>, x: &Axis<i32>, y: Axis<i32>, output: O) -> Self {
        PilResize {
            x: kernels::pil_horizontal_table(x.taps, &x.first, &x.weight),
            y_pairs: y
                .weight
                .chunks_exact(y.taps)
                .map(kernels::pil_vertical_pairs)
                .collect(),
            y,
            offsets: image.format.rgb_offsets(),
            output,
        }
    }
}

impl<O: kernels::PilOutput> Resize for PilResize<O> {
    type Wide = i16;
    type Cached = u8;
    type Out = O::Value;

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

    fn vertical(&self, rows: &[&[u8]], y: usize, planes: [&mut [O::Value]; 3]) {
        let pairs = &self.y_pairs[y];
        // An odd last tap pairs with a zero weight: any row will do as its partner.
        if rows.len() % 2 == 0 {
            kernels::pil_vertical(rows, pairs, self.offsets, &self.output, planes);
        } else if rows.len() < 32 {
            let mut paired = [rows[0]; 32];
            paired[..rows.len()].copy_from_slice(rows);
            let paired = &paired[..rows.len() + 1];
            kernels::pil_vertical(paired, pairs, self.offsets, &self.output, planes);
        } else {
            let paired: Vec<&[u8]> = rows.iter().chain(&rows[..1]).copied().collect();
            kernels::pil_vertical(&paired, pairs, self.offsets, &self.output, planes);
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

fn resize_into<R: Resize>(image: &ImageView<'_>, resize: &R, size: usize, out: &mut [R::Out]) {
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
    let bands: Vec<[&mut [R::Out]; 3]> = r_plane
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
    planes: [&mut [R::Out]; 3],
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
