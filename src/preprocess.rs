//! Host pixels → the encoder's input tensor, in one fused pass per output row: bilinear resize
//! (stretch, half-pixel centres, as upstream SAM2 and OpenCV's INTER_LINEAR do), channel reorder
//! to RGB, ImageNet normalisation, and NCHW layout.

use rayon::prelude::*;

use crate::image::ImageView;

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
/// and rounded to f32, so the reference client (tools/reference_check.py) gets the same bits.
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

/// Writes the normalised NCHW tensor (`3 × size × size`, planes R, G, B) into `out`.
///
/// Separable: each source row a band of output rows needs is resampled horizontally once (all
/// three channels, one pass over the interleaved pixels) into a two-row cache, and output rows
/// blend two cached rows over contiguous memory. The arithmetic is the reference's, in its
/// order, so the result is bit-identical to `tools/reference_check.py`. Output rows are split
/// into one band per worker thread.
pub fn preprocess_into(image: &ImageView<'_>, size: usize, out: &mut [f32]) {
    assert_eq!(
        out.len(),
        3 * size * size,
        "output must hold 3 planes of size²"
    );
    let xt = taps(image.width, size);
    let yt = taps(image.height, size);
    // resample_row's precondition, checked once per image.
    assert!(xt.iter().all(|t| t.i0 < image.width && t.i1 < image.width));
    let plane = size * size;
    let (r_plane, rest) = out.split_at_mut(plane);
    let (g_plane, b_plane) = rest.split_at_mut(plane);

    // Bands of output rows, one per worker of the persistent pool (no thread is started per call).
    let threads = worker_threads().min(size);
    let band = size.div_ceil(threads);
    let chunk = band * size;
    let (xt, yt) = (&xt, &yt);
    r_plane
        .par_chunks_mut(chunk)
        .zip(g_plane.par_chunks_mut(chunk))
        .zip(b_plane.par_chunks_mut(chunk))
        .enumerate()
        .for_each(|(i, ((r, g), b))| resample_band(image, xt, yt, size, i * band, [r, g, b]));
}

/// Resamples source row `row` horizontally into `out` (three planes of `xt.len()`, RGB order).
///
/// # Safety
/// Every tap of `xt` must be below `image.width` (what `taps(image.width, _)` gives, and what
/// `preprocess_into` asserts once per image).
unsafe fn resample_row(image: &ImageView<'_>, row: usize, xt: &[Tap], out: &mut [f32]) {
    let channels = image.format.channels();
    let [ro, go, bo] = image.format.rgb_offsets();
    let src = &image.data[row * image.stride..row * image.stride + image.width * channels];
    // Each index below is tap × channels + offset < width × channels = src.len(): unchecked
    // reads instead of six bounds checks per output pixel in the hottest loop of preprocessing.
    debug_assert!(ro < channels && go < channels && bo < channels);
    let n = xt.len();
    let (r, rest) = out.split_at_mut(n);
    let (g, b) = rest.split_at_mut(n);
    let at = |i: usize| -> f32 {
        debug_assert!(i < src.len());
        // SAFETY: i = tap × channels + offset < width × channels = src.len() (the caller's
        // precondition on the taps; offsets are below `channels` by construction).
        unsafe { *src.get_unchecked(i) as f32 }
    };
    for (((t, r), g), b) in xt.iter().zip(r).zip(g).zip(b) {
        let (p, q) = (t.i0 * channels, t.i1 * channels);
        *r = t.w0 * at(p + ro) + t.w1 * at(q + ro);
        *g = t.w0 * at(p + go) + t.w1 * at(q + go);
        *b = t.w0 * at(p + bo) + t.w1 * at(q + bo);
    }
}

/// Output rows `first_row..` (as many as `planes` hold) of the three planes.
fn resample_band(
    image: &ImageView<'_>,
    xt: &[Tap],
    yt: &[Tap],
    size: usize,
    first_row: usize,
    planes: [&mut [f32]; 3],
) {
    let rows = planes[0].len() / size;
    // Two horizontally resampled source rows, and which rows they hold.
    let mut cache = [vec![0.0f32; 3 * size], vec![0.0f32; 3 * size]];
    let mut held = [usize::MAX; 2];
    let [pr, pg, pb] = planes;
    let (scale, bias) = normalisation();
    for row in 0..rows {
        let t = yt[first_row + row];
        // Slot 0 holds source row i0 and slot 1 row i1 (when they differ); a row already held is
        // never resampled again.
        if held[0] != t.i0 {
            if held[1] == t.i0 {
                cache.swap(0, 1);
                held.swap(0, 1);
            } else {
                // SAFETY: the taps were checked against the width in preprocess_into.
                unsafe { resample_row(image, t.i0, xt, &mut cache[0]) };
                held[0] = t.i0;
            }
        }
        if t.i1 != t.i0 && held[1] != t.i1 {
            // SAFETY: as above.
            unsafe { resample_row(image, t.i1, xt, &mut cache[1]) };
            held[1] = t.i1;
        }
        let bottom_slot = if t.i1 == t.i0 { 0 } else { 1 };
        let (wy0, wy1) = (t.w0, t.w1);
        let dst_rows = [&mut *pr, &mut *pg, &mut *pb];
        for (c, plane) in dst_rows.into_iter().enumerate() {
            let dst = &mut plane[row * size..(row + 1) * size];
            let top = &cache[0][c * size..(c + 1) * size];
            let bottom = &cache[bottom_slot][c * size..(c + 1) * size];
            let (s, b) = (scale[c], bias[c]);
            for ((d, &h0), &h1) in dst.iter_mut().zip(top).zip(bottom) {
                // Same operations in the same order as the reference, so the bits agree.
                let v = wy0 * h0 + wy1 * h1;
                *d = v * s + b;
            }
        }
    }
}

/// The normalised tensor as a new buffer.
pub fn preprocess(image: &ImageView<'_>, size: usize) -> Vec<f32> {
    let mut out = vec![0.0f32; 3 * size * size];
    preprocess_into(image, size, &mut out);
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

    #[test]
    fn constant_image_normalises_to_constant_planes() {
        let px = [200u8, 100, 50];
        let data: Vec<u8> = px.iter().copied().cycle().take(7 * 5 * 3).collect();
        let img = ImageView::packed(&data, 7, 5, PixelFormat::Rgb).unwrap();
        let out = preprocess(&img, 16);
        for c in 0..3 {
            let want = ((px[c] as f64 / 255.0 - MEAN[c]) / STD[c]) as f32;
            for v in &out[c * 256..(c + 1) * 256] {
                assert!((v - want).abs() < 1e-5, "{v} vs {want}");
            }
        }
    }

    /// The direct four-tap formula of the reference, pixel by pixel.
    fn direct(image: &ImageView<'_>, size: usize) -> Vec<f32> {
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
    fn the_separable_pass_is_bit_identical_to_the_direct_formula() {
        for (w, h, format, pad) in [
            (37, 23, PixelFormat::Rgb, 0),
            (150, 91, PixelFormat::Bgra, 5),
            (64, 200, PixelFormat::Gray, 3),
            (1, 1, PixelFormat::Rgba, 0),
        ] {
            let stride = w * format.channels() + pad;
            let data: Vec<u8> = (0..stride * h).map(|i| (i * 7919 % 251) as u8).collect();
            let image = ImageView::new(&data, w, h, stride, format).unwrap();
            for size in [16, 64, 97] {
                let fast = preprocess(&image, size);
                let slow = direct(&image, size);
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
