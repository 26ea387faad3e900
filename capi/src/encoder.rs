//! `sam2_encoder`: loading an image encoder and encoding host pixels.

use std::ffi::c_char;
use std::sync::Arc;

use super::c_enum::c_enum;
use super::device::{
    sam2_provider, session_options, SAM2_ON_MISMATCH_FALLBACK, SAM2_OPTIMIZATION_ALL,
    SAM2_WEIGHTS_SHARED,
};
use super::embedding::sam2_embedding;
use super::{
    arg_out, arg_slice, arg_str, copy_out_str, guard, handle_ref, impl_options, read_options,
    sam2_status, Handle,
};

use sam2::Error;
use sam2::{Encoder, EncoderOptions, OutputTarget};
use sam2::{ImageView, PixelFormat};

/// Pixel format: 3 bytes per pixel, R G B.
pub const SAM2_PIXEL_RGB: u32 = 0;
/// Pixel format: 3 bytes per pixel, B G R (Windows bitmaps, OpenCV).
pub const SAM2_PIXEL_BGR: u32 = 1;
/// Pixel format: 4 bytes per pixel, R G B A (alpha ignored).
pub const SAM2_PIXEL_RGBA: u32 = 2;
/// Pixel format: 4 bytes per pixel, B G R A (alpha ignored).
pub const SAM2_PIXEL_BGRA: u32 = 3;
/// Pixel format: 1 byte per pixel, gray.
pub const SAM2_PIXEL_GRAY: u32 = 4;

c_enum! {
    /// `SAM2_PIXEL_*` ↔ [`PixelFormat`].
    pub(crate) PixelFormatCodes: u32 => PixelFormat {
        SAM2_PIXEL_RGB => PixelFormat::Rgb,
        SAM2_PIXEL_BGR => PixelFormat::Bgr,
        SAM2_PIXEL_RGBA => PixelFormat::Rgba,
        SAM2_PIXEL_BGRA => PixelFormat::Bgra,
        SAM2_PIXEL_GRAY => PixelFormat::Gray,
    }
}

/// Encoder output binding: keep the embedding on the execution device (default).
pub const SAM2_OUTPUT_DEVICE: u32 = 0;
/// Encoder output binding: place the embedding in host memory (so it can be saved).
pub const SAM2_OUTPUT_HOST: u32 = 1;

c_enum! {
    /// `SAM2_OUTPUT_*` ↔ [`OutputTarget`].
    pub(crate) OutputTargetCodes: u32 => OutputTarget {
        SAM2_OUTPUT_DEVICE => OutputTarget::Device,
        SAM2_OUTPUT_HOST => OutputTarget::Host,
    }
}

/// An image encoder. Opaque; create with `sam2_encoder_new`, release with `sam2_encoder_free`.
/// Thread-safe: `sam2_encode` may be called from several threads at once.
pub struct sam2_encoder {
    _opaque: [u8; 0],
}
impl Handle for sam2_encoder {
    /// Shared with the caches and background encodes that use it.
    type Inner = Arc<Encoder>;
}

/// Options of `sam2_encoder_new`. Initialise with `sam2_encoder_options_init`, then change fields.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct sam2_encoder_options {
    /// `sizeof(sam2_encoder_options)`; lets the struct grow without breaking older callers.
    pub struct_size: u32,
    /// `SAM2_OUTPUT_DEVICE` (default) or `SAM2_OUTPUT_HOST`.
    pub output_target: u32,
    /// Intra-op threads of the session; 0 lets ONNX Runtime choose (one per core).
    pub intra_threads: u32,
    /// Execution providers wanted, in order of preference (read during `sam2_encoder_new`
    /// only); NULL with `provider_count` 0 means the CPU.
    pub providers: *const sam2_provider,
    pub provider_count: usize,
    /// `SAM2_ON_MISMATCH_FALLBACK` (default) or `SAM2_ON_MISMATCH_FAIL`: what to do when the
    /// first requested provider is a GPU one the session did not get.
    pub on_device_mismatch: u32,
    /// `SAM2_WEIGHTS_SHARED` (default) or `SAM2_WEIGHTS_COPY`.
    pub weight_sharing: u32,
    /// `SAM2_OPTIMIZATION_ALL` (default), `SAM2_OPTIMIZATION_BASIC` or `SAM2_OPTIMIZATION_NONE`.
    pub graph_optimization: u32,
    /// Load-time rewrites turned off: a sum of `SAM2_REWRITE_*` bits (0, the default: every
    /// rewrite the model allows; `SAM2_REWRITE_ALL`: the graph as exported). For ruling one out
    /// when it is suspected; sessions with different sets hold different weights.
    pub disabled_rewrites: u64,
}

// Earlier versions of `sam2_encoder_options`: the first layout, 12 bytes; then up to
// `graph_optimization`, 48 bytes.
impl_options!(sam2_encoder_options, earlier_sizes: [12, 48]);

impl Default for sam2_encoder_options {
    fn default() -> Self {
        sam2_encoder_options {
            struct_size: std::mem::size_of::<Self>() as u32,
            output_target: SAM2_OUTPUT_DEVICE,
            intra_threads: 0,
            providers: std::ptr::null(),
            provider_count: 0,
            on_device_mismatch: SAM2_ON_MISMATCH_FALLBACK,
            weight_sharing: SAM2_WEIGHTS_SHARED,
            graph_optimization: SAM2_OPTIMIZATION_ALL,
            disabled_rewrites: 0,
        }
    }
}

/// Fills `options` with the defaults and sets its `struct_size`. Pass
/// `sizeof(sam2_encoder_options)` as `struct_size`: exactly that many bytes are written, so a
/// caller built against an older header (a smaller struct) is safe with a newer library.
#[no_mangle]
pub extern "C" fn sam2_encoder_options_init(
    options: *mut sam2_encoder_options,
    struct_size: usize,
) -> sam2_status {
    super::init_options(options, struct_size)
}

/// The pixel arguments shared by the encode functions, checked against each other.
pub(crate) fn image_arg<'a>(
    pixels: *const u8,
    pixels_len: usize,
    width: u32,
    height: u32,
    stride: usize,
    pixel_format: u32,
) -> Result<ImageView<'a>, Error> {
    if pixels.is_null() {
        return Err(Error::NullArgument("pixels"));
    }
    let format = PixelFormatCodes::parse(pixel_format, "pixel_format")?;
    let data = arg_slice(pixels, pixels_len, "pixels")?;
    let stride = if stride == 0 {
        (width as usize).saturating_mul(format.channels())
    } else {
        stride
    };
    ImageView::new(data, width as usize, height as usize, stride, format)
}

fn encoder_options(options: &sam2_encoder_options) -> Result<EncoderOptions, Error> {
    let output_target = OutputTargetCodes::parse(options.output_target, "options.output_target")?;
    let mut out = EncoderOptions {
        output_target,
        ..Default::default()
    };
    out.session = session_options(
        options.intra_threads,
        options.providers,
        options.provider_count,
        options.on_device_mismatch,
        options.weight_sharing,
        options.graph_optimization,
        options.disabled_rewrites,
    )?;
    Ok(out)
}

/// Loads an image encoder (a SAM2 encoder exported to ONNX; the contract is recognised from its
/// input and output names).
///
/// `model_path`: NUL-terminated UTF-8 path. `options`: NULL for the defaults. On success `*out`
/// receives a new encoder. Errors: `SAM2_ERR_MODEL` (unreadable or unrecognised model, the message
/// lists the names expected and found), `SAM2_ERR_IO`, `SAM2_ERR_RUNTIME_NOT_FOUND`,
/// `SAM2_ERR_INVALID_ARGUMENT`, `SAM2_ERR_ENVIRONMENT_CONFIGURATION` (a GPU provider that is not
/// available, with `SAM2_ON_MISMATCH_FAIL`).
///
/// The caller owns `*out` and frees it with `sam2_encoder_free`. Out-parameters are untouched on
/// failure.
#[no_mangle]
pub extern "C" fn sam2_encoder_new(
    model_path: *const c_char,
    options: *const sam2_encoder_options,
    out: *mut *mut sam2_encoder,
) -> sam2_status {
    guard(|| {
        let path = arg_str(model_path, "model_path")?;
        let out = arg_out(out, "out")?;
        let options = read_options(options, "options")?;
        let options = encoder_options(&options)?;
        let encoder = Encoder::new(path, &options).map_err(super::option_names)?;
        out.set(super::publish::<sam2_encoder>(encoder));
        Ok(())
    })
}

/// Releases an encoder. Embeddings it made stay valid. A pointer that is not a live encoder
/// (already freed, another handle type) is detected where possible and ignored with a warning
/// through the log callback: best effort, not a licence. NULL is a no-op. Do not free it twice, nor
/// while it is in use.
#[no_mangle]
pub extern "C" fn sam2_encoder_free(encoder: *mut sam2_encoder) {
    super::free_handle(encoder, "encoder");
}

/// Encodes one image.
///
/// `pixels`: `pixels_len` bytes holding `height` rows of `width` pixels in `pixel_format`
/// (`SAM2_PIXEL_*`), rows `stride` bytes apart (0 means tightly packed). The buffer is only read
/// during the call. On success `*out` receives a new embedding; it does not depend on the encoder
/// afterwards. Thread-safe.
///
/// The caller owns `*out` and frees it with `sam2_embedding_free`. Out-parameters are untouched on
/// failure.
#[no_mangle]
pub extern "C" fn sam2_encode(
    encoder: *const sam2_encoder,
    pixels: *const u8,
    pixels_len: usize,
    width: u32,
    height: u32,
    stride: usize,
    pixel_format: u32,
    out: *mut *mut sam2_embedding,
) -> sam2_status {
    guard(|| {
        let encoder = handle_ref(encoder, "encoder")?;
        encode_into(
            encoder,
            pixels,
            pixels_len,
            width,
            height,
            stride,
            pixel_format,
            out,
        )
    })
}

/// The pixel and out arguments of `sam2_encode` and `sam2_concept_encode`, checked in their
/// order, then the encode and the new embedding's handle.
#[allow(clippy::too_many_arguments)]
pub(crate) fn encode_into(
    encoder: &Encoder,
    pixels: *const u8,
    pixels_len: usize,
    width: u32,
    height: u32,
    stride: usize,
    pixel_format: u32,
    out: *mut *mut sam2_embedding,
) -> Result<(), Error> {
    if pixels.is_null() {
        return Err(Error::NullArgument("pixels"));
    }
    let out = arg_out(out, "out")?;
    let image = image_arg(pixels, pixels_len, width, height, stride, pixel_format)?;
    let embedding = encoder.encode(&image)?;
    out.set(super::publish::<sam2_embedding>(embedding));
    Ok(())
}

/// Copies the encoder's model fingerprint ("sam2fp1-…", identifying the model file) into `buf`.
/// See `sam2_last_error_message` for the `(buf, buf_len, needed)` convention.
#[no_mangle]
pub extern "C" fn sam2_encoder_fingerprint(
    encoder: *const sam2_encoder,
    buf: *mut c_char,
    buf_len: usize,
    needed: *mut usize,
) -> sam2_status {
    guard(|| {
        let encoder = handle_ref(encoder, "encoder")?;
        copy_out_str(&encoder.fingerprint().to_string(), buf, buf_len, needed)
    })
}

/// Writes the precision the encoder runs in (`SAM2_PRECISION_*`): as exported, or a precision
/// variant made by `sam2-variant` (which the model's metadata declares; a variant
/// made by another tool is read from its graph). A variant is another model: its embeddings carry
/// its own fingerprint and precision. Out-parameters are untouched on failure.
#[no_mangle]
pub extern "C" fn sam2_encoder_precision(
    encoder: *const sam2_encoder,
    out_precision: *mut u32,
) -> sam2_status {
    guard(|| {
        let e = handle_ref(encoder, "encoder")?;
        let out = arg_out(out_precision, "out_precision")?;
        out.set(super::precision::PrecisionCodes::code(
            e.variant().precision,
        ));
        Ok(())
    })
}

/// Writes what the encoder effectively runs on: the provider (`SAM2_PROVIDER_*`) that runs the
/// model, its device id, and whether a requested GPU provider was unavailable (1) so the session
/// fell back. A UI can show "running on CPU" from this.
#[no_mangle]
pub extern "C" fn sam2_encoder_device(
    encoder: *const sam2_encoder,
    out_provider: *mut u32,
    out_device_id: *mut i32,
    out_fell_back: *mut i32,
) -> sam2_status {
    guard(|| {
        let e = handle_ref(encoder, "encoder")?;
        super::device::write_device(e.device(), out_provider, out_device_id, out_fell_back)
    })
}

/// Copies the encoder session's execution providers, in priority order and comma-separated
/// ("CUDAExecutionProvider,CPUExecutionProvider"), into `buf`. See `sam2_last_error_message`
/// for the `(buf, buf_len, needed)` convention.
#[no_mangle]
pub extern "C" fn sam2_encoder_providers(
    encoder: *const sam2_encoder,
    buf: *mut c_char,
    buf_len: usize,
    needed: *mut usize,
) -> sam2_status {
    guard(|| {
        let e = handle_ref(encoder, "encoder")?;
        super::device::write_providers(e.device(), buf, buf_len, needed)
    })
}
