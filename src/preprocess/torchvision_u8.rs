//! SAM 3's resize, bit for bit: torchvision's antialiased bilinear resize of an 8-bit image.
//!
//! Meta's `Sam3Processor` turns the RGB image into a uint8 CHW tensor (`v2.functional.to_image`)
//! and squashes it to 1008×1008 with `v2.Resize(size=(1008, 1008))`: bilinear, antialiased, and
//! left in uint8, which the ONNX image encoder takes as it is. On an x86 CPU whose ATen capability
//! is AVX2 or AVX512, torchvision hands the uint8 tensor to ATen (`_upsample_bilinear2d_aa`), which
//! takes its AVX2 fixed-point kernel for up to four channels (`upsample_avx_bilinear_bicubic_uint8`,
//! a port of Pillow-SIMD; an AVX512 CPU runs the AVX2 build, `REGISTER_DISPATCH` leaving the
//! AVX512 slot empty). Elsewhere torchvision resizes a float copy and rounds it, which differs by
//! one in 10–20 % of the values of a noisy image (fewer on smooth ones): on other CPUs, and on a
//! GPU, which is `Sam3Processor`'s default device. The CPU's bytes are the ones reproduced here.
//! What that kernel computes:
//!
//! - per axis whose size changes, a table ([`aten_axis`]), in double precision: the scale
//!   `s = in / out`; the triangle filter's support `max(s, 1)`, so that a shrinking axis is
//!   antialiased (every source pixel counts) and a growing one is plain bilinear; output `i`'s
//!   centre `s·(i + ½)`, its window from `trunc(centre − support + ½)` (at least 0) to
//!   `trunc(centre + support + ½)` (at most `in`), at most `2·ceil(support) + 1` pixels; weights
//!   `1 − |(j − centre + ½) / max(s, 1)|` (0 outside the triangle), divided by their sum;
//! - the weights in 16-bit fixed point at a precision `p` per axis: the smallest `p` at which the
//!   axis's largest weight times `2^(p+1)`, rounded, reaches 2¹⁵ (22 if none below 22 does), so
//!   the largest weight times `2^p` still fits 15 bits (14 to 16 bits for the usual sizes); each
//!   weight is `round(w · 2^p)`, halves away from zero;
//! - a horizontal pass over every source row, then a vertical pass over the horizontally resampled
//!   rows (always in that order, whichever axis shrinks), each value `clamp((2^(p−1) + Σ w·v) >>
//!   p, 0, 255)` in 32-bit integers, so the intermediate image is 8-bit. An axis whose size does
//!   not change has no pass at all, and an image already at the size is returned as it is (here
//!   such an axis is a pass that copies, which gives the same bytes).
//!
//! That is Pillow's `ImagingResample` with ATen's weights and precision instead of Pillow's
//! (which rounds its float32-scaled weights to a fixed 22 bits), hence results that differ from
//! PIL's `Image.resize` by one or two in many values. It is also why the library's PIL kernels
//! compute it exactly: with each weight multiplied by `2^(22−p)`, their 22-bit sum is this sum
//! times `2^(22−p)`, the half-unit they add is `2^(p−1) · 2^(22−p)`, and the shift by 22 gives the
//! same quotient. So the resize runs through the video path's banded passes and SIMD kernels,
//! writing bytes instead of normalised floats ([`kernels::Bytes`]).
//!
//! The tests hold it to torchvision 0.25 / torch 2.10 on 43 generated images
//! (`testdata/sam3_resize.json`, written by `tools/references/sam3_resize.py`).

use super::axis::Axis;
use super::kernels::{self, PIL_BITS};
use super::{resize_into, PilResize};
use crate::image::ImageView;

/// The RGB planes (C order `[3, size, size]`) of `image` resized to `size`×`size` as
/// `Sam3Processor` resizes it: torchvision's `v2.Resize((size, size))` of the uint8 tensor that
/// `v2.functional.to_image` makes of the RGB image. BGR and BGRA are read as their RGB pixels,
/// RGBA's and BGRA's alpha is dropped, and gray is replicated to three channels.
pub(crate) fn resize_u8_chw(image: &ImageView<'_>, size: usize) -> Vec<u8> {
    assert!(size > 0, "the output size must be positive");
    let resize = PilResize::from_axes(
        image,
        &pil_scaled(image.width, size),
        pil_scaled(image.height, size),
        kernels::Bytes,
    );
    let mut out = vec![0u8; 3 * size * size];
    resize_into(image, &resize, size, &mut out);
    out
}

/// ATen's table for one axis whose size changes (`src ≠ dst`): 16-bit weights and their precision
/// (module doc).
pub(super) fn aten_axis(src: usize, dst: usize) -> (Axis<i32>, u32) {
    assert!(src > 0 && dst > 0 && src != dst);
    let scale = src as f64 / dst as f64;
    let (support, invscale) = if scale >= 1.0 {
        (scale, 1.0 / scale)
    } else {
        (1.0, 1.0)
    };
    let max_taps = support.ceil() as i64 * 2 + 1;
    let mut largest = 0.0f64;
    let windows: Vec<(usize, Vec<f64>)> = (0..dst)
        .map(|i| {
            let center = scale * (i as f64 + 0.5);
            let first = ((center - support + 0.5) as i64).max(0);
            let end = ((center + support + 0.5) as i64).min(src as i64);
            // Rounding can widen a window by one past ATen's bound, which clips it.
            let size = (end - first).clamp(0, max_taps);
            let mut w: Vec<f64> = (0..size)
                .map(|j| {
                    let x = (((j + first) as f64 - center + 0.5) * invscale).abs();
                    if x < 1.0 {
                        1.0 - x
                    } else {
                        0.0
                    }
                })
                .collect();
            let total = w.iter().fold(0.0, |a, &b| a + b);
            if total != 0.0 {
                for v in &mut w {
                    *v /= total;
                    largest = largest.max(*v);
                }
            }
            (first as usize, w)
        })
        .collect();
    // The most bits with which the largest weight still fits 15 (module doc).
    let precision = (0..22u32)
        .find(|p| (0.5 + largest * (1u64 << (p + 1)) as f64) as i64 >= 1 << 15)
        .unwrap_or(22);
    let one = (1u64 << precision) as f64;
    let fixed = windows
        .into_iter()
        .map(|(first, w)| {
            let w = w
                .iter()
                .map(|&v| {
                    let v = v * one;
                    (if v < 0.0 { v - 0.5 } else { v + 0.5 }) as i32
                })
                .collect();
            (first, w)
        })
        .collect();
    (Axis::from_windows(fixed, 0), precision)
}

/// The axis as the PIL kernels take it: ATen's weights times `2^(22 − p)` (the same sums, shifted;
/// module doc), or a copy where the size does not change.
fn pil_scaled(src: usize, dst: usize) -> Axis<i32> {
    if src == dst {
        return Axis::identity(dst, 1 << PIL_BITS);
    }
    let (mut axis, precision) = aten_axis(src, dst);
    let shift = PIL_BITS - precision;
    for w in &mut axis.weight {
        *w <<= shift;
    }
    axis
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::image::PixelFormat;
    use sha2::{Digest, Sha256};

    /// The generators of `tools/references/sam3_resize.py` (its module doc), `h × w` RGB.
    fn generate(pattern: &str, h: usize, w: usize) -> Vec<u8> {
        let mut out = vec![0u8; h * w * 3];
        for (i, v) in out.iter_mut().enumerate() {
            let (y, x, c) = (i / (3 * w), (i / 3) % w, i % 3);
            *v = match pattern {
                "noise" => {
                    let seed = (h as u32).wrapping_mul(65536).wrapping_add(w as u32);
                    let mut m = (i as u32).wrapping_mul(0x9E37_79B1).wrapping_add(seed);
                    m ^= m >> 16;
                    m = m.wrapping_mul(0x7FEB_352D);
                    m ^= m >> 15;
                    m = m.wrapping_mul(0x846C_A68B);
                    m ^= m >> 16;
                    (m >> 24) as u8
                }
                "gradient" => {
                    let v = match c {
                        0 => 255 * x / (w - 1).max(1),
                        1 => 255 * y / (h - 1).max(1),
                        _ => 255 * (x + y) / (w + h - 2).max(1),
                    };
                    v as u8
                }
                "stripes" => ((x / 3 + y / 5 + c) % 2 * 255) as u8,
                other => panic!("unknown pattern {other}"),
            };
        }
        out
    }

    fn sha256(bytes: &[u8]) -> String {
        Sha256::digest(bytes)
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect()
    }

    fn rgb(data: &[u8], w: usize, h: usize) -> ImageView<'_> {
        ImageView::packed(data, w, h, PixelFormat::Rgb).unwrap()
    }

    /// ATen's passes in plain integers, straight from [`aten_axis`]: the kernels' oracle.
    fn plain(image: &[u8], h: usize, w: usize, size: usize) -> Vec<u8> {
        let pass = |src: &[i32], n: usize, stride: usize, count: usize, axis: &(Axis<i32>, u32)| {
            // Resamples `count` lines of `n` values `stride` apart; returns them line by line.
            let (axis, p) = axis;
            let mut out = vec![0i32; count * size];
            for line in 0..count {
                for (i, &first) in axis.first.iter().enumerate() {
                    let mut acc = 1i64 << (p - 1);
                    for (j, &k) in axis.weight[i * axis.taps..][..axis.taps].iter().enumerate() {
                        let at = (first + j).min(n - 1);
                        acc += k as i64 * src[line + at * stride] as i64;
                    }
                    out[line * size + i] = (acc >> p).clamp(0, 255) as i32;
                }
            }
            out
        };
        let mut planes = Vec::new();
        for c in 0..3 {
            let mut a: Vec<i32> = (0..h * w).map(|i| image[i * 3 + c] as i32).collect();
            let mut width = w;
            if w != size {
                // Rows: lines are rows, values one apart; `line` indexes the row's start.
                let axis = aten_axis(w, size);
                let rows: Vec<i32> = (0..h)
                    .flat_map(|y| pass(&a[y * w..(y + 1) * w], w, 1, 1, &axis))
                    .collect();
                a = rows;
                width = size;
            }
            if h != size {
                let axis = aten_axis(h, size);
                // Columns: line x, values `width` apart; out is column by column.
                let cols = pass(&a, h, width, width, &axis);
                a = (0..size * width)
                    .map(|i| cols[(i % width) * size + i / width])
                    .collect();
            }
            planes.extend(a.iter().map(|&v| v as u8));
        }
        planes
    }

    #[test]
    fn torchvisions_bytes_on_every_reference_image() {
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/testdata/sam3_resize.json");
        let doc: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
        let size = doc["size"].as_u64().unwrap() as usize;
        let cases = doc["cases"].as_array().unwrap();
        assert!(cases.len() >= 40, "{} cases", cases.len());
        let sse2_only = &kernels::tests::SSE2_ONLY;
        let mut failed = Vec::new();
        for case in cases {
            let (h, w) = (
                case["height"].as_u64().unwrap() as usize,
                case["width"].as_u64().unwrap() as usize,
            );
            let pattern = case["pattern"].as_str().unwrap();
            let image = generate(pattern, h, w);
            assert_eq!(
                sha256(&image),
                case["input_sha256"].as_str().unwrap(),
                "{h}x{w} {pattern}: the generator differs from the Python script's"
            );
            // Where AVX2 is present, its kernels and then the SSE2 ones alone (the 12 MP photo
            // once: it is slow in a debug build).
            let sets: &[bool] = if h * w > 4_000_000 {
                &[false]
            } else {
                &[false, true]
            };
            for &sse2 in sets {
                sse2_only.store(sse2, std::sync::atomic::Ordering::Relaxed);
                let got = resize_u8_chw(&rgb(&image, w, h), size);
                if sha256(&got) != case["output_sha256"].as_str().unwrap() {
                    failed.push(format!("{h}x{w} {pattern} (SSE2 only: {sse2})"));
                }
            }
            sse2_only.store(false, std::sync::atomic::Ordering::Relaxed);
        }
        assert!(failed.is_empty(), "differ from torchvision: {failed:?}");
    }

    #[test]
    fn the_kernels_give_the_plain_sums() {
        // Sizes the reference file lacks: extreme shrinks (windows of more than 16 taps, the
        // kernels' generic loops), odd output sizes (SIMD remainders), growth by one pixel.
        for (h, w, size) in [
            (37, 4000, 101),
            (4000, 37, 99),
            (301, 303, 300),
            (7, 9, 13),
            (1, 600, 5),
            (64, 64, 65),
        ] {
            let image = generate("noise", h, w);
            let got = resize_u8_chw(&rgb(&image, w, h), size);
            assert!(got == plain(&image, h, w, size), "{h}x{w} → {size}");
        }
    }

    #[test]
    fn every_pixel_format_gives_its_rgb_images_bytes() {
        let (h, w, size) = (301, 517, 250);
        for pattern in ["noise", "stripes"] {
            let image = generate(pattern, h, w);
            let want = resize_u8_chw(&rgb(&image, w, h), size);
            let pixels = || image.chunks_exact(3);
            // Each format with two bytes of padding at the end of each row; some alpha.
            for format in [
                PixelFormat::Rgb,
                PixelFormat::Bgr,
                PixelFormat::Rgba,
                PixelFormat::Bgra,
            ] {
                let channels = format.channels();
                let stride = w * channels + 2;
                let mut data = vec![0xA5u8; stride * h];
                for (i, p) in pixels().enumerate() {
                    let at = (i / w) * stride + (i % w) * channels;
                    let (r, g, b, alpha) = (p[0], p[1], p[2], p[0] ^ 0x5A);
                    let pixel: &[u8] = match format {
                        PixelFormat::Rgb => &[r, g, b],
                        PixelFormat::Bgr => &[b, g, r],
                        PixelFormat::Rgba => &[r, g, b, alpha],
                        _ => &[b, g, r, alpha],
                    };
                    data[at..at + channels].copy_from_slice(pixel);
                }
                let view = ImageView::new(&data, w, h, stride, format).unwrap();
                assert!(resize_u8_chw(&view, size) == want, "{format:?} {pattern}");
            }
            // Gray: the RGB image whose three channels are the gray value.
            let gray: Vec<u8> = pixels().map(|p| p[1]).collect();
            let replicated: Vec<u8> = gray.iter().flat_map(|&g| [g, g, g]).collect();
            let gray_view = ImageView::packed(&gray, w, h, PixelFormat::Gray).unwrap();
            assert!(
                resize_u8_chw(&gray_view, size) == resize_u8_chw(&rgb(&replicated, w, h), size),
                "gray {pattern}"
            );
        }
    }

    #[test]
    fn atens_precision_and_weights_on_known_sizes() {
        // Growing: bilinear, two taps, weights of up to one, 14 bits.
        let (axis, p) = aten_axis(480, 1008);
        assert_eq!((axis.taps, p), (2, 14));
        // Shrinking 4000 → 1008: windows of up to eight taps, weights of about a quarter, 16 bits;
        // each window sums to one, to the rounding of its weights.
        let (axis, p) = aten_axis(4000, 1008);
        assert_eq!((axis.taps, p), (8, 16));
        for w in axis.weight.chunks_exact(axis.taps) {
            let sum: i32 = w.iter().sum();
            assert!((sum - (1 << p)).abs() <= 4, "{w:?}");
        }
    }
}
