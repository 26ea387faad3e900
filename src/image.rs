//! Host images as applications hold them: 8-bit pixels, a format, and a row stride.

use crate::error::{Error, Result};

/// Pixel layout of a host image. Values are part of the C ABI (`SAM2_PIXEL_*`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PixelFormat {
    Rgb,
    Bgr,
    Rgba,
    Bgra,
    Gray,
}

impl PixelFormat {
    /// Bytes per pixel.
    pub fn channels(self) -> usize {
        match self {
            PixelFormat::Rgb | PixelFormat::Bgr => 3,
            PixelFormat::Rgba | PixelFormat::Bgra => 4,
            PixelFormat::Gray => 1,
        }
    }

    /// Byte offsets of red, green and blue inside one pixel.
    pub(crate) fn rgb_offsets(self) -> [usize; 3] {
        match self {
            PixelFormat::Rgb | PixelFormat::Rgba => [0, 1, 2],
            PixelFormat::Bgr | PixelFormat::Bgra => [2, 1, 0],
            PixelFormat::Gray => [0, 0, 0],
        }
    }
}

/// A borrowed host image. `stride` is the distance in bytes between the starts of two rows.
#[derive(Debug, Clone, Copy)]
pub struct ImageView<'a> {
    pub data: &'a [u8],
    pub width: usize,
    pub height: usize,
    pub stride: usize,
    pub format: PixelFormat,
}

/// The largest side accepted, far beyond any camera, so sizes cannot overflow.
pub(crate) const MAX_SIDE: usize = 1 << 16;

impl<'a> ImageView<'a> {
    /// A tightly packed image (stride = width × channels).
    pub fn packed(
        data: &'a [u8],
        width: usize,
        height: usize,
        format: PixelFormat,
    ) -> Result<Self> {
        let stride = width
            .checked_mul(format.channels())
            .ok_or_else(|| Error::invalid("width", "too large"))?;
        Self::new(data, width, height, stride, format)
    }

    /// Checks sizes against the buffer: every row must fit.
    pub fn new(
        data: &'a [u8],
        width: usize,
        height: usize,
        stride: usize,
        format: PixelFormat,
    ) -> Result<Self> {
        if width == 0 || width > MAX_SIDE {
            return Err(Error::invalid(
                "width",
                format!("must be in 1..={MAX_SIDE}, got {width}"),
            ));
        }
        if height == 0 || height > MAX_SIDE {
            return Err(Error::invalid(
                "height",
                format!("must be in 1..={MAX_SIDE}, got {height}"),
            ));
        }
        let row_bytes = width * format.channels();
        if stride < row_bytes {
            return Err(Error::invalid(
                "stride",
                format!(
                    "{stride} bytes is less than one row ({width} pixels × {} bytes = {row_bytes})",
                    format.channels()
                ),
            ));
        }
        // A stride from C can be anything: the product is checked, never wrapped, so a huge stride
        // is refused here instead of reaching the row arithmetic of preprocessing.
        let Some(needed) = stride
            .checked_mul(height - 1)
            .and_then(|n| n.checked_add(row_bytes))
        else {
            return Err(Error::invalid(
                "stride",
                format!(
                    "{stride} bytes × {} rows overflows the address space",
                    height - 1
                ),
            ));
        };
        if data.len() < needed {
            return Err(Error::invalid(
                "pixels",
                format!(
                    "buffer holds {} bytes, the image needs {needed}",
                    data.len()
                ),
            ));
        }
        Ok(ImageView {
            data,
            width,
            height,
            stride,
            format,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_stride_whose_rows_overflow_is_refused_naming_the_stride() {
        let data = [0u8; 64];
        for stride in [usize::MAX, usize::MAX / 2 + 1, usize::MAX / 3 + 1] {
            match ImageView::new(&data, 4, 3, stride, PixelFormat::Rgb) {
                Err(Error::InvalidArgument { name, .. }) => {
                    assert!(name == "stride" || name == "pixels", "{stride}: {name}")
                }
                other => panic!("stride {stride}: expected an invalid argument, got {other:?}"),
            }
        }
        // The wrapping case proper: stride × 2 is 0 modulo 2^64, which would "fit" 64 bytes.
        assert!(matches!(
            ImageView::new(&data, 4, 3, usize::MAX / 2 + 1, PixelFormat::Rgb),
            Err(Error::InvalidArgument { name: "stride", .. })
        ));
        ImageView::new(&data, 4, 3, 16, PixelFormat::Rgb).unwrap();
    }
}
