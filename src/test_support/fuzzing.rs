//! The properties the fuzz targets check, one function per parser of untrusted bytes. The
//! cargo-fuzz targets (`fuzz/fuzz_targets/`) call them, and `tests/it/fuzz_regressions.rs` replays
//! the seed corpora and every input that once crashed (`fuzz/regressions/<target>/`) through
//! the same functions, so a crash found by fuzzing stays fixed. Each panics when a property
//! fails. Only `rewrites` needs ONNX Runtime (found as the library finds it). Not part of the
//! library's API.

use crate::image::{ImageView, PixelFormat, MAX_SIDE};
use crate::predictor::{prompt_points, validate_prompts, Point, Prompt, MAX_OBJECTS, MAX_POINTS};

/// The fuzz targets, by name (the directories of their corpora and regressions).
pub fn targets() -> [&'static str; 5] {
    [
        "embedding_file",
        "onnx_split",
        "pixels",
        "prompts",
        "rewrites",
    ]
}

/// Runs target `name` on one input.
pub fn run(name: &str, data: &[u8]) {
    match name {
        "embedding_file" => embedding_file(data),
        "onnx_split" => onnx_split(data),
        "pixels" => pixels(data),
        "prompts" => prompts(data),
        "rewrites" => rewrites(data),
        other => panic!("no fuzz target `{other}`"),
    }
}

/// Embedding files: any bytes give Ok or a format error, never a panic, never an allocation
/// driven by an unchecked size; a valid file's sizes add up.
pub fn embedding_file(data: &[u8]) {
    match crate::embedding_file::validate_bytes(data) {
        Ok(header) => {
            let n = u64::from_le_bytes(data[..8].try_into().unwrap()) as usize;
            assert_eq!(8 + n + header.payload_len(), data.len());
        }
        Err(crate::Error::EmbeddingFormat(_)) => {}
        Err(other) => panic!("unexpected error kind: {other:?}"),
    }
}

/// ONNX models: the initializer splitter gives Ok or Err, and every initializer it reports lies
/// inside the input.
pub fn onnx_split(data: &[u8]) {
    if let Ok(split) = crate::onnx::split::split(data, 1) {
        for init in &split.initializers {
            assert!(init.offset + init.len <= data.len());
        }
    }
}

/// Reads little-endian integers off the front of a fuzz input.
struct Reader<'a>(&'a [u8]);

impl Reader<'_> {
    fn bytes<const N: usize>(&mut self) -> [u8; N] {
        let mut out = [0u8; N];
        let n = N.min(self.0.len());
        out[..n].copy_from_slice(&self.0[..n]);
        self.0 = &self.0[n..];
        out
    }
    fn u8(&mut self) -> u8 {
        self.bytes::<1>()[0]
    }
    fn u32(&mut self) -> u32 {
        u32::from_le_bytes(self.bytes())
    }
    fn u64(&mut self) -> u64 {
        u64::from_le_bytes(self.bytes())
    }
    fn f32(&mut self) -> f32 {
        f32::from_bits(self.u32())
    }
}

/// Host pixel buffers: any width, height, stride, format and buffer length is either refused
/// with an invalid argument naming the width, height, stride or pixels, or accepted with every
/// row inside the buffer; an accepted image preprocesses (at a small size, for speed) into
/// finite values.
pub fn pixels(data: &[u8]) {
    let mut r = Reader(data);
    // Sizes as C passes them: 32-bit width and height, a pointer-sized stride (0 = packed).
    let width = r.u32() as usize;
    let height = r.u32() as usize;
    let stride = r.u64() as usize;
    let format = match r.u8() % 5 {
        0 => PixelFormat::Rgb,
        1 => PixelFormat::Bgr,
        2 => PixelFormat::Rgba,
        3 => PixelFormat::Bgra,
        _ => PixelFormat::Gray,
    };
    let size = 1 + (r.u8() % 48) as usize;
    let buffer = r.0;
    let stride = if stride == 0 {
        width.saturating_mul(format.channels())
    } else {
        stride
    };
    match ImageView::new(buffer, width, height, stride, format) {
        Ok(image) => {
            assert!((1..=MAX_SIDE).contains(&width) && (1..=MAX_SIDE).contains(&height));
            let last_row = (height - 1) as u128 * stride as u128;
            assert!(last_row + (width * format.channels()) as u128 <= buffer.len() as u128);
            let out = crate::preprocess::preprocess(&image, size);
            assert_eq!(out.len(), 3 * size * size);
            assert!(out.iter().all(|v| v.is_finite()));
        }
        Err(crate::Error::InvalidArgument { name, .. }) => {
            assert!(
                ["width", "height", "stride", "pixels"].contains(&name),
                "refused naming `{name}`"
            );
        }
        Err(other) => panic!("unexpected error kind: {other:?}"),
    }
}

/// Prompts: any batch (counts, coordinates with any bits: NaN, infinities, huge), any image
/// size and any mask input length is refused with an invalid argument, or accepted and turned
/// into point tensors whose coordinates are finite and inside the 1024 frame and whose labels
/// are SAM2's (−1 padding, 0/1 clicks, 2/3 box corners).
pub fn prompts(data: &[u8]) {
    let mut r = Reader(data);
    // An embedding's image is 1..=MAX_SIDE pixels a side (encode and load check it).
    let image = (1 + r.u32() % MAX_SIDE as u32, 1 + r.u32() % MAX_SIDE as u32);
    let objects = (r.u8() as usize) % (MAX_OBJECTS + 2);
    let low_res = 256;
    let mut batch = Vec::with_capacity(objects);
    for _ in 0..objects {
        let flags = r.u8();
        // Point counts up to the limit and just past it; most small.
        let count = match r.u8() {
            255 => MAX_POINTS + 1,
            254 => MAX_POINTS,
            n => (n % 8) as usize,
        };
        let points = (0..count)
            .map(|_| {
                let positive = r.u8() & 1 == 1;
                Point {
                    x: r.f32(),
                    y: r.f32(),
                    positive,
                }
            })
            .collect();
        let bbox = (flags & 1 == 1).then(|| [r.f32(), r.f32(), r.f32(), r.f32()]);
        let mask_input = (flags & 2 == 2).then(|| {
            let len = match flags >> 2 {
                0 => low_res * low_res - 1,
                1 => low_res * low_res + 1,
                _ => low_res * low_res,
            };
            let fill = r.f32();
            vec![if flags & 0x80 != 0 { fill } else { 0.5 }; len]
        });
        batch.push(Prompt {
            points,
            bbox,
            mask_input,
        });
    }
    match validate_prompts(&batch, image, low_res) {
        Ok(()) => {
            let (n, coords, labels) = prompt_points(&batch.iter().collect::<Vec<_>>(), image);
            assert!(n >= 1);
            assert_eq!(coords.len(), objects * n * 2);
            assert_eq!(labels.len(), objects * n);
            assert!(
                coords
                    .iter()
                    .all(|c| c.is_finite() && (0.0..=1024.0).contains(c)),
                "coordinates outside the 1024 frame"
            );
            assert!(labels
                .iter()
                .all(|l| [-1.0, 0.0, 1.0, 2.0, 3.0].contains(l)));
        }
        Err(crate::Error::InvalidArgument { .. }) => {}
        Err(other) => panic!("unexpected error kind: {other:?}"),
    }
}

/// The load-time rewrites: a near-miss attention block drawn from the bytes (a factor on its
/// scores of any shape, a softmax over any axis, extra readers, shared initializers, free token
/// counts, lying `value_info`, the seed of its numbers: `NearMiss::from_bytes`) computes the same
/// through ONNX Runtime rewritten as written, whether its core is fused (byte 6 even) or left as
/// exported for its size (odd), within float noise.
pub fn rewrites(data: &[u8]) {
    let near = crate::rewrite::corpus::NearMiss::from_bytes(data);
    let min_scores = if data.get(6).is_some_and(|b| b & 1 == 1) {
        i64::MAX
    } else {
        0
    };
    if let Err(e) = crate::rewrite::corpus::check(&near, min_scores) {
        panic!("{e}");
    }
}
