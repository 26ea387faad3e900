//! Bilinear (half-pixel) resampling of logit maps: the one kernel behind the predictor's masks,
//! the low-res logits derived from an export that returns only upsampled ones, and segment
//! everything's masks with their stability counts.
//!
//! Separable, in the arithmetic of the reference (cv2's `INTER_LINEAR`, taps from
//! [`taps`](crate::preprocess::taps)): a source row is resampled horizontally once, when the first
//! output row that needs it comes, into a cache of two rows; each output row then blends its two
//! cached rows, `w0 · top + w1 · bottom`, into what the caller makes of it. Output
//! rows come in order and their source rows never go back, so a source row is resampled at most
//! once and rows no output needs (downsampling) are skipped.

use crate::preprocess::Tap;

/// One output row to be written: the two resampled source rows it blends and their weights.
pub(crate) struct Blend<'a> {
    top: &'a [f32],
    bottom: &'a [f32],
    w0: f32,
    w1: f32,
}

impl Blend<'_> {
    /// The row's values, `w0 · top + w1 · bottom`, left to right.
    #[inline(always)]
    pub(crate) fn values(&self) -> impl Iterator<Item = f32> + '_ {
        let (w0, w1) = (self.w0, self.w1);
        self.top
            .iter()
            .zip(self.bottom)
            .map(move |(a, b)| w0 * a + w1 * b)
    }
}

/// Resamples `src` (`src_w` wide) through the taps `xt` (one per output column) and `yt` (one per
/// row of `out`, in order), calling `row` with each output row and the [`Blend`] that gives its
/// values (a callback per row, so that the caller's loop over the row stays tight). `cache` holds
/// two resampled rows (`2 × xt.len()` floats); `out` holds `yt.len() × xt.len()` elements.
#[inline]
pub(crate) fn resample_rows<T>(
    src: &[f32],
    src_w: usize,
    xt: &[Tap],
    yt: &[Tap],
    cache: &mut [f32],
    out: &mut [T],
    mut row: impl FnMut(&mut [T], Blend<'_>),
) {
    let dst_w = xt.len();
    debug_assert_eq!(cache.len(), 2 * dst_w);
    debug_assert_eq!(out.len(), yt.len() * dst_w);
    let (mut top, mut bottom) = cache.split_at_mut(dst_w);
    // The source rows `top` and `bottom` hold now.
    let (mut held_top, mut held_bottom) = (usize::MAX, usize::MAX);
    let source = |i: usize| &src[i * src_w..(i + 1) * src_w];
    for (dst, t) in out.chunks_mut(dst_w).zip(yt) {
        if held_bottom == t.i0 && held_top != t.i0 {
            std::mem::swap(&mut top, &mut bottom);
            std::mem::swap(&mut held_top, &mut held_bottom);
        }
        match (held_top == t.i0, held_bottom == t.i1) {
            (true, true) => {}
            (true, false) => horizontal(source(t.i1), xt, bottom),
            (false, true) => horizontal(source(t.i0), xt, top),
            // Both new (always, when downsampling): one pass over the taps for the two rows.
            (false, false) => {
                let (r0, r1) = (source(t.i0), source(t.i1));
                for ((a, b), x) in top.iter_mut().zip(bottom.iter_mut()).zip(xt) {
                    *a = x.w0 * r0[x.i0] + x.w1 * r0[x.i1];
                    *b = x.w0 * r1[x.i0] + x.w1 * r1[x.i1];
                }
            }
        }
        (held_top, held_bottom) = (t.i0, t.i1);
        row(
            dst,
            Blend {
                top,
                bottom,
                w0: t.w0,
                w1: t.w1,
            },
        );
    }
}

/// Writes a row's values as they are.
#[inline(always)]
pub(crate) fn copy(dst: &mut [f32], blend: Blend<'_>) {
    for (d, v) in dst.iter_mut().zip(blend.values()) {
        *d = v;
    }
}

/// One source row resampled through the column taps.
#[inline]
fn horizontal(row: &[f32], xt: &[Tap], out: &mut [f32]) {
    for (d, t) in out.iter_mut().zip(xt) {
        *d = t.w0 * row[t.i0] + t.w1 * row[t.i1];
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::preprocess::taps;

    /// The direct formula, pixel by pixel.
    fn direct(src: &[f32], sw: usize, sh: usize, dw: usize, dh: usize) -> Vec<f32> {
        let (xt, yt) = (taps(sw, dw), taps(sh, dh));
        let mut out = Vec::with_capacity(dw * dh);
        for ty in &yt {
            for tx in &xt {
                let row = |r: usize| tx.w0 * src[r * sw + tx.i0] + tx.w1 * src[r * sw + tx.i1];
                out.push(ty.w0 * row(ty.i0) + ty.w1 * row(ty.i1));
            }
        }
        out
    }

    #[test]
    fn every_value_is_the_direct_formula_up_down_and_across() {
        // Upsampling, downsampling, both at once, 1:1 and one-pixel sides.
        for (sw, sh, dw, dh) in [
            (7, 5, 23, 17),
            (40, 31, 9, 4),
            (16, 3, 5, 11),
            (6, 6, 6, 6),
            (1, 1, 3, 2),
            (5, 4, 1, 1),
        ] {
            let src: Vec<f32> = (0..sw * sh)
                .map(|i| ((i * 7919) % 1000) as f32 / 100.0 - 5.0)
                .collect();
            let (xt, yt) = (taps(sw, dw), taps(sh, dh));
            let mut cache = vec![0.0; 2 * dw];
            let mut out = vec![f32::NAN; dw * dh];
            resample_rows(&src, sw, &xt, &yt, &mut cache, &mut out, copy);
            let want = direct(&src, sw, sh, dw, dh);
            // Bit for bit: the same products, summed in the same order.
            let same = out
                .iter()
                .zip(&want)
                .all(|(a, b)| a.to_bits() == b.to_bits());
            assert!(same, "{sw}×{sh} → {dw}×{dh}");
        }
    }

    #[test]
    fn a_band_of_rows_is_the_same_rows_of_the_whole() {
        let (sw, sh, dw, dh) = (12, 9, 31, 26);
        let src: Vec<f32> = (0..sw * sh).map(|i| (i % 13) as f32 - 6.0).collect();
        let (xt, yt) = (taps(sw, dw), taps(sh, dh));
        let mut cache = vec![0.0; 2 * dw];
        let mut whole = vec![0.0; dw * dh];
        resample_rows(&src, sw, &xt, &yt, &mut cache, &mut whole, copy);
        let (first, rows) = (11, 7);
        let mut band = vec![0.0; dw * rows];
        resample_rows(
            &src,
            sw,
            &xt,
            &yt[first..first + rows],
            &mut cache,
            &mut band,
            copy,
        );
        assert_eq!(band, whole[first * dw..(first + rows) * dw]);
    }
}
