//! The ONNX Runtime calls the `ort` crate does not wrap, made through its raw API table: every
//! `unsafe` call into ONNX Runtime outside `ort` is in this file. (Loading the library file is
//! `platform`'s job; what to do with these calls is the caller's.)

use std::ffi::{c_char, c_void, CStr};

use ort::environment::Environment;
use ort::memory::{Allocator, MemoryInfo};
use ort::AsPointer;

/// The message of a failed call's status, releasing it; `None` for success (a NULL status).
fn take_error(status: ort::sys::OrtStatusPtr) -> Option<String> {
    if status.0.is_null() {
        return None;
    }
    let api = ort::api();
    // SAFETY: a non-NULL status returned by a call just made; read, then released once.
    unsafe {
        let message = CStr::from_ptr((api.GetErrorMessage)(status.0))
            .to_string_lossy()
            .into_owned();
        (api.ReleaseStatus)(status.0);
        Some(message)
    }
}

/// Registers a CPU arena allocator with `env` (`CreateAndRegisterAllocator`), for sessions built
/// with `session.use_env_allocators`. `config` are `OrtArenaCfg` keys and values
/// (`CreateArenaCfgV2`); when ONNX Runtime refuses them, the arena is registered with its
/// defaults. Gives ONNX Runtime's message when the allocator could not be registered.
pub(crate) fn register_cpu_arena(
    env: &Environment,
    info: &MemoryInfo<'_>,
    config: &[(&CStr, usize)],
) -> Result<(), String> {
    let api = ort::api();
    let keys: Vec<*const c_char> = config.iter().map(|(k, _)| k.as_ptr()).collect();
    let values: Vec<usize> = config.iter().map(|(_, v)| *v).collect();
    let mut arena_config = std::ptr::null_mut();
    // SAFETY: as many keys as values, NUL-terminated; `arena_config` is released below.
    let status = unsafe {
        (api.CreateArenaCfgV2)(
            keys.as_ptr(),
            values.as_ptr(),
            keys.len(),
            &mut arena_config,
        )
    };
    if take_error(status).is_some() {
        arena_config = std::ptr::null_mut();
    }
    // SAFETY: a live environment and memory info, and NULL or a live config (copied by the call).
    let status =
        unsafe { (api.CreateAndRegisterAllocator)(env.ptr() as *mut _, info.ptr(), arena_config) };
    if !arena_config.is_null() {
        // SAFETY: made above, released once.
        unsafe { (api.ReleaseArenaCfg)(arena_config) };
    }
    match take_error(status) {
        None => Ok(()),
        Some(message) => Err(message),
    }
}

/// The statistics ONNX Runtime keeps for an allocator (`AllocatorGetStats`; for an arena:
/// `InUse`, `TotalAllocated` — the bytes it holds from the system —, `MaxInUse`, `NumAllocs`,
/// `NumArenaExtensions`, …); empty for an allocator that keeps none.
pub(crate) fn allocator_stats(allocator: &Allocator) -> Vec<(String, String)> {
    let api = ort::api();
    let mut pairs = std::ptr::null_mut();
    // SAFETY: a live allocator; `pairs` is released below.
    let status = unsafe { (api.AllocatorGetStats)(allocator.ptr(), &mut pairs) };
    if take_error(status).is_some() || pairs.is_null() {
        return Vec::new();
    }
    let (mut keys, mut values, mut count) = (std::ptr::null(), std::ptr::null(), 0usize);
    let mut out = Vec::new();
    // SAFETY: `count` NUL-terminated keys and values owned by `pairs`, copied before it is released.
    unsafe {
        (api.GetKeyValuePairs)(pairs, &mut keys, &mut values, &mut count);
        for i in 0..count {
            let text = |p: *const c_char| CStr::from_ptr(p).to_string_lossy().into_owned();
            out.push((text(*keys.add(i)), text(*values.add(i))));
        }
        (api.ReleaseKeyValuePairs)(pairs);
    }
    out
}

/// What a candidate library's `OrtGetApiBase` says: its version string, and whether it provides
/// the API version the binding was built for.
///
/// # Safety
/// `get_api_base` must be the address of `OrtGetApiBase` in a library that stays loaded for the
/// duration of the call.
pub(crate) unsafe fn probe_api_base(get_api_base: *mut c_void) -> Result<(String, bool), String> {
    // SAFETY (caller): the symbol is OrtGetApiBase; it and the base's GetVersionString and
    // GetApi have no preconditions.
    let get_base: unsafe extern "C" fn() -> *const ort::sys::OrtApiBase =
        std::mem::transmute(get_api_base);
    let base = get_base();
    if base.is_null() {
        return Err("OrtGetApiBase returned NULL".to_string());
    }
    let v = ((*base).GetVersionString)();
    let version = if v.is_null() {
        String::from("unknown")
    } else {
        CStr::from_ptr(v).to_string_lossy().into_owned()
    };
    let provides_api = !((*base).GetApi)(ort::sys::ORT_API_VERSION).is_null();
    Ok((version, provides_api))
}

/// A tensor value over the memory of `owner` (same memory info, element type and shape) that
/// does not own that memory: what `AddInitializer` requires of a value ("Buffer containing the
/// initializer must be owned by the user"), for weights that ONNX Runtime itself placed on a
/// device. The caller keeps `owner` alive, unmoved and unwritten, as long as the view lives.
pub(crate) fn borrowed_view(owner: &ort::value::DynTensor) -> Result<ort::value::DynValue, String> {
    let ort::value::ValueType::Tensor { ty, shape, .. } = owner.dtype() else {
        return Err("not a tensor".into());
    };
    let dims: Vec<i64> = shape.iter().copied().collect();
    let bytes = crate::onnx::data_type::tensor_byte_len(owner);
    let api = ort::api();
    let mut out: *mut ort::sys::OrtValue = std::ptr::null_mut();
    // SAFETY: the memory info and data pointer are `owner`'s, which holds `bytes` bytes of this
    // element type and shape; ONNX Runtime only records the pointer (the value owns nothing).
    let status = unsafe {
        (api.CreateTensorWithDataAsOrtValue)(
            owner.memory_info().ptr(),
            owner.data_ptr() as *mut c_void,
            bytes,
            dims.as_ptr(),
            dims.len(),
            (*ty).into(),
            &mut out,
        )
    };
    if let Some(e) = take_error(status) {
        return Err(e);
    }
    let ptr = std::ptr::NonNull::new(out).ok_or("ONNX Runtime returned no value")?;
    // SAFETY: a fresh OrtValue this call owns; released when the returned value drops. ort wants
    // an allocator to keep alive with a tensor; the view allocated nothing, so the default one.
    let keep = Allocator::default();
    Ok(unsafe { ort::value::DynValue::from_ptr(ptr, Some(&keep)) })
}
