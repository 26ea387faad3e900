//! The four inner loops of the preprocessing passes: the horizontal and the vertical pass of each
//! resize, over precomputed tap tables and contiguous rows. The two kinds of arithmetic share
//! nothing, so each is a family of its own: [`float`], the image path's float32 sums, and [`pil`],
//! fixed-point sums (PIL's), which serve the video path and SAM 3's 8-bit resize (torchvision's,
//! whose sums are PIL's at another precision: `torchvision_u8`). This module holds what they
//! share: the layout of a resampled row, the horizontal pass's table and whether the AVX2 kernels
//! may run.
//!
//! A horizontally resampled row holds [`LANES`] values per output pixel: the pixel's channels in
//! the source's order (RGB's fourth lane and gray's lanes 1–3 hold whatever follows, never
//! read). So the horizontal pass is one four-lane multiply-add per tap and output pixel, with no
//! per-channel shuffling; the vertical pass is element-wise over those rows, then writes each
//! channel to its plane.
//!
//! On x86_64 the loops are SSE2 (part of every x86_64 CPU, so no detection), with one bound check
//! per row rather than per tap; elsewhere plain loops with the same arithmetic. Either way the
//! float path performs the IEEE operations of the previous implementation (the tests' oracle,
//! `preprocess/oracle.rs`) in the same order, and the integer path computes PIL's 32-bit
//! fixed-point sums exactly, so both give the same bits.

mod float;
mod pil;

pub(super) use float::{float_horizontal, float_horizontal_table, float_vertical, FloatOutput};
pub(super) use pil::{
    pil_horizontal, pil_horizontal_table, pil_vertical, pil_vertical_pairs, Bytes, Normalised,
    PilOutput, PIL_BITS,
};

/// Values per pixel in a horizontally resampled row.
pub(super) const LANES: usize = 4;

/// The horizontal pass's table: output `x` reads the `taps` pixels from `first[x]`, with its
/// weights in `weights[x · taps..]`. Built once per image size; `reach` bounds every read.
pub(super) struct Horizontal<W> {
    taps: usize,
    first: Vec<usize>,
    weights: Vec<W>,
    /// One past the last pixel any output reads (its window rounded up to a tap pair).
    reach: usize,
}

impl<W> Horizontal<W> {
    /// Source values a widened row must hold for every read (`channels` per pixel): the pixels up
    /// to `reach`, plus eight spare values (a kernel may read eight from a window's last pixel).
    pub(super) fn wide_len(&self, channels: usize) -> usize {
        self.reach * channels + 8
    }
}

/// Whether the AVX2 kernels may run: AVX2 and FMA (which every CPU with AVX2 has; PIL's vertical
/// pass uses both), checked once, then cached by the standard library. Tests can turn them off
/// to hold the SSE2 kernels to the same results.
#[cfg(target_arch = "x86_64")]
fn avx2() -> bool {
    #[cfg(test)]
    if tests::SSE2_ONLY.load(std::sync::atomic::Ordering::Relaxed) {
        return false;
    }
    std::arch::is_x86_feature_detected!("avx2") && std::arch::is_x86_feature_detected!("fma")
}

#[cfg(test)]
pub(super) mod tests {
    /// Set, the kernels take their SSE2 paths even where AVX2 is present (both must give the
    /// same bits, so tests running meanwhile see no difference).
    pub(crate) static SSE2_ONLY: std::sync::atomic::AtomicBool =
        std::sync::atomic::AtomicBool::new(false);
}
