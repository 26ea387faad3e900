//! `sam2_embedding`: an encoded image, where it lives, and (in the residency work) its files.

use std::ffi::{c_char, CString};
use std::sync::{Arc, OnceLock};

use super::c_enum::c_enum;
use super::{
    arg_out, copy_out_str, fail, guard, guard_value, handle_ref, opt_handle_ref, sam2_status,
    Handle,
};
use sam2::Embedding;

/// An image embedding. Opaque and immutable. Thread-safe: several predictors on several threads
/// may read it at once. Release with `sam2_embedding_free`.
pub struct sam2_embedding {
    _opaque: [u8; 0],
}
impl Handle for sam2_embedding {
    type Inner = EmbeddingHandle;
}

/// What a `sam2_embedding` points at: the embedding, shared with the cache that may also hold
/// it, and its allocator's name as a C string, made on the first `sam2_embedding_allocator_name`.
pub(crate) struct EmbeddingHandle {
    pub(crate) inner: Arc<Embedding>,
    allocator_name: OnceLock<CString>,
}

impl From<Arc<Embedding>> for EmbeddingHandle {
    fn from(inner: Arc<Embedding>) -> Self {
        EmbeddingHandle {
            inner,
            allocator_name: OnceLock::new(),
        }
    }
}

impl From<Embedding> for EmbeddingHandle {
    fn from(embedding: Embedding) -> Self {
        Arc::new(embedding).into()
    }
}

/// Releases an embedding. A pointer that is not a live embedding (already freed, another handle
/// type) is detected where possible and ignored with a warning through the log callback: best
/// effort, not a licence. NULL is a no-op. Do not free it twice, nor while it is in use.
#[no_mangle]
pub extern "C" fn sam2_embedding_free(embedding: *mut sam2_embedding) {
    super::free_handle(embedding, "embedding");
}

/// Returns 1 when the embedding is in host-readable memory (it can be saved), 0 when it is in
/// device memory, and 0 for NULL or a pointer that is not a live embedding (whose reason is then
/// the thread's last error message).
#[no_mangle]
pub extern "C" fn sam2_embedding_is_serializable(embedding: *const sam2_embedding) -> i32 {
    guard_value(0, || match handle_ref(embedding, "embedding") {
        Ok(e) => e.inner.is_serializable() as i32,
        Err(e) => {
            fail(e);
            0
        }
    })
}

/// Returns the name of the ONNX Runtime allocator that holds the embedding ("Cpu", "Cuda",
/// "CudaPinned", "DML", …): the one that makes it non-serializable, if any.
///
/// The string is owned by the embedding and valid until `sam2_embedding_free`; do not free it.
/// Returns NULL for NULL or a pointer that is not a live embedding (whose reason is then the
/// thread's last error message).
#[no_mangle]
pub extern "C" fn sam2_embedding_allocator_name(embedding: *const sam2_embedding) -> *const c_char {
    guard_value(std::ptr::null(), || {
        match handle_ref(embedding, "embedding") {
            Ok(e) => e
                .allocator_name
                .get_or_init(|| CString::new(e.inner.allocator_name()).unwrap_or_default())
                .as_ptr(),
            Err(e) => {
                fail(e);
                std::ptr::null()
            }
        }
    })
}

/// Writes the device id of the memory that holds the embedding (0 for the host).
#[no_mangle]
pub extern "C" fn sam2_embedding_device_id(
    embedding: *const sam2_embedding,
    out_device_id: *mut i32,
) -> sam2_status {
    guard(|| {
        let e = handle_ref(embedding, "embedding")?;
        let out = arg_out(out_device_id, "out_device_id")?;
        out.set(e.inner.device_id());
        Ok(())
    })
}

/// Writes the size of the image the embedding was made from.
#[no_mangle]
pub extern "C" fn sam2_embedding_image_size(
    embedding: *const sam2_embedding,
    out_width: *mut u32,
    out_height: *mut u32,
) -> sam2_status {
    guard(|| {
        let e = handle_ref(embedding, "embedding")?;
        let w = arg_out(out_width, "out_width")?;
        let h = arg_out(out_height, "out_height")?;
        let (width, height) = e.inner.image_size();
        w.set(width);
        h.set(height);
        Ok(())
    })
}

/// Copies the fingerprint of the encoder model that made the embedding ("sam2fp1-…") into `buf`.
/// See `sam2_last_error_message` for the `(buf, buf_len, needed)` convention.
#[no_mangle]
pub extern "C" fn sam2_embedding_fingerprint(
    embedding: *const sam2_embedding,
    buf: *mut c_char,
    buf_len: usize,
    needed: *mut usize,
) -> sam2_status {
    guard(|| {
        let e = handle_ref(embedding, "embedding")?;
        copy_out_str(&e.inner.fingerprint().to_string(), buf, buf_len, needed)
    })
}

/// Writes the precision of the encoder that made the embedding (`SAM2_PRECISION_*`; an embedding
/// file records it, and files written before precision variants existed read as
/// `SAM2_PRECISION_FP32`). Out-parameters are untouched on failure.
#[no_mangle]
pub extern "C" fn sam2_embedding_precision(
    embedding: *const sam2_embedding,
    out_precision: *mut u32,
) -> sam2_status {
    guard(|| {
        let e = handle_ref(embedding, "embedding")?;
        let out = arg_out(out_precision, "out_precision")?;
        out.set(super::precision::PrecisionCodes::code(e.inner.precision()));
        Ok(())
    })
}

/// Embedding placement for `sam2_embedding_load`: host memory.
pub const SAM2_PLACE_HOST: u32 = 0;
/// Embedding placement for `sam2_embedding_load`: the predictor's execution device (host memory
/// when the predictor runs on the CPU).
pub const SAM2_PLACE_DEVICE: u32 = 1;

/// Where `sam2_embedding_load` puts an embedding.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Placement {
    Host,
    /// The predictor's execution device.
    Device,
}

c_enum! {
    /// `SAM2_PLACE_*` ↔ [`Placement`].
    pub(crate) PlacementCodes: u32 => Placement {
        SAM2_PLACE_HOST => Placement::Host,
        SAM2_PLACE_DEVICE => Placement::Device,
    }
}

/// Saves a host embedding to `path` (safetensors with sam2 metadata, format version 3, whose
/// metadata and tensor bytes each carry a CRC-32; see docs/embedding-files.md).
///
/// The write is atomic: a temporary file in the same directory, fsync, rename, then fsync of the
/// directory (the current one for a bare file name), so a crash leaves any previous file at
/// `path` intact. The directory is opened before anything is written; a directory sync that fails
/// after the rename gives `SAM2_ERR_IO` with a message saying the new file is in place but may not
/// survive a power loss. When `path` is a symbolic link (or a chain of them), the file it names is
/// replaced, atomically in that file's directory, and the link is kept (a dangling link's file is
/// created; a loop is `SAM2_ERR_IO`). An embedding in device memory is refused with
/// `SAM2_ERR_EMBEDDING_NOT_SERIALIZABLE` before anything is written (no file is created or
/// changed, the embedding stays usable, and `sam2_embedding_allocator_name` names the
/// allocator); copy it first with `sam2_embedding_to_host`. OS failures give `SAM2_ERR_IO`.
#[no_mangle]
pub extern "C" fn sam2_embedding_save(
    embedding: *const sam2_embedding,
    path: *const c_char,
) -> sam2_status {
    guard(|| {
        let e = handle_ref(embedding, "embedding")?;
        let path = super::arg_str(path, "path")?;
        if path.is_empty() {
            return Err(sam2::Error::invalid("path", "is empty"));
        }
        sam2::embedding_file::save(&e.inner, std::path::Path::new(path))
    })
}

/// Loads an embedding file.
///
/// `predictor`: NULL, or the predictor the embedding is for: a file made by a different encoder
/// than the predictor's (or by an encoder of another export family) gives
/// `SAM2_ERR_MODEL_MISMATCH`. `placement`: `SAM2_PLACE_HOST` or `SAM2_PLACE_DEVICE` (the
/// predictor's device; needs a predictor). A truncated, corrupted, foreign or unsupported file
/// gives `SAM2_ERR_EMBEDDING_FORMAT` (format versions 1, written by earlier releases, and 2 are
/// read); an OS failure `SAM2_ERR_IO`, as does anything but a regular file (a directory, a FIFO, a
/// device), refused without opening it or waiting. On success `*out` receives a new embedding.
///
/// The caller owns `*out` and frees it with `sam2_embedding_free`. Out-parameters are untouched on
/// failure.
#[no_mangle]
pub extern "C" fn sam2_embedding_load(
    path: *const c_char,
    predictor: *const super::predictor::sam2_predictor,
    placement: u32,
    out: *mut *mut sam2_embedding,
) -> sam2_status {
    guard(|| {
        let path = super::arg_str(path, "path")?;
        if path.is_empty() {
            return Err(sam2::Error::invalid("path", "is empty"));
        }
        let out = arg_out(out, "out")?;
        let predictor = opt_handle_ref(predictor, "predictor")?;
        let placement = PlacementCodes::parse(placement, "placement")?;
        if placement == Placement::Device && predictor.is_none() {
            return Err(sam2::Error::invalid(
                "placement",
                "SAM2_PLACE_DEVICE needs the predictor whose device to use",
            ));
        }
        let expected = predictor.and_then(|p| p.expected_fingerprint());
        let embedding = sam2::embedding_file::load(std::path::Path::new(path), expected)?;
        if let Some(p) = predictor {
            // Family and layout too, so a file this predictor cannot use is refused now.
            p.check_embedding(&embedding)?;
        }
        let embedding = match (placement, predictor) {
            (Placement::Device, Some(p)) => p.place_on_device(embedding)?,
            _ => embedding,
        };
        out.set(super::publish::<sam2_embedding>(embedding));
        Ok(())
    })
}

/// Makes a host copy of an embedding, for saving a device embedding.
///
/// On a host embedding this is cheap: the new handle shares the same immutable tensors. On a device
/// embedding ONNX Runtime copies each tensor to the host through the device's execution provider;
/// without that provider (a CPU-only ONNX Runtime) it fails with
/// `SAM2_ERR_ENVIRONMENT_CONFIGURATION`. On success `*out` receives a new embedding; the original
/// is unchanged.
///
/// The caller owns `*out` and frees it with `sam2_embedding_free`. Out-parameters are untouched on
/// failure.
#[no_mangle]
pub extern "C" fn sam2_embedding_to_host(
    embedding: *const sam2_embedding,
    out: *mut *mut sam2_embedding,
) -> sam2_status {
    guard(|| {
        let e = handle_ref(embedding, "embedding")?;
        let out = arg_out(out, "out")?;
        let host = e.inner.to_host()?;
        out.set(super::publish::<sam2_embedding>(host));
        Ok(())
    })
}
