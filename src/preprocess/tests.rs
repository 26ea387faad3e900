//! The preprocessing passes held to what they compute: the tables' weights, constant and
//! equal-size images, the direct sums pixel by pixel, the reference client's bilinear formula,
//! and the oracle (the passes before the SIMD kernels), bit for bit, with and without AVX2.

use super::axis::{antialiased_bilinear_axis, pil_bicubic, PIL_PRECISION_BITS};
use super::*;
use crate::image::PixelFormat;

/// binary16 bits → f32 (the inverse the unit tests check the conversion against).
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
    let px =
        |x: usize, y: usize, c: usize| image.data[y * image.stride + x * ch + offsets[c]] as f32;
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
