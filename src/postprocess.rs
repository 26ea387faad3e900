//! Decoder outputs → what a host wants: binary masks at the original size, boxes and areas.

use std::sync::Mutex;

use crate::error::{try_zeroed, Result};
use crate::preprocess::{helpers, taps, worker_threads, Tap};
use crate::resample::{self, resample_rows};

/// Bilinear (half-pixel) upsampling of one `src_h × src_w` logit map to `dst_w × dst_h`,
/// thresholded at 0 into `out` (1 = foreground), by [`crate::resample`]'s kernel. Very large
/// outputs are split into bands of rows that the calling thread and the library's helper threads
/// take in turn. Panics when the resampled rows' memory cannot be had; [`try_upsample_threshold`]
/// returns the error instead.
pub fn upsample_threshold(
    logits: &[f32],
    src_w: usize,
    src_h: usize,
    dst_w: usize,
    dst_h: usize,
    out: &mut [u8],
) {
    try_upsample_threshold(logits, src_w, src_h, dst_w, dst_h, out)
        .unwrap_or_else(|e| panic!("{e}"))
}

/// [`upsample_threshold`], or [`Error::OutOfMemory`] when the two resampled source rows of a band
/// (`2 × dst_w` floats) cannot be had.
///
/// [`Error::OutOfMemory`]: crate::Error::OutOfMemory
pub fn try_upsample_threshold(
    logits: &[f32],
    src_w: usize,
    src_h: usize,
    dst_w: usize,
    dst_h: usize,
    out: &mut [u8],
) -> Result<()> {
    assert_eq!(logits.len(), src_w * src_h);
    assert_eq!(out.len(), dst_w * dst_h);
    if out.is_empty() {
        return Ok(());
    }
    let xt = taps(src_w, dst_w);
    let yt = taps(src_h, dst_h);
    // Waking pool threads costs more than it saves below a few megapixels: a predict's decoder
    // run has just finished and ONNX Runtime's own threads are still spinning on the cores
    // (measured on 2 cores: 1920×1080 takes 0.69 ms on the calling thread, 0.87 ms split in two).
    let threads = if dst_w * dst_h >= 1 << 23 {
        worker_threads()
    } else {
        1
    };
    let (xt, yt) = (&xt, &yt);
    if threads == 1 {
        return upsample_band(logits, src_w, xt, yt, 0, out);
    }
    // Bands of output rows, each taken once by whichever thread reaches it first: the caller and
    // the helpers (persistent threads woken off the caller's CPU, see `preprocess::helpers`; the
    // caller never waits for one that has not started).
    const BAND_ROWS: usize = 128;
    let failed = Mutex::new(None);
    helpers::take_in_turn(
        out.chunks_mut(BAND_ROWS * dst_w).collect(),
        threads - 1,
        || (),
        |i, chunk, _| {
            if let Err(e) = upsample_band(logits, src_w, xt, yt, i * BAND_ROWS, chunk) {
                *failed.lock().unwrap_or_else(|e| e.into_inner()) = Some(e);
            }
        },
    );
    match failed.into_inner().unwrap_or_else(|e| e.into_inner()) {
        Some(e) => Err(e),
        None => Ok(()),
    }
}

/// Output rows `first_row..` of an upsampling (as many as `out` holds).
fn upsample_band(
    logits: &[f32],
    src_w: usize,
    xt: &[Tap],
    yt: &[Tap],
    first_row: usize,
    out: &mut [u8],
) -> Result<()> {
    let dst_w = xt.len();
    let rows_out = out.len() / dst_w;
    let mut cache = try_zeroed::<f32>(2 * dst_w, "the resampled rows of a mask")?;
    let yt = &yt[first_row..first_row + rows_out];
    resample_rows(logits, src_w, xt, yt, &mut cache, out, |dst, blend| {
        for (d, v) in dst.iter_mut().zip(blend.values()) {
            *d = (v > 0.0) as u8;
        }
    });
    Ok(())
}

/// Bilinear (half-pixel) resampling of a logit map, used to derive low-res logits from a
/// contract that only returns upsampled ones.
pub fn resample(src: &[f32], src_w: usize, src_h: usize, dst_w: usize, dst_h: usize) -> Vec<f32> {
    let xt = taps(src_w, dst_w);
    let yt = taps(src_h, dst_h);
    let mut cache = vec![0.0f32; 2 * dst_w];
    let mut out = vec![0.0f32; dst_w * dst_h];
    resample_rows(src, src_w, &xt, &yt, &mut cache, &mut out, resample::copy);
    out
}

/// Area and inclusive bounding box `[x_min, y_min, x_max, y_max]` of a binary (0/1) mask;
/// an empty mask has area 0 and box `[0, 0, 0, 0]`. Counts eight pixels at a time.
pub fn box_and_area(mask: &[u8], width: usize) -> ([u32; 4], u64) {
    let mut area = 0u64;
    let (mut x0, mut y0, mut x1, mut y1) = (usize::MAX, usize::MAX, 0usize, 0usize);
    for (y, row) in mask.chunks(width).enumerate() {
        let words = row.chunks_exact(8);
        let tail: u64 = words.remainder().iter().map(|&v| v as u64).sum();
        // Bytes are 0 or 1, so multiplying by 0x0101… sums a word's eight bytes into its top byte.
        let count = words.fold(tail, |acc, w| {
            acc + (u64::from_ne_bytes(w.try_into().expect("8 bytes"))
                .wrapping_mul(0x0101_0101_0101_0101)
                >> 56)
        });
        if count > 0 {
            let first = row.iter().position(|&v| v != 0).unwrap_or(0);
            let last = row.iter().rposition(|&v| v != 0).unwrap_or(0);
            area += count;
            x0 = x0.min(first);
            x1 = x1.max(last);
            y0 = y0.min(y);
            y1 = y;
        }
    }
    if area == 0 {
        ([0, 0, 0, 0], 0)
    } else {
        ([x0 as u32, y0 as u32, x1 as u32, y1 as u32], area)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn banded_upsampling_equals_the_direct_formula() {
        // Large enough to be split across threads; odd sizes so bands and tails are uneven.
        let (sw, sh, dw, dh) = (256, 256, 4001, 2203);
        let logits: Vec<f32> = (0..sw * sh)
            .map(|i| ((i * 7919) % 1000) as f32 / 100.0 - 5.0)
            .collect();
        let mut fast = vec![0u8; dw * dh];
        upsample_threshold(&logits, sw, sh, dw, dh, &mut fast);
        let (xt, yt) = (taps(sw, dw), taps(sh, dh));
        for (y, ty) in yt.iter().enumerate() {
            for (x, tx) in xt.iter().enumerate() {
                let row =
                    |r: usize| tx.w0 * logits[r * sw + tx.i0] + tx.w1 * logits[r * sw + tx.i1];
                let want = (ty.w0 * row(ty.i0) + ty.w1 * row(ty.i1) > 0.0) as u8;
                assert_eq!(fast[y * dw + x], want, "({x}, {y})");
            }
        }
    }

    #[test]
    fn box_and_area_count_every_pixel_including_row_tails() {
        let (w, h) = (37, 11);
        let mask: Vec<u8> = (0..w * h).map(|i| ((i * 31 % 17) < 5) as u8).collect();
        let (bbox, area) = box_and_area(&mask, w);
        assert_eq!(area, mask.iter().map(|&v| v as u64).sum::<u64>());
        let xs: Vec<usize> = (0..w * h)
            .filter(|&i| mask[i] == 1)
            .map(|i| i % w)
            .collect();
        let ys: Vec<usize> = (0..w * h)
            .filter(|&i| mask[i] == 1)
            .map(|i| i / w)
            .collect();
        assert_eq!(
            bbox,
            [
                *xs.iter().min().unwrap() as u32,
                *ys.iter().min().unwrap() as u32,
                *xs.iter().max().unwrap() as u32,
                *ys.iter().max().unwrap() as u32
            ]
        );
    }

    #[test]
    fn upsample_of_a_half_plane_splits_in_the_middle() {
        // Left half negative, right half positive: the boundary lands in the middle at any scale.
        let src: Vec<f32> = (0..16)
            .map(|i| if i % 4 < 2 { -1.0 } else { 1.0 })
            .collect();
        let mut out = vec![0u8; 8 * 3];
        upsample_threshold(&src, 4, 4, 8, 3, &mut out);
        for row in out.chunks(8) {
            assert_eq!(row, &[0, 0, 0, 0, 1, 1, 1, 1]);
        }
        let (bbox, area) = box_and_area(&out, 8);
        assert_eq!((bbox, area), ([4, 0, 7, 2], 12));
        assert_eq!(box_and_area(&[0u8; 6], 3), ([0, 0, 0, 0], 0));
    }
}
