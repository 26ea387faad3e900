//! Host pixels → the encoder's input tensor, in one fused pass per output row: bilinear resize
//! (stretch, half-pixel centres, as upstream SAM2 and OpenCV's INTER_LINEAR do), channel reorder
//! to RGB, ImageNet normalisation, and NCHW layout.

use crate::image::ImageView;

/// ImageNet mean and standard deviation, in [0, 1] units, RGB order.
pub const MEAN: [f32; 3] = [0.485, 0.456, 0.406];
pub const STD: [f32; 3] = [0.229, 0.224, 0.225];

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
pub fn preprocess_into(image: &ImageView<'_>, size: usize, out: &mut [f32]) {
    assert_eq!(
        out.len(),
        3 * size * size,
        "output must hold 3 planes of size²"
    );
    let xt = taps(image.width, size);
    let yt = taps(image.height, size);
    let channels = image.format.channels();
    let offsets = image.format.rgb_offsets();

    let plane = size * size;
    let (r_plane, rest) = out.split_at_mut(plane);
    let (g_plane, b_plane) = rest.split_at_mut(plane);

    let threads = worker_threads();
    let rows_per_task = size.div_ceil(threads * 4).max(1);
    let chunk = rows_per_task * size;
    let tasks: Vec<_> = r_plane
        .chunks_mut(chunk)
        .zip(g_plane.chunks_mut(chunk))
        .zip(b_plane.chunks_mut(chunk))
        .enumerate()
        .map(|(i, ((r, g), b))| (i * rows_per_task, r, g, b))
        .collect();

    let run = |(first_row, r, g, b): (usize, &mut [f32], &mut [f32], &mut [f32])| {
        let rows = r.len() / size;
        let planes: [&mut [f32]; 3] = [r, g, b];
        let mut planes = planes;
        for row in 0..rows {
            let ty = yt[first_row + row];
            let src0 = &image.data[ty.i0 * image.stride..];
            let src1 = &image.data[ty.i1 * image.stride..];
            let (wy0, wy1) = (ty.w0, ty.w1);
            for (c, plane) in planes.iter_mut().enumerate() {
                let dst = &mut plane[row * size..(row + 1) * size];
                let off = offsets[c];
                let (mean, std) = (MEAN[c], STD[c]);
                for (d, t) in dst.iter_mut().zip(xt.iter()) {
                    let p00 = src0[t.i0 * channels + off] as f32;
                    let p01 = src0[t.i1 * channels + off] as f32;
                    let p10 = src1[t.i0 * channels + off] as f32;
                    let p11 = src1[t.i1 * channels + off] as f32;
                    // Same operations in the same order as the reference, so the bits agree.
                    let v = wy0 * (t.w0 * p00 + t.w1 * p01) + wy1 * (t.w0 * p10 + t.w1 * p11);
                    *d = (v / 255.0 - mean) / std;
                }
            }
        }
    };

    if threads <= 1 || tasks.len() <= 1 {
        tasks.into_iter().for_each(run);
        return;
    }
    let queue = std::sync::Mutex::new(tasks);
    std::thread::scope(|scope| {
        for _ in 0..threads {
            scope.spawn(|| loop {
                let task = queue.lock().unwrap_or_else(|p| p.into_inner()).pop();
                match task {
                    Some(task) => run(task),
                    None => break,
                }
            });
        }
    });
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

/// binary16 bits → f32.
pub fn f16_bits_to_f32(h: u16) -> f32 {
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
            let want = (px[c] as f32 / 255.0 - MEAN[c]) / STD[c];
            for v in &out[c * 256..(c + 1) * 256] {
                assert!((v - want).abs() < 1e-5, "{v} vs {want}");
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
