//! `sam2_embedding`: an encoded image, where it lives, and (in the residency work) its files.

use std::ffi::{c_char, CString};
use std::sync::{Arc, OnceLock};

use super::{arg_out, arg_ref, copy_out_str, guard, guard_value, sam2_status};
use crate::embedding::Embedding;

/// An image embedding. Opaque and immutable: it may be read by several predictors on several
/// threads at once. Release with `sam2_embedding_free`.
pub struct sam2_embedding {
    pub(crate) inner: Arc<Embedding>,
    pub(crate) allocator_name: OnceLock<CString>,
}

impl sam2_embedding {
    pub(crate) fn new(inner: Arc<Embedding>) -> Self {
        sam2_embedding {
            inner,
            allocator_name: OnceLock::new(),
        }
    }
}

/// Releases an embedding. NULL is a no-op. Do not free twice, nor while another thread uses it.
#[no_mangle]
pub extern "C" fn sam2_embedding_free(embedding: *mut sam2_embedding) {
    super::free_box(embedding);
}

/// Returns 1 when the embedding is in host-readable memory (it can be saved), 0 when it is in
/// device memory, and 0 for NULL.
#[no_mangle]
pub extern "C" fn sam2_embedding_is_serializable(embedding: *const sam2_embedding) -> i32 {
    guard_value(0, || match arg_ref(embedding, "embedding") {
        Ok(e) => e.inner.is_serializable() as i32,
        Err(_) => 0,
    })
}

/// Returns the name of the ONNX Runtime allocator that holds the embedding ("Cpu", "Cuda",
/// "CudaPinned", "DML", …): the one that makes it non-serializable, if any.
///
/// The string is owned by the embedding and valid until `sam2_embedding_free`; do not free it.
/// Returns NULL for a NULL embedding.
#[no_mangle]
pub extern "C" fn sam2_embedding_allocator_name(embedding: *const sam2_embedding) -> *const c_char {
    guard_value(std::ptr::null(), || match arg_ref(embedding, "embedding") {
        Ok(e) => e
            .allocator_name
            .get_or_init(|| CString::new(e.inner.allocator_name()).unwrap_or_default())
            .as_ptr(),
        Err(_) => std::ptr::null(),
    })
}

/// Writes the device id of the memory that holds the embedding (0 for the host).
#[no_mangle]
pub extern "C" fn sam2_embedding_device_id(
    embedding: *const sam2_embedding,
    out_device_id: *mut i32,
) -> sam2_status {
    guard(|| {
        let e = arg_ref(embedding, "embedding")?;
        let out = arg_out(out_device_id, "out_device_id")?;
        *out = e.inner.device_id();
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
        let e = arg_ref(embedding, "embedding")?;
        let w = arg_out(out_width, "out_width")?;
        let h = arg_out(out_height, "out_height")?;
        let (width, height) = e.inner.image_size();
        *w = width;
        *h = height;
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
        let e = arg_ref(embedding, "embedding")?;
        copy_out_str(&e.inner.fingerprint().to_string(), buf, buf_len, needed)
    })
}
