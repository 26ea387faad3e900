//! Handles and their type tags: the registry of live handles, and publishing, checking and
//! freeing handles.
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

use super::strings::fail;
use super::{cache, embedding, encoder, everything, masks, predictor, tracker};
use sam2::Error;

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
        impl $crate::Handle for $ty {
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

/// The handle types this module knows, for messages about a pointer of the wrong type (every
/// `impl_handle!` belongs here: test_bad_input.c passes each handle type where each other one
/// is expected and wants the message to name it).
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
        entry::<everything::sam2_everything>(),
        entry::<tracker::sam2_tracker>(),
        entry::<tracker::sam2_track_result>(),
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

/// Releases a handle made by `Box::into_raw`; NULL is a no-op; a panic in a destructor is
/// contained. A pointer that is not a live `T` (a double free, the wrong `_free`) is not
/// released: the call is ignored with a warning through the log callback, and the reason is
/// recorded as the thread's last error.
pub(crate) fn free_handle<T: Handle>(ptr: *mut T, name: &'static str) {
    if ptr.is_null() {
        return;
    }
    sam2::panics::install_hook();
    let _ = sam2::panics::catch(|| {
        if let Some(problem) = handle_problem(ptr as *const T) {
            let error = Error::invalid(name, problem);
            sam2::log::emit(
                sam2::log::LogLevel::Warning,
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
    });
}
