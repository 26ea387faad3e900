//! Decoder outputs → what a host wants: binary masks at the original size, boxes and areas.

use crate::preprocess::{taps, worker_threads};

/// Bilinear (half-pixel) upsampling of one `src_h × src_w` logit map to `dst_h × dst_w`,
/// thresholded at 0 into `out` (1 = foreground). Separable: each source row is resampled
/// horizontally once, then output rows blend two of those.
pub fn upsample_threshold(
    logits: &[f32],
    src_w: usize,
    src_h: usize,
    dst_w: usize,
    dst_h: usize,
    out: &mut [u8],
) {
    assert_eq!(logits.len(), src_w * src_h);
    assert_eq!(out.len(), dst_w * dst_h);
    let xt = taps(src_w, dst_w);
    let yt = taps(src_h, dst_h);
    let mut rows = vec![0.0f32; src_h * dst_w];
    for (r, dst) in rows.chunks_mut(dst_w).enumerate() {
        let src = &logits[r * src_w..(r + 1) * src_w];
        for (d, t) in dst.iter_mut().zip(xt.iter()) {
            *d = t.w0 * src[t.i0] + t.w1 * src[t.i1];
        }
    }
    let rows = &rows;
    let blend = |y: usize, dst: &mut [u8]| {
        let t = yt[y];
        let r0 = &rows[t.i0 * dst_w..(t.i0 + 1) * dst_w];
        let r1 = &rows[t.i1 * dst_w..(t.i1 + 1) * dst_w];
        let (w0, w1) = (t.w0, t.w1);
        for ((d, a), b) in dst.iter_mut().zip(r0).zip(r1) {
            *d = (w0 * a + w1 * b > 0.0) as u8;
        }
    };
    let threads = worker_threads();
    if threads <= 1 || dst_w * dst_h < 1 << 18 {
        for (y, dst) in out.chunks_mut(dst_w).enumerate() {
            blend(y, dst);
        }
        return;
    }
    let rows_per_task = dst_h.div_ceil(threads);
    std::thread::scope(|scope| {
        for (i, chunk) in out.chunks_mut(rows_per_task * dst_w).enumerate() {
            let blend = &blend;
            scope.spawn(move || {
                for (j, dst) in chunk.chunks_mut(dst_w).enumerate() {
                    blend(i * rows_per_task + j, dst);
                }
            });
        }
    });
}

/// Bilinear (half-pixel) resampling of a logit map, used to derive low-res logits from a
/// contract that only returns upsampled ones.
pub fn resample(src: &[f32], src_w: usize, src_h: usize, dst_w: usize, dst_h: usize) -> Vec<f32> {
    let xt = taps(src_w, dst_w);
    let yt = taps(src_h, dst_h);
    let mut out = vec![0.0f32; dst_w * dst_h];
    for (y, dst) in out.chunks_mut(dst_w).enumerate() {
        let t = yt[y];
        let r0 = &src[t.i0 * src_w..(t.i0 + 1) * src_w];
        let r1 = &src[t.i1 * src_w..(t.i1 + 1) * src_w];
        for (d, tx) in dst.iter_mut().zip(xt.iter()) {
            let top = tx.w0 * r0[tx.i0] + tx.w1 * r0[tx.i1];
            let bottom = tx.w0 * r1[tx.i0] + tx.w1 * r1[tx.i1];
            *d = t.w0 * top + t.w1 * bottom;
        }
    }
    out
}

/// Area and inclusive bounding box `[x_min, y_min, x_max, y_max]` of a binary mask;
/// an empty mask has area 0 and box `[0, 0, 0, 0]`.
pub fn box_and_area(mask: &[u8], width: usize) -> ([u32; 4], u64) {
    let mut area = 0u64;
    let (mut x0, mut y0, mut x1, mut y1) = (usize::MAX, usize::MAX, 0usize, 0usize);
    for (y, row) in mask.chunks(width).enumerate() {
        let mut first = None;
        let mut last = 0;
        let mut count = 0u64;
        for (x, &v) in row.iter().enumerate() {
            if v != 0 {
                if first.is_none() {
                    first = Some(x);
                }
                last = x;
                count += 1;
            }
        }
        if let Some(f) = first {
            area += count;
            x0 = x0.min(f);
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
