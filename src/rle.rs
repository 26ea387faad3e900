//! Run-length encoded masks in COCO's convention, the form masks are kept in when there are many
//! (segment everything) and the form annotation tools store them in.
//!
//! COCO reads a mask in column-major order (down the first column, then the next) and alternates
//! runs of 0 and 1, starting with a (possibly empty) run of 0. The library's dense masks are
//! row-major, so encoding walks columns. The compressed string is pycocotools' text form: each
//! count after the second is written as its difference from the count two before it, in 5-bit
//! groups, least significant first, each group offset by 48 (`'0'`) with bit 5 set when another
//! group follows and bit 4 carrying the sign in the last group.

use crate::error::{try_push, try_reserve, try_with_capacity, try_zeroed, Error, Result};

/// A binary mask as COCO run lengths.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rle {
    pub width: usize,
    pub height: usize,
    /// Alternating run lengths of 0 and 1 in column-major order, starting with 0s.
    pub counts: Vec<u32>,
}

impl Rle {
    /// Encodes a row-major `height × width` mask (any non-zero byte is foreground). Panics when
    /// the counts' memory cannot be had; [`Rle::try_encode`] returns the error instead.
    pub fn encode(mask: &[u8], width: usize, height: usize) -> Rle {
        Self::try_encode(mask, width, height).unwrap_or_else(|e| panic!("{e}"))
    }

    /// Encodes a row-major `height × width` mask (any non-zero byte is foreground), or
    /// [`Error::OutOfMemory`] when the counts (up to one per pixel) cannot be held.
    pub fn try_encode(mask: &[u8], width: usize, height: usize) -> Result<Rle> {
        assert_eq!(mask.len(), width * height, "mask size");
        let mut counts = Vec::new();
        let mut current = 0u8;
        let mut run = 0u32;
        for x in 0..width {
            for y in 0..height {
                let value = (mask[y * width + x] != 0) as u8;
                if value != current {
                    try_push(&mut counts, run, "the run lengths of a mask")?;
                    run = 0;
                    current = value;
                }
                run += 1;
            }
        }
        try_push(&mut counts, run, "the run lengths of a mask")?;
        // Kept masks are held by the thousand (segment everything): no doubling slack. A copy
        // rather than `shrink_to_fit`, whose reallocation aborts when it fails.
        if counts.capacity() > counts.len() + counts.len() / 4 + 16 {
            let mut exact = try_with_capacity(counts.len(), "the run lengths of a mask")?;
            exact.extend_from_slice(&counts);
            counts = exact;
        }
        Ok(Rle {
            width,
            height,
            counts,
        })
    }

    /// Bytes this mask holds (its counts), for memory budgets.
    pub(crate) fn held_bytes(&self) -> usize {
        self.counts.capacity() * std::mem::size_of::<u32>() + std::mem::size_of::<Rle>()
    }

    /// Writes the mask row-major into `out` (`height × width` bytes, 1 = foreground).
    pub fn decode_into(&self, out: &mut [u8]) -> Result<()> {
        let total = self.width * self.height;
        if out.len() != total {
            return Err(Error::invalid(
                "out",
                format!(
                    "holds {} bytes; the {}×{} mask needs {total}",
                    out.len(),
                    self.width,
                    self.height
                ),
            ));
        }
        if self.counts.iter().map(|&c| c as u64).sum::<u64>() != total as u64 {
            return Err(Error::invalid(
                "rle",
                format!("its runs do not add up to {}×{}", self.width, self.height),
            ));
        }
        let mut at = 0usize;
        for (i, &run) in self.counts.iter().enumerate() {
            let value = (i % 2) as u8;
            for k in at..at + run as usize {
                let (x, y) = (k / self.height, k % self.height);
                out[y * self.width + x] = value;
            }
            at += run as usize;
        }
        Ok(())
    }

    /// The dense row-major mask.
    pub fn decode(&self) -> Result<Vec<u8>> {
        let mut out = try_zeroed(self.width * self.height, "a decoded mask")?;
        self.decode_into(&mut out)?;
        Ok(out)
    }

    /// Foreground pixels.
    pub fn area(&self) -> u64 {
        self.counts
            .iter()
            .skip(1)
            .step_by(2)
            .map(|&c| c as u64)
            .sum()
    }

    /// Inclusive `[x_min, y_min, x_max, y_max]` of the foreground, `None` for an empty mask.
    pub fn bbox(&self) -> Option<[u32; 4]> {
        let h = self.height;
        let (mut x0, mut y0, mut x1, mut y1) = (usize::MAX, usize::MAX, 0, 0);
        let mut at = 0usize;
        for (i, &run) in self.counts.iter().enumerate() {
            let run = run as usize;
            if i % 2 == 1 && run > 0 {
                let (first, last) = (at, at + run - 1);
                let (fx, fy) = (first / h, first % h);
                let (lx, ly) = (last / h, last % h);
                x0 = x0.min(fx);
                x1 = x1.max(lx);
                // A run within one column spans fy..=ly; one across columns covers whole columns.
                if fx == lx {
                    y0 = y0.min(fy);
                    y1 = y1.max(ly);
                } else {
                    y0 = 0;
                    y1 = h - 1;
                }
            }
            at += run;
        }
        (x0 != usize::MAX).then_some([x0 as u32, y0 as u32, x1 as u32, y1 as u32])
    }

    /// Pixels set in both masks (of the same size).
    pub fn intersection(&self, other: &Rle) -> u64 {
        let (mut a, mut b) = (Runs::new(&self.counts), Runs::new(&other.counts));
        let mut both = 0u64;
        while let (Some((va, la)), Some((vb, lb))) = (a.peek(), b.peek()) {
            let step = la.min(lb);
            if va && vb {
                both += step as u64;
            }
            a.advance(step);
            b.advance(step);
        }
        both
    }

    /// Intersection over union with another mask of the same size (0 for two empty masks).
    pub fn iou(&self, other: &Rle) -> f64 {
        let both = self.intersection(other);
        let union = self.area() + other.area() - both;
        if union == 0 {
            0.0
        } else {
            both as f64 / union as f64
        }
    }

    /// pycocotools' compressed string form of the counts. Panics when its memory cannot be had;
    /// [`Rle::try_to_coco_string`] returns the error instead.
    pub fn to_coco_string(&self) -> String {
        self.try_to_coco_string().unwrap_or_else(|e| panic!("{e}"))
    }

    /// pycocotools' compressed string form of the counts, or [`Error::OutOfMemory`].
    pub fn try_to_coco_string(&self) -> Result<String> {
        let mut out = Vec::new();
        for (i, &count) in self.counts.iter().enumerate() {
            let mut x = count as i64;
            if i > 2 {
                x -= self.counts[i - 2] as i64;
            }
            // At most 7 characters (5 bits each) per count.
            try_reserve(&mut out, 8, "the compressed run lengths of a mask")?;
            loop {
                let mut c = (x & 0x1f) as u8;
                x >>= 5;
                let more = if c & 0x10 != 0 { x != -1 } else { x != 0 };
                if more {
                    c |= 0x20;
                }
                out.push(c + 48);
                if !more {
                    break;
                }
            }
        }
        // Every byte is in 48..112: ASCII.
        Ok(String::from_utf8(out).unwrap_or_else(|_| unreachable!("ASCII")))
    }

    /// Parses pycocotools' compressed string for a `height × width` mask.
    pub fn from_coco_string(text: &str, width: usize, height: usize) -> Result<Rle> {
        let bad = |why: &str| Error::invalid("counts", format!("not a COCO RLE string: {why}"));
        let bytes = text.as_bytes();
        let mut counts: Vec<u32> = Vec::new();
        let mut p = 0;
        while p < bytes.len() {
            let (mut x, mut k) = (0i64, 0u32);
            loop {
                let Some(&byte) = bytes.get(p) else {
                    return Err(bad("it ends inside a count"));
                };
                if !(48..48 + 64).contains(&byte) || k > 12 {
                    return Err(bad("a character out of range"));
                }
                let c = (byte - 48) as i64;
                x |= (c & 0x1f) << (5 * k);
                p += 1;
                k += 1;
                if c & 0x20 == 0 {
                    if c & 0x10 != 0 {
                        x |= -1i64 << (5 * k);
                    }
                    break;
                }
            }
            let m = counts.len();
            if m > 2 {
                x += counts[m - 2] as i64;
            }
            let count = u32::try_from(x).map_err(|_| bad("a negative or huge run"))?;
            try_push(&mut counts, count, "the run lengths of a mask")?;
        }
        let total: u64 = counts.iter().map(|&c| c as u64).sum();
        if total != (width * height) as u64 {
            return Err(bad(&format!(
                "its runs add up to {total}, not {width}×{height}"
            )));
        }
        Ok(Rle {
            width,
            height,
            counts,
        })
    }
}

/// A cursor over alternating runs: the value (false for even runs) and what is left of the run.
struct Runs<'a> {
    counts: &'a [u32],
    index: usize,
    left: u32,
}

impl<'a> Runs<'a> {
    fn new(counts: &'a [u32]) -> Self {
        let mut runs = Runs {
            counts,
            index: 0,
            left: counts.first().copied().unwrap_or(0),
        };
        runs.skip_empty();
        runs
    }

    fn skip_empty(&mut self) {
        while self.left == 0 && self.index < self.counts.len() {
            self.index += 1;
            self.left = self.counts.get(self.index).copied().unwrap_or(0);
        }
    }

    fn peek(&self) -> Option<(bool, u32)> {
        (self.index < self.counts.len()).then_some((self.index % 2 == 1, self.left))
    }

    fn advance(&mut self, by: u32) {
        self.left -= by;
        self.skip_empty();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample(width: usize, height: usize, seed: u64) -> Vec<u8> {
        let mut state = seed;
        (0..width * height)
            .map(|_| {
                state = state
                    .wrapping_mul(6364136223846793005)
                    .wrapping_add(1442695040888963407);
                ((state >> 60) < 6) as u8
            })
            .collect()
    }

    #[test]
    fn counts_follow_coco_column_major_order() {
        // 3 wide, 2 high; column-major: (0,0)=0 (0,1)=1 | (1,0)=1 (1,1)=1 | (2,0)=0 (2,1)=0
        let mask = [0, 1, 0, 1, 1, 0];
        let rle = Rle::encode(&mask, 3, 2);
        assert_eq!(rle.counts, vec![1, 3, 2]);
        assert_eq!(rle.area(), 3);
        assert_eq!(rle.bbox(), Some([0, 0, 1, 1]));
        // A mask starting with foreground starts with an empty run of 0s.
        assert_eq!(Rle::encode(&[1, 0, 1, 0], 2, 2).counts, vec![0, 2, 2]);
    }

    #[test]
    fn encode_decode_and_strings_round_trip() {
        for (w, h, seed) in [(1, 1, 1), (7, 5, 2), (64, 48, 3), (300, 1, 4), (1, 300, 5)] {
            let mask = sample(w, h, seed);
            let rle = Rle::encode(&mask, w, h);
            assert_eq!(rle.decode().unwrap(), mask, "{w}x{h}");
            let text = rle.to_coco_string();
            assert_eq!(Rle::from_coco_string(&text, w, h).unwrap(), rle, "{w}x{h}");
            assert_eq!(rle.area(), mask.iter().map(|&v| v as u64).sum::<u64>());
        }
        let empty = Rle::encode(&[0; 12], 4, 3);
        assert_eq!(empty.bbox(), None);
        // 12 = 0b01100: one 5-bit group, no continuation, sign bit clear: '0' + 12.
        assert_eq!(empty.to_coco_string(), "<");
    }

    #[test]
    fn iou_and_bbox_agree_with_the_dense_masks() {
        let (w, h) = (33, 21);
        let a = sample(w, h, 7);
        let b = sample(w, h, 8);
        let both = a
            .iter()
            .zip(&b)
            .filter(|(x, y)| **x != 0 && **y != 0)
            .count() as u64;
        let either = a
            .iter()
            .zip(&b)
            .filter(|(x, y)| **x != 0 || **y != 0)
            .count() as f64;
        let (ra, rb) = (Rle::encode(&a, w, h), Rle::encode(&b, w, h));
        assert_eq!(ra.intersection(&rb), both);
        assert!((ra.iou(&rb) - both as f64 / either).abs() < 1e-12);
        let mut dense = vec![0u8; w * h];
        for (y, x) in [(3, 4), (10, 20), (5, 7)] {
            dense[y * w + x] = 1;
        }
        assert_eq!(Rle::encode(&dense, w, h).bbox(), Some([4, 3, 20, 10]));
    }

    #[test]
    fn malformed_strings_and_sizes_are_errors() {
        assert!(
            Rle::from_coco_string("0", 2, 2).is_err(),
            "runs do not add up"
        );
        assert!(
            Rle::from_coco_string("\u{7f}", 1, 1).is_err(),
            "out of range"
        );
        assert!(
            Rle::from_coco_string("o", 1, 1).is_err(),
            "ends inside a count"
        );
        let rle = Rle::encode(&[1, 0, 0, 1], 2, 2);
        assert!(rle.decode_into(&mut [0u8; 3]).is_err());
    }
}
