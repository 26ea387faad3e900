//! Handles: the one declaration that ties each opaque C type to the Rust value it stands for, the
//! registry of live handles, and creating, borrowing and freeing handles by that declaration.
//!
//! A handle type is an empty struct, which cbindgen declares as an opaque C type, and an `impl`
//! of [`Handle`] naming the Rust value a pointer to it really points at:
//! ```ignore
//! /// A thing. (Its C documentation: what it is, its thread rule, which `_free` releases it.)
//! pub struct sam2_thing {
//!     _opaque: [u8; 0],
//! }
//! impl Handle for sam2_thing {
//!     type Inner = Thing;
//! }
//! // create:  out.set(publish::<sam2_thing>(thing));
//! // borrow:  let thing: &Thing = handle_ref(ptr, "thing")?;
//! // free:    free_handle(ptr, "thing");                     // in `sam2_thing_free`
//! ```
//!
//! Ownership is the same for every handle: from [`publish`] to its `_free` the host owns a
//! `Box<Inner>`, and the pointer it holds is that box's, cast to the opaque type (rustls-ffi's
//! `Castable` with `OwnershipBox`). There are no shared (`Arc`) or borrowed handles: a value the
//! library shares (an embedding the cache also keeps, an encoder the cache encodes with) is an
//! `Arc` inside the box, so every handle has an address of its own and freeing one never releases
//! another.
//!
//! Every handle is recorded, with its type, in a registry of live handles; a handle pointer is
//! never dereferenced before [`handle_ref`] (or [`opt_handle_ref`] where NULL is allowed) has
//! found it there with the expected type, and [`free_handle`] takes it out of the registry before
//! releasing it. A pointer is checked by its address, never read: a handle of the wrong type, a
//! stray integer, or a handle already freed gives `SAM2_ERR_INVALID_ARGUMENT` naming the
//! argument, and a double free is ignored (with a warning through the log callback) instead of
//! corrupting the heap, without the library touching memory the host does not own.
//!
//! One limit remains: freed memory may be handed out again, and a new handle of the same type at
//! the same address is indistinguishable from the old one. The registry turns the common host
//! mistakes into errors; it is not a substitute for correct ownership.

use std::any::TypeId;
use std::collections::{HashMap, VecDeque};
use std::sync::{LazyLock, RwLock, RwLockReadGuard, RwLockWriteGuard};

use sam2::Error;

use super::status::fail;

/// An opaque C handle type and the Rust value its pointers point at (see the module
/// documentation). `Inner` is `Send + Sync`: the header lets hosts use every handle from any
/// thread (each type's documentation says which calls may overlap), so a value that is not
/// thread-safe cannot become a handle.
pub(crate) trait Handle: 'static {
    /// What a pointer to this C type really points at: a `Box<Inner>` made by [`publish`].
    type Inner: Send + Sync + 'static;
}

/// A handle type as the registry records it: its identity, and its C name for messages.
#[derive(Clone, Copy)]
struct Kind {
    id: TypeId,
    name: &'static str,
}

impl Kind {
    fn of<T: Handle>() -> Kind {
        Kind {
            id: TypeId::of::<T>(),
            name: c_name::<T>(),
        }
    }
}

/// The C name of a handle type (`sam2_embedding`): its Rust name without the module path.
fn c_name<T: Handle>() -> &'static str {
    let path = std::any::type_name::<T>();
    path.rsplit("::").next().unwrap_or(path)
}

/// The handles alive now (address → type), and the most recently freed ones, for messages. A
/// pointer is checked against this registry, never read: a freed handle, a stray integer or a
/// handle of another type is recognised without touching memory the host does not own.
struct Registry {
    live: HashMap<usize, Kind>,
    freed: VecDeque<(usize, TypeId)>,
}

/// How many freed handles are remembered for "already freed" messages.
const FREED_REMEMBERED: usize = 4096;

static REGISTRY: LazyLock<RwLock<Registry>> = LazyLock::new(|| {
    RwLock::new(Registry {
        live: HashMap::new(),
        freed: VecDeque::new(),
    })
});

fn registry_read() -> RwLockReadGuard<'static, Registry> {
    REGISTRY.read().unwrap_or_else(|p| p.into_inner())
}

fn registry_write() -> RwLockWriteGuard<'static, Registry> {
    REGISTRY.write().unwrap_or_else(|p| p.into_inner())
}

/// Hands a new handle to the host: makes its value from `value` (the value itself, or what
/// `From` builds the handle's value from: an embedding for a `sam2_embedding`), boxes it and
/// records the box as a live `T`.
pub(crate) fn publish<T: Handle>(value: impl Into<T::Inner>) -> *mut T {
    // A zero-sized value would give every handle of the type one address.
    const { assert!(std::mem::size_of::<T::Inner>() > 0) };
    let ptr = Box::into_raw(Box::new(value.into())).cast::<T>();
    let addr = ptr as usize;
    let mut registry = registry_write();
    registry.freed.retain(|(a, _)| *a != addr);
    registry.live.insert(addr, Kind::of::<T>());
    ptr
}

/// Why a non-NULL pointer is not a live handle of type `T`, or `None` when it is.
fn handle_problem<T: Handle>(ptr: *const T) -> Option<String> {
    let addr = ptr as usize;
    let name = c_name::<T>();
    let registry = registry_read();
    match registry.live.get(&addr) {
        Some(kind) if kind.id == TypeId::of::<T>() => None,
        Some(kind) => Some(format!("is a {}, not a {name}", kind.name)),
        None if registry
            .freed
            .iter()
            .any(|&(a, id)| a == addr && id == TypeId::of::<T>()) =>
        {
            Some(format!("is a {name} that was already freed"))
        }
        None if addr < 4096 || addr % std::mem::align_of::<T::Inner>() != 0 => {
            Some(format!("{addr:#x} is not a {name} this library returned"))
        }
        None => Some(format!(
            "is not a live {name} (already freed, or not a handle this library returned)"
        )),
    }
}

/// A handle argument, borrowed as the value it stands for: NULL gives `SAM2_ERR_NULL_ARGUMENT`;
/// a pointer that is not a live handle of type `T` (see the module documentation) gives
/// `SAM2_ERR_INVALID_ARGUMENT`.
pub(crate) fn handle_ref<'a, T: Handle>(
    ptr: *const T,
    name: &'static str,
) -> Result<&'a T::Inner, Error> {
    if ptr.is_null() {
        return Err(Error::NullArgument(name));
    }
    if let Some(problem) = handle_problem(ptr) {
        return Err(Error::invalid(name, problem));
    }
    // SAFETY: non-NULL, and the registry says it is a live `T`, which `publish` made from a
    // `Box<T::Inner>` (the caller promises no one frees it during the call).
    Ok(unsafe { &*ptr.cast::<T::Inner>() })
}

/// An optional handle argument: NULL is `None`; otherwise as [`handle_ref`].
pub(crate) fn opt_handle_ref<'a, T: Handle>(
    ptr: *const T,
    name: &'static str,
) -> Result<Option<&'a T::Inner>, Error> {
    if ptr.is_null() {
        Ok(None)
    } else {
        handle_ref(ptr, name).map(Some)
    }
}

/// Releases a handle made by [`publish`]; NULL is a no-op; a panic in a destructor is contained.
/// A pointer that is not a live `T` (a double free, the wrong `_free`) is not released: the call
/// is ignored with a warning through the log callback, and the reason is recorded as the thread's
/// last error.
pub(crate) fn free_handle<T: Handle>(ptr: *mut T, name: &'static str) {
    if ptr.is_null() {
        return;
    }
    sam2::__private::panics::install_hook();
    let _ = sam2::__private::panics::catch(|| {
        if let Some(problem) = handle_problem(ptr as *const T) {
            let error = Error::invalid(name, problem);
            sam2::log::emit(
                sam2::log::LogLevel::Warning,
                &format!("{}_free ignored: {error}", c_name::<T>()),
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
            registry.freed.push_back((ptr as usize, TypeId::of::<T>()));
            if registry.freed.len() > FREED_REMEMBERED {
                registry.freed.pop_front();
            }
        }
        // SAFETY: a live `T` from `publish` (a `Box<T::Inner>`), taken out of the registry above,
        // so released once. Dropped outside the lock: a session may take a while.
        drop(unsafe { Box::from_raw(ptr.cast::<T::Inner>()) });
    });
}
