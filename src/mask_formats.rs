//! The forms a prediction's masks can be handed out in besides the dense bytes: copied into a
//! caller's buffer, cropped to their box, COCO run lengths, polygons with holes.

use crate::error::{Error, Result};
use crate::polygon::{self, Polygon};
use crate::predictor::Prediction;
use crate::rle::Rle;

impl Prediction {
    /// Mask `k` as COCO run lengths. Panics when the memory cannot be had; [`Prediction::try_rle`]
    /// returns the error instead.
    pub fn rle(&self, k: usize) -> Rle {
        Rle::encode(self.mask(k), self.width, self.height)
    }

    /// Mask `k` as COCO run lengths, or [`Error::OutOfMemory`].
    pub fn try_rle(&self, k: usize) -> Result<Rle> {
        Rle::try_encode(self.mask(k), self.width, self.height)
    }

    /// Mask `k` as polygons with holes, simplified with `tolerance` pixels (see [`Polygon`]), or
    /// [`Error::OutOfMemory`] when the tracer's memory (about three bytes a pixel, and more for
    /// ragged masks) cannot be had.
    pub fn polygons(&self, k: usize, tolerance: f32) -> Result<Vec<Polygon>> {
        polygon::try_polygons(self.mask(k), self.width, self.height, tolerance)
    }

    /// Copies mask `k` into `out`, which must hold at least `width × height` bytes.
    pub fn copy_mask_into(&self, k: usize, out: &mut [u8]) -> Result<()> {
        let mask = self.mask(k);
        if out.len() < mask.len() {
            return Err(Error::invalid(
                "size",
                format!(
                    "is {}, but the {}×{} mask needs {} bytes",
                    out.len(),
                    self.width,
                    self.height,
                    mask.len()
                ),
            ));
        }
        out[..mask.len()].copy_from_slice(mask);
        Ok(())
    }

    /// The inclusive box of mask `k` and the byte count of the mask cropped to it (0 and `None`
    /// for an empty mask).
    pub fn crop_size(&self, k: usize) -> (Option<[u32; 4]>, usize) {
        if self.areas[k] == 0 {
            return (None, 0);
        }
        let b = self.boxes[k];
        let size = (b[2] - b[0] + 1) as usize * (b[3] - b[1] + 1) as usize;
        (Some(b), size)
    }

    /// Copies mask `k` cropped to its box into `out` (row-major, `box width × box height`
    /// bytes) and returns the box; `None` (nothing written) for an empty mask.
    pub fn crop_into(&self, k: usize, out: &mut [u8]) -> Result<Option<[u32; 4]>> {
        let (bbox, size) = self.crop_size(k);
        let Some(b) = bbox else { return Ok(None) };
        if out.len() < size {
            return Err(Error::BufferTooSmall {
                needed: size,
                given: out.len(),
            });
        }
        let mask = self.mask(k);
        let (x0, x1) = (b[0] as usize, b[2] as usize + 1);
        let crop_w = x1 - x0;
        for (row, y) in (b[1] as usize..=b[3] as usize).enumerate() {
            out[row * crop_w..(row + 1) * crop_w]
                .copy_from_slice(&mask[y * self.width + x0..y * self.width + x1]);
        }
        Ok(Some(b))
    }
}
