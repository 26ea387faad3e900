//! The C side of the test support (see `crate::test_support`): compiled only with the
//! `test-support` feature and declared in its own header, `tests/c/sam2_test_support.h`
//! (generated from this file by `tests/header.rs`), so the shipped library and `sam2.h` carry no
//! test hooks.

use std::ffi::c_char;
use std::sync::Arc;

use super::embedding::sam2_embedding;
use super::{arg_out, arg_str, guard, handle_ref, publish, sam2_status};
use crate::embedding::Embedding;

/// Makes a stand-in for a device-resident embedding on machines without a GPU. The result
/// shares `host_embedding`'s bytes but labels them as `allocator_name` memory ("Cuda", "DML", …)
/// on `device_id`, so residency checks see a device embedding: `sam2_embedding_is_serializable` gives 0, `sam2_embedding_save` refuses it,
/// `sam2_embedding_allocator_name` names `allocator_name`. It is never handed to ONNX Runtime:
/// `sam2_predict` and `sam2_embedding_to_host` refuse it. Free with `sam2_embedding_free`.
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
        out.set(publish(sam2_embedding::new(Arc::new(sim))));
        Ok(())
    })
}
