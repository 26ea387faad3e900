//! The C ABI. Every `extern "C"` function and every raw pointer of the library lives under this
//! module, one file per handle type. Conventions (see the README's "C API conventions"):
//! inputs before out-params; out-params written only on success; NULL handles give
//! `SAM2_ERR_NULL_ARGUMENT`; `_free(NULL)` is a no-op; panics never cross the boundary.
//!
//! # Handles and their type tags
//!
//! Every handle the library hands out is recorded, with its type's tag, in a registry of live
//! handles ([`publish`]); exports never dereference a handle pointer before [`handle_ref`] (or
//! [`opt_handle_ref`] where NULL is allowed) has found it there with the expected type, and
//! [`free_handle`] takes it out of the registry before releasing it. A pointer is checked by
//! its address, never read: a handle of the wrong type, a stray integer, or a handle already
//! freed gives `SAM2_ERR_INVALID_ARGUMENT` naming the argument, and a double free is ignored (with
//! a warning through the log callback) instead of corrupting the heap, without the library
//! touching memory the host does not own. (Handle structs still begin with a [`HandleTag`],
//! poisoned on free, as a debugging aid.)
//!
//! One limit remains: freed memory may be handed out again, and a new handle of the same type at
//! the same address is indistinguishable from the old one. The registry turns the common host
//! mistakes into errors; it is not a substitute for correct ownership.
//!
//! A new handle type takes three steps (and a line in `handle_name`, so that messages about a
//! pointer of that type passed where another is expected can name it):
//! ```ignore
//! #[cfg_attr(all(), repr(C))] // see HandleTag: repr(C) puts the tag first, cbindgen keeps the type opaque
//! pub struct sam2_thing {
//!     tag: HandleTag,
//!     pub(crate) inner: Thing,
//! }
//! impl_handle!(sam2_thing, b"sam2_thg");                      // the tag: 8 ASCII bytes, unique
//! // create:  publish(sam2_thing { tag: HandleTag::new::<sam2_thing>(), inner })
//! // use:     let thing = handle_ref(ptr, "thing")?;
//! // free:    free_handle(ptr, "thing");
//! ```

#![allow(non_camel_case_types)]
// The exports take raw pointers from C by design; each dereference is NULL-checked and
// documented in the header, and marking them `unsafe` would mean nothing to a C caller.
#![allow(clippy::not_unsafe_ptr_arg_deref)]

use std::cell::RefCell;
use std::ffi::{c_char, CStr};

use crate::error::Error;

pub mod cache;
pub mod device;
pub mod embedding;
pub mod encoder;
pub mod masks;
pub mod predictor;
pub mod runtime;
/// cbindgen:ignore
#[cfg(feature = "test-support")]
pub mod test_support;

/// Result of every fallible function. Values are fixed forever; retired values stay reserved.
#[repr(u32)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum sam2_status {
    /// Success.
    SAM2_OK = 0,
    /// A required pointer argument was NULL.
    SAM2_ERR_NULL_ARGUMENT = 1,
    /// An argument was out of range, malformed or inconsistent; the message names it.
    SAM2_ERR_INVALID_ARGUMENT = 2,
    /// A caller buffer is too small; the needed size was written to the size out-param.
    SAM2_ERR_BUFFER_TOO_SMALL = 3,
    /// No usable ONNX Runtime library could be loaded; the message lists the paths tried.
    SAM2_ERR_RUNTIME_NOT_FOUND = 4,
    /// A model file is unreadable or is not a recognised SAM2 export.
    SAM2_ERR_MODEL = 5,
    /// The operating system failed a file operation.
    SAM2_ERR_IO = 6,
    /// The embedding is in device memory and cannot be written; see `sam2_embedding_allocator_name`.
    SAM2_ERR_EMBEDDING_NOT_SERIALIZABLE = 7,
    /// An embedding file is truncated, corrupted, foreign or of an unsupported version.
    SAM2_ERR_EMBEDDING_FORMAT = 8,
    /// An embedding (or file) was made by a different model than the one asked to use it.
    SAM2_ERR_MODEL_MISMATCH = 9,
    /// The execution environment cannot provide what was requested (e.g. a GPU provider in FAIL mode).
    SAM2_ERR_ENVIRONMENT_CONFIGURATION = 10,
    /// ONNX Runtime reported an error.
    SAM2_ERR_ONNXRUNTIME = 11,
    /// An internal error (a caught panic). The library stays usable.
    SAM2_ERR_PANIC = 12,
    /// A wait ended before the work did; the work goes on (wait again, or cancel it).
    SAM2_ERR_TIMEOUT = 13,
    /// The work was cancelled before it finished.
    SAM2_ERR_CANCELLED = 14,
    /// A bounded queue is full; wait for work to finish, or cancel some.
    SAM2_ERR_QUEUE_FULL = 15,
    /// Memory for a result could not be allocated (the message says how much); nothing changed.
    SAM2_ERR_OUT_OF_MEMORY = 16,
}

impl sam2_status {
    pub(crate) fn of(error: &Error) -> Self {
        use sam2_status::*;
        match error {
            Error::NullArgument(_) => SAM2_ERR_NULL_ARGUMENT,
            Error::InvalidArgument { .. } => SAM2_ERR_INVALID_ARGUMENT,
            Error::BufferTooSmall { .. } => SAM2_ERR_BUFFER_TOO_SMALL,
            Error::RuntimeNotFound(_) => SAM2_ERR_RUNTIME_NOT_FOUND,
            Error::Model { .. } => SAM2_ERR_MODEL,
            Error::Io { .. } => SAM2_ERR_IO,
            Error::EmbeddingNotSerializable { .. } => SAM2_ERR_EMBEDDING_NOT_SERIALIZABLE,
            Error::EmbeddingFormat(_) => SAM2_ERR_EMBEDDING_FORMAT,
            Error::ModelMismatch(_) => SAM2_ERR_MODEL_MISMATCH,
            Error::EnvironmentConfiguration(_) => SAM2_ERR_ENVIRONMENT_CONFIGURATION,
            Error::OnnxRuntime(_) => SAM2_ERR_ONNXRUNTIME,
            Error::Panic(_) => SAM2_ERR_PANIC,
            Error::Timeout { .. } => SAM2_ERR_TIMEOUT,
            Error::Cancelled => SAM2_ERR_CANCELLED,
            Error::QueueFull { .. } => SAM2_ERR_QUEUE_FULL,
            Error::OutOfMemory { .. } => SAM2_ERR_OUT_OF_MEMORY,
        }
    }

    pub(crate) fn as_str(self) -> &'static CStr {
        use sam2_status::*;
        match self {
            SAM2_OK => c"SAM2_OK: success",
            SAM2_ERR_NULL_ARGUMENT => c"SAM2_ERR_NULL_ARGUMENT: a required pointer argument was NULL",
            SAM2_ERR_INVALID_ARGUMENT => c"SAM2_ERR_INVALID_ARGUMENT: an argument is invalid",
            SAM2_ERR_BUFFER_TOO_SMALL => c"SAM2_ERR_BUFFER_TOO_SMALL: the buffer is too small",
            SAM2_ERR_RUNTIME_NOT_FOUND => c"SAM2_ERR_RUNTIME_NOT_FOUND: ONNX Runtime could not be loaded",
            SAM2_ERR_MODEL => c"SAM2_ERR_MODEL: the model is unreadable or not a recognised SAM2 export",
            SAM2_ERR_IO => c"SAM2_ERR_IO: a file operation failed",
            SAM2_ERR_EMBEDDING_NOT_SERIALIZABLE => {
                c"SAM2_ERR_EMBEDDING_NOT_SERIALIZABLE: the embedding is in device memory and cannot be saved"
            }
            SAM2_ERR_EMBEDDING_FORMAT => c"SAM2_ERR_EMBEDDING_FORMAT: the embedding file is invalid",
            SAM2_ERR_MODEL_MISMATCH => c"SAM2_ERR_MODEL_MISMATCH: made by a different model",
            SAM2_ERR_ENVIRONMENT_CONFIGURATION => {
                c"SAM2_ERR_ENVIRONMENT_CONFIGURATION: the requested device or environment is not available"
            }
            SAM2_ERR_ONNXRUNTIME => c"SAM2_ERR_ONNXRUNTIME: ONNX Runtime reported an error",
            SAM2_ERR_PANIC => c"SAM2_ERR_PANIC: internal error",
            SAM2_ERR_TIMEOUT => c"SAM2_ERR_TIMEOUT: the wait ended before the work did",
            SAM2_ERR_CANCELLED => c"SAM2_ERR_CANCELLED: the work was cancelled",
            SAM2_ERR_QUEUE_FULL => c"SAM2_ERR_QUEUE_FULL: the queue is full",
            SAM2_ERR_OUT_OF_MEMORY => c"SAM2_ERR_OUT_OF_MEMORY: not enough memory for the result",
        }
    }
}

thread_local! {
    static LAST_ERROR: RefCell<String> = const { RefCell::new(String::new()) };
}

/// Records an error as this thread's last error and returns its status. A too-small buffer is
/// the answer to a size query, not a failure worth a message: it leaves the last error as it was,
/// so a host can size a buffer for a string without losing the message of a real failure.
pub(crate) fn fail(error: Error) -> sam2_status {
    let status = sam2_status::of(&error);
    if !matches!(error, Error::BufferTooSmall { .. }) {
        let text = error.to_string();
        LAST_ERROR.with(|e| *e.borrow_mut() = text);
    }
    status
}

pub(crate) fn last_error() -> String {
    LAST_ERROR.with(|e| e.borrow().clone())
}

fn panic_message(payload: &(dyn std::any::Any + Send)) -> String {
    if let Some(s) = payload.downcast_ref::<&str>() {
        (*s).to_string()
    } else if let Some(s) = payload.downcast_ref::<String>() {
        s.clone()
    } else {
        "unknown panic".to_string()
    }
}

/// Runs an export's body: a `Result<(), Error>` becomes a status (recording the message), and a
/// panic becomes `SAM2_ERR_PANIC` instead of unwinding into C.
pub(crate) fn guard(body: impl FnOnce() -> Result<(), Error>) -> sam2_status {
    match std::panic::catch_unwind(std::panic::AssertUnwindSafe(body)) {
        Ok(Ok(())) => sam2_status::SAM2_OK,
        Ok(Err(e)) => fail(e),
        Err(payload) => fail(Error::Panic(panic_message(payload.as_ref()))),
    }
}

/// Runs an infallible export that returns a value, giving `fallback` if it panics.
pub(crate) fn guard_value<T>(fallback: T, body: impl FnOnce() -> T) -> T {
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(body)).unwrap_or(fallback)
}

/// A C handle type: a struct whose first field is a [`HandleTag`] holding `TAG` while it lives.
/// Implement it with [`impl_handle!`], which also checks at compile time that the tag comes first.
pub(crate) trait Handle: Sized {
    /// Eight ASCII bytes, unique among the handle types, read as a little-endian `u64`.
    const TAG: u64;
    /// The C type name, for messages.
    const NAME: &'static str;
}

/// Implements [`Handle`] for a handle struct: `impl_handle!(sam2_thing, b"sam2_thg");`.
macro_rules! impl_handle {
    ($ty:ident, $tag:literal) => {
        impl $crate::ffi::Handle for $ty {
            const TAG: u64 = u64::from_le_bytes(*$tag);
            const NAME: &'static str = stringify!($ty);
        }
        // The tag is read at offset 0 whatever type a pointer really has, so it must come first.
        const _: () = assert!(std::mem::offset_of!($ty, tag) == 0);
    };
}
pub(crate) use impl_handle;

/// The first field of every handle struct: its type's tag while alive, [`FREED_TAG`] once freed.
///
/// Handle structs are `#[repr(C)]` so that this field is at offset 0. They spell it
/// `#[cfg_attr(all(), repr(C))]` (always true) because cbindgen reads only a plain `#[repr(C)]`:
/// written this way, the header keeps declaring the handles as opaque types.
#[repr(transparent)]
pub(crate) struct HandleTag(u64);

impl HandleTag {
    pub(crate) const fn new<T: Handle>() -> Self {
        HandleTag(T::TAG)
    }
}

/// What `free_handle` writes over a tag before releasing the memory.
const FREED_TAG: u64 = u64::from_le_bytes(*b"sam2free");

/// The handle types this module knows, for messages about a pointer of the wrong type.
fn handle_name(tag: u64) -> Option<&'static str> {
    fn entry<T: Handle>() -> (u64, &'static str) {
        (T::TAG, T::NAME)
    }
    [
        entry::<encoder::sam2_encoder>(),
        entry::<embedding::sam2_embedding>(),
        entry::<predictor::sam2_predictor>(),
        entry::<masks::sam2_masks>(),
        entry::<cache::sam2_cache>(),
        entry::<cache::sam2_encode_job>(),
    ]
    .into_iter()
    .find(|(t, _)| *t == tag)
    .map(|(_, name)| name)
}

/// The handles alive now (address → type tag), and the most recently freed ones, for messages.
/// A pointer is checked against this registry, never read: a freed handle, a stray integer or a
/// handle of another type is recognised without touching memory the host does not own.
struct Registry {
    live: std::collections::HashMap<usize, u64>,
    freed: std::collections::VecDeque<(usize, u64)>,
}

/// How many freed handles are remembered for "already freed" messages.
const FREED_REMEMBERED: usize = 4096;

static REGISTRY: std::sync::LazyLock<std::sync::RwLock<Registry>> =
    std::sync::LazyLock::new(|| {
        std::sync::RwLock::new(Registry {
            live: std::collections::HashMap::new(),
            freed: std::collections::VecDeque::new(),
        })
    });

fn registry_read() -> std::sync::RwLockReadGuard<'static, Registry> {
    REGISTRY.read().unwrap_or_else(|p| p.into_inner())
}

fn registry_write() -> std::sync::RwLockWriteGuard<'static, Registry> {
    REGISTRY.write().unwrap_or_else(|p| p.into_inner())
}

/// Hands a new handle to the host: boxes it and records it as alive.
pub(crate) fn publish<T: Handle>(value: T) -> *mut T {
    let ptr = Box::into_raw(Box::new(value));
    let mut registry = registry_write();
    let addr = ptr as usize;
    registry.freed.retain(|(a, _)| *a != addr);
    registry.live.insert(addr, T::TAG);
    ptr
}

/// Why a non-NULL pointer is not a live handle of type `T`, or `None` when it is.
fn handle_problem<T: Handle>(ptr: *const T) -> Option<String> {
    let addr = ptr as usize;
    let registry = registry_read();
    match registry.live.get(&addr) {
        Some(&tag) if tag == T::TAG => None,
        Some(&tag) => Some(match handle_name(tag) {
            Some(other) => format!("is a {other}, not a {}", T::NAME),
            None => format!("is not a {} this library returned", T::NAME),
        }),
        None if registry
            .freed
            .iter()
            .any(|&(a, t)| a == addr && t == T::TAG) =>
        {
            Some(format!("is a {} that was already freed", T::NAME))
        }
        None if addr < 4096 || addr % std::mem::align_of::<T>() != 0 => Some(format!(
            "{addr:#x} is not a {} this library returned",
            T::NAME
        )),
        None => Some(format!(
            "is not a live {} (already freed, or not a handle this library returned)",
            T::NAME
        )),
    }
}

/// A handle argument: NULL gives `SAM2_ERR_NULL_ARGUMENT`; a pointer that is not a live handle
/// of type `T` (by its tag: see the module documentation) gives `SAM2_ERR_INVALID_ARGUMENT`.
pub(crate) fn handle_ref<'a, T: Handle>(ptr: *const T, name: &'static str) -> Result<&'a T, Error> {
    if ptr.is_null() {
        return Err(Error::NullArgument(name));
    }
    if let Some(problem) = handle_problem(ptr) {
        return Err(Error::invalid(name, problem));
    }
    // SAFETY: non-NULL, and the registry says it is a live `T` (the caller promises no one frees
    // it during the call).
    Ok(unsafe { &*ptr })
}

/// An optional handle argument: NULL is `None`; otherwise as [`handle_ref`].
pub(crate) fn opt_handle_ref<'a, T: Handle>(
    ptr: *const T,
    name: &'static str,
) -> Result<Option<&'a T>, Error> {
    if ptr.is_null() {
        Ok(None)
    } else {
        handle_ref(ptr, name).map(Some)
    }
}

/// A NULL-checked out-param, written through its raw pointer: no `&mut` is formed, so a host
/// that passes one pointer for two out-params (or an out-param that overlaps an input) gets the
/// last write, not undefined behaviour.
pub(crate) struct Out<'a, T> {
    ptr: *mut T,
    _lifetime: std::marker::PhantomData<&'a mut T>,
}

impl<T> Out<'_, T> {
    /// Writes the value (the old contents are not dropped: out-params hold plain C data).
    pub(crate) fn set(self, value: T) {
        // SAFETY: non-NULL; the caller promises it is valid for writes of a `T`.
        unsafe { self.ptr.write_unaligned(value) }
    }
}

/// NULL-checked out-param.
pub(crate) fn arg_out<'a, T>(ptr: *mut T, name: &'static str) -> Result<Out<'a, T>, Error> {
    if ptr.is_null() {
        return Err(Error::NullArgument(name));
    }
    Ok(Out {
        ptr,
        _lifetime: std::marker::PhantomData,
    })
}

/// NUL-terminated UTF-8 string argument.
pub(crate) fn arg_str<'a>(ptr: *const c_char, name: &'static str) -> Result<&'a str, Error> {
    if ptr.is_null() {
        return Err(Error::NullArgument(name));
    }
    // SAFETY: the caller promises a NUL-terminated string.
    let s = unsafe { CStr::from_ptr(ptr) };
    s.to_str()
        .map_err(|_| Error::invalid(name, "is not valid UTF-8"))
}

/// A `(pointer, length)` array argument; NULL is accepted when the length is 0.
pub(crate) fn arg_slice<'a, T>(
    ptr: *const T,
    len: usize,
    name: &'static str,
) -> Result<&'a [T], Error> {
    if len == 0 {
        return Ok(&[]);
    }
    if ptr.is_null() {
        return Err(Error::NullArgument(name));
    }
    if len > isize::MAX as usize / std::mem::size_of::<T>().max(1) {
        return Err(Error::invalid(name, "length is impossibly large"));
    }
    // SAFETY: the caller promises `len` readable elements at `ptr`.
    Ok(unsafe { std::slice::from_raw_parts(ptr, len) })
}

/// Reads a growable options struct whose first field is `struct_size`: NULL gives the defaults;
/// the size of an earlier version of the struct (an older caller) reads the prefix it knows over
/// the defaults. Only the sizes of published versions are accepted.
pub(crate) fn read_options<T: Copy>(
    ptr: *const T,
    defaults: T,
    versions: &[usize],
    name: &'static str,
) -> Result<T, Error> {
    if ptr.is_null() {
        return Ok(defaults);
    }
    // SAFETY: every options struct starts with a `uint32_t struct_size`.
    let size = unsafe { *(ptr as *const u32) } as usize;
    let full = std::mem::size_of::<T>();
    if size != full && !versions.contains(&size) {
        return Err(Error::invalid(
            name,
            format!(
                "struct_size is {size}; expected {full} (set it with the _init function), or the size of an earlier version ({versions:?})"
            ),
        ));
    }
    let mut out = defaults;
    // SAFETY: `size` bytes are readable at `ptr` (the caller's struct), and fit in `out`.
    unsafe { std::ptr::copy_nonoverlapping(ptr as *const u8, &mut out as *mut T as *mut u8, size) };
    Ok(out)
}

/// Writes the defaults of a growable options struct into a caller struct of `struct_size` bytes
/// (its `sizeof`, which may be an earlier version's), and sets its `struct_size`.
pub(crate) fn init_options<T: Copy>(
    ptr: *mut T,
    struct_size: usize,
    defaults: T,
    versions: &[usize],
) -> Result<(), Error> {
    if ptr.is_null() {
        return Err(Error::NullArgument("options"));
    }
    let full = std::mem::size_of::<T>();
    if struct_size != full && !versions.contains(&struct_size) {
        return Err(Error::invalid(
            "struct_size",
            format!("is {struct_size}; pass sizeof the options struct ({full} in this version of the header)"),
        ));
    }
    let mut value = defaults;
    // SAFETY: every options struct starts with a `uint32_t struct_size`.
    unsafe { *(&mut value as *mut T as *mut u32) = struct_size as u32 };
    // SAFETY: the caller promises `struct_size` writable bytes at `ptr`; `value` holds at least that many.
    unsafe {
        std::ptr::copy_nonoverlapping(&value as *const T as *const u8, ptr as *mut u8, struct_size)
    };
    Ok(())
}

/// The `intra_threads` field of the options structs: 0 = automatic, at most 1024.
pub(crate) fn intra_threads(value: u32) -> Result<Option<usize>, Error> {
    if value > 1024 {
        return Err(Error::invalid(
            "options.intra_threads",
            format!("must be 0 (automatic) to 1024, got {value}"),
        ));
    }
    Ok((value > 0).then_some(value as usize))
}

/// A 0/1 field of an options struct.
pub(crate) fn flag(value: u32, name: &'static str) -> Result<bool, Error> {
    match value {
        0 => Ok(false),
        1 => Ok(true),
        other => Err(Error::invalid(name, format!("must be 0 or 1, got {other}"))),
    }
}

/// Copies a string into a caller buffer `(buf, buf_len)` with its NUL, reporting the size needed.
pub(crate) fn copy_out_str(
    text: &str,
    buf: *mut c_char,
    buf_len: usize,
    needed: *mut usize,
) -> Result<(), Error> {
    let bytes = text.as_bytes();
    let need = bytes.len() + 1;
    if !needed.is_null() {
        // SAFETY: checked non-NULL; the caller promises it is writable.
        unsafe { *needed = need };
    }
    if buf.is_null() || buf_len < need {
        return Err(Error::BufferTooSmall {
            needed: need,
            given: if buf.is_null() { 0 } else { buf_len },
        });
    }
    // SAFETY: `buf` has room for `need` bytes (checked above).
    unsafe {
        std::ptr::copy_nonoverlapping(bytes.as_ptr(), buf as *mut u8, bytes.len());
        *buf.add(bytes.len()) = 0;
    }
    Ok(())
}

/// Releases a handle made by `Box::into_raw`; NULL is a no-op; a panic in a destructor is
/// contained. A pointer that is not a live `T` (a double free, the wrong `_free`) is not
/// released: the call is ignored with a warning through the log callback, and the reason is
/// recorded as the thread's last error.
pub(crate) fn free_handle<T: Handle>(ptr: *mut T, name: &'static str) {
    if ptr.is_null() {
        return;
    }
    let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        if let Some(problem) = handle_problem(ptr as *const T) {
            let error = Error::invalid(name, problem);
            crate::log::emit(
                crate::log::LogLevel::Warning,
                &format!("{}_free ignored: {error}", T::NAME),
            );
            fail(error);
            return;
        }
        {
            let mut registry = registry_write();
            // Another thread may have freed it since the check: only one free takes it out.
            if registry.live.remove(&(ptr as usize)).is_none() {
                return;
            }
            registry.freed.push_back((ptr as usize, T::TAG));
            if registry.freed.len() > FREED_REMEMBERED {
                registry.freed.pop_front();
            }
        }
        // SAFETY: a live `T` from `publish` (this library's Box::into_raw), taken out of the
        // registry above, so released once. Dropped outside the lock: a session may take a while.
        unsafe {
            std::ptr::write_volatile(ptr as *mut u64, FREED_TAG);
            drop(Box::from_raw(ptr));
        }
    }));
}
