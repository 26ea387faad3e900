//! Reading the input image (PNG or JPEG, any bit depth, grey or colour, with or without alpha,
//! EXIF orientation applied) and writing the mask and overlay PNGs.

use std::io::{BufReader, Write};
use std::path::Path;

use image::{DynamicImage, ImageDecoder, ImageReader, Limits, RgbImage};

/// The largest image read by default, in pixels: 250 megapixels (a 200-megapixel phone photo,
/// 16320×12240, fits; so does a 15000×15000 scan). `--max-pixels N` changes it.
pub const DEFAULT_MAX_PIXELS: u64 = 250_000_000;

/// What a decoder may allocate besides the image itself (the image crate's `max_alloc`): a row,
/// and metadata such as a PNG's ICC profile, which a few hundred compressed bytes can inflate to
/// gigabytes. 64 MiB holds rows of 8 million 16-bit RGBA pixels and any real profile; the image
/// buffer itself is bounded by the pixel limit, checked before it is allocated.
const DECODER_MAX_ALLOC: u64 = 64 * 1024 * 1024;

/// An input image as 8-bit RGB, upright.
pub struct Picture {
    pub rgb: RgbImage,
    /// The EXIF orientation that was applied (1 when none).
    pub orientation: u8,
}

/// Reads `path` (a regular file only: a FIFO or a device is refused before it is read), refusing
/// an image whose header declares more than `max_pixels` pixels before anything of its size is
/// allocated; the decoder's own allocations are held to [`DECODER_MAX_ALLOC`].
pub fn load(path: &Path, max_pixels: u64) -> Result<Picture, String> {
    let file = sam2::__private::files::open_regular(path, "a PNG or JPEG image")
        .map_err(|e| e.to_string())?;
    let mut reader = ImageReader::new(BufReader::new(file))
        .with_guessed_format()
        .map_err(|e| format!("cannot read image {}: {e}", path.display()))?;
    let mut limits = Limits::default();
    limits.max_alloc = Some(DECODER_MAX_ALLOC);
    reader.limits(limits);
    let mut decoder = reader.into_decoder().map_err(|e| {
        format!(
            "{}: not a PNG or JPEG image this command can read ({e})",
            path.display()
        )
    })?;
    let (w, h) = decoder.dimensions();
    let pixels = w as u64 * h as u64;
    if pixels > max_pixels {
        return Err(format!(
            "{} declares {w}×{h} pixels ({:.1} megapixels), over the limit of {max_pixels} \
             pixels ({:.1} megapixels); --max-pixels N raises it",
            path.display(),
            pixels as f64 / 1e6,
            max_pixels as f64 / 1e6
        ));
    }
    let orientation = decoder
        .orientation()
        .unwrap_or(image::metadata::Orientation::NoTransforms);
    let mut picture = DynamicImage::from_decoder(decoder)
        .map_err(|e| format!("cannot decode image {}: {e}", path.display()))?;
    picture.apply_orientation(orientation);
    // 16-bit samples are scaled to 8 bits, grey is spread over the three channels and alpha is
    // dropped (the model sees colours, not transparency).
    Ok(Picture {
        rgb: picture.into_rgb8(),
        orientation: orientation.to_exif(),
    })
}

fn png(
    out: &mut dyn Write,
    pixels: &[u8],
    width: u32,
    height: u32,
    colour: image::ExtendedColorType,
) -> std::io::Result<()> {
    use image::ImageEncoder;
    image::codecs::png::PngEncoder::new(out)
        .write_image(pixels, width, height, colour)
        .map_err(std::io::Error::other)
}

/// Writes a 0/255 greyscale PNG of a row-major 0/1 mask.
pub fn write_mask(
    mask: &[u8],
    width: u32,
    height: u32,
    out: &mut dyn Write,
) -> std::io::Result<()> {
    let grey: Vec<u8> = mask.iter().map(|&v| if v != 0 { 255 } else { 0 }).collect();
    png(out, &grey, width, height, image::ExtendedColorType::L8)
}

/// The image with the mask tinted over it, its outline drawn, and the prompt marked: positive
/// points green, negative red, the box yellow.
pub fn write_overlay(
    picture: &RgbImage,
    mask: &[u8],
    points: &[sam2::Point],
    bbox: Option<[f32; 4]>,
    out_file: &mut dyn Write,
) -> std::io::Result<()> {
    let (w, h) = picture.dimensions();
    let mut out = picture.clone();
    let inside = |x: i64, y: i64| {
        x >= 0 && y >= 0 && x < w as i64 && y < h as i64 && mask[(y * w as i64 + x) as usize] != 0
    };
    for y in 0..h as i64 {
        for x in 0..w as i64 {
            if !inside(x, y) {
                continue;
            }
            let edge =
                !inside(x - 1, y) || !inside(x + 1, y) || !inside(x, y - 1) || !inside(x, y + 1);
            let p = out.get_pixel_mut(x as u32, y as u32);
            let tint = [30u16, 144, 255];
            for (channel, tint) in p.0.iter_mut().zip(tint) {
                *channel = if edge {
                    tint as u8
                } else {
                    ((*channel as u16 + tint) / 2) as u8
                };
            }
        }
    }
    let mut put = |x: i64, y: i64, colour: [u8; 3]| {
        if x >= 0 && y >= 0 && x < w as i64 && y < h as i64 {
            out.put_pixel(x as u32, y as u32, image::Rgb(colour));
        }
    };
    if let Some([x1, y1, x2, y2]) = bbox {
        let (x1, y1, x2, y2) = (x1 as i64, y1 as i64, x2 as i64, y2 as i64);
        for x in x1..=x2 {
            put(x, y1, [255, 220, 0]);
            put(x, y2, [255, 220, 0]);
        }
        for y in y1..=y2 {
            put(x1, y, [255, 220, 0]);
            put(x2, y, [255, 220, 0]);
        }
    }
    let r = (w.max(h) as i64 / 150).max(3);
    for p in points {
        let colour = if p.positive {
            [0, 230, 64]
        } else {
            [235, 30, 30]
        };
        let (cx, cy) = (p.x as i64, p.y as i64);
        for d in -r..=r {
            for t in -1..=1 {
                put(cx + d, cy + t, colour);
                put(cx + t, cy + d, colour);
            }
        }
    }
    png(out_file, out.as_raw(), w, h, image::ExtendedColorType::Rgb8)
}

/// The image with each labelled region (`labels`: 0 = none, k = the k-th mask) tinted in a colour
/// of its own and outlined.
pub fn write_labels_overlay(
    picture: &RgbImage,
    labels: &[u32],
    out_file: &mut dyn Write,
) -> std::io::Result<()> {
    let out = labels_tinted(picture, labels);
    let (w, h) = out.dimensions();
    png(out_file, out.as_raw(), w, h, image::ExtendedColorType::Rgb8)
}

/// The image with each labelled region (`labels`: 0 = none, k = the k-th mask) tinted in a colour
/// of its own and outlined.
pub fn labels_tinted(picture: &RgbImage, labels: &[u32]) -> RgbImage {
    let (w, h) = picture.dimensions();
    let (w, h) = (w as usize, h as usize);
    let mut out = picture.clone();
    let colour = |k: u32| {
        // Hues spread by the golden angle, so neighbouring labels differ.
        let hue = (k as f32 * 137.508).rem_euclid(360.0) / 60.0;
        let x = 1.0 - (hue % 2.0 - 1.0).abs();
        let (r, g, b) = match hue as u32 {
            0 => (1.0, x, 0.0),
            1 => (x, 1.0, 0.0),
            2 => (0.0, 1.0, x),
            3 => (0.0, x, 1.0),
            4 => (x, 0.0, 1.0),
            _ => (1.0, 0.0, x),
        };
        [(r * 255.0) as u16, (g * 255.0) as u16, (b * 255.0) as u16]
    };
    for y in 0..h {
        for x in 0..w {
            let k = labels[y * w + x];
            if k == 0 {
                continue;
            }
            let other = |xx: usize, yy: usize| labels[yy * w + xx] != k;
            let edge = x == 0
                || y == 0
                || x + 1 == w
                || y + 1 == h
                || other(x - 1, y)
                || other(x + 1, y)
                || other(x, y - 1)
                || other(x, y + 1);
            let tint = colour(k);
            let p = out.get_pixel_mut(x as u32, y as u32);
            for (channel, tint) in p.0.iter_mut().zip(tint) {
                *channel = if edge {
                    tint as u8
                } else {
                    ((*channel as u16 + tint) / 2) as u8
                };
            }
        }
    }
    out
}
