//! The C side of the test support (see `sam2::test_support`): compiled only with the
//! `test-support` feature and declared in its own header, `tests/c/sam2_test_support.h`
//! (generated from this file by `tests/header.rs`), so the shipped library and `sam2.h` carry no
//! test hooks.

use std::ffi::c_char;

use super::embedding::sam2_embedding;
use super::{arg_out, arg_str, guard, handle_ref, publish, sam2_status};
use sam2::Embedding;

/// Makes a stand-in for a device-resident embedding on machines without a GPU. The result shares
/// `host_embedding`'s bytes but labels them as `allocator_name` memory ("Cuda", "DML", …) on
/// `device_id`, so residency checks see a device embedding: `sam2_embedding_is_serializable` gives
/// 0, `sam2_embedding_save` refuses it, `sam2_embedding_allocator_name` names `allocator_name`. It
/// is never handed to ONNX Runtime: `sam2_predict` and `sam2_embedding_to_host` refuse it.
///
/// The caller owns `*out` and frees it with `sam2_embedding_free`. Out-parameters are untouched on
/// failure.
#[no_mangle]
pub extern "C" fn sam2_test_embedding_simulate_device(
    host_embedding: *const sam2_embedding,
    allocator_name: *const c_char,
    device_id: i32,
    out: *mut *mut sam2_embedding,
) -> sam2_status {
    guard(|| {
        let e = handle_ref(host_embedding, "host_embedding")?;
        let name = arg_str(allocator_name, "allocator_name")?;
        let out = arg_out(out, "out")?;
        let sim = Embedding::simulate_device(&e.inner, name, device_id)?;
        out.set(publish::<sam2_embedding>(sim));
        Ok(())
    })
}

/// Makes a result holding one given mask (`width × height` bytes, row-major, non-zero = foreground;
/// score 1, low-res logits all 0), so the mask formats (`sam2_masks_rle`, `sam2_masks_polygons`, …)
/// can be checked on shapes no model draws: holes, islands, corners.
///
/// The caller owns `*out` and frees it with `sam2_masks_free`. Out-parameters are untouched on
/// failure.
#[no_mangle]
pub extern "C" fn sam2_test_masks_from_bytes(
    mask: *const u8,
    width: u32,
    height: u32,
    out: *mut *mut super::masks::sam2_masks,
) -> sam2_status {
    guard(|| {
        let out = arg_out(out, "out")?;
        if width == 0 || height == 0 || width > 1 << 16 || height > 1 << 16 {
            return Err(sam2::Error::invalid(
                "width",
                "width and height must be in 1..=65536",
            ));
        }
        let (w, h) = (width as usize, height as usize);
        let bytes = super::arg_slice(mask, w * h, "mask")?;
        let masks: Vec<u8> = bytes.iter().map(|&v| (v != 0) as u8).collect();
        let rle = sam2::masks::Rle::encode(&masks, w, h);
        let prediction = sam2::Prediction {
            width: w,
            height: h,
            objects: 1,
            candidates: 1,
            masks,
            scores: vec![1.0],
            boxes: vec![rle.bbox().unwrap_or([0; 4])],
            areas: vec![rle.area()],
            low_res: vec![0.0; 256 * 256],
            low_res_size: 256,
            candidate_index: vec![0],
        };
        out.set(publish::<super::masks::sam2_masks>(prediction));
        Ok(())
    })
}

/// Panics inside the C boundary with `message` (NUL-terminated UTF-8), so that a test can check
/// where a caught panic's message goes: `SAM2_ERR_PANIC`, the message in
/// `sam2_last_error_message` and one `SAM2_LOG_ERROR` line through the log callback, nothing on
/// stderr. With `on_worker` non-zero the panic happens on a worker of the library's thread pool.
#[no_mangle]
pub extern "C" fn sam2_test_panic(message: *const c_char, on_worker: i32) -> sam2_status {
    guard(|| {
        let message = arg_str(message, "message")?.to_string();
        if on_worker != 0 {
            rayon::scope(|s| s.spawn(|_| panic!("{message}")));
        }
        panic!("{message}")
    })
}
