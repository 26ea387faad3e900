//! Panics the library contains: where they are caught (the C ABI's guards, in sam2-capi, and the
//! cache's worker), and the panic hook that routes their message to the log instead of the host's
//! stderr. Reached by the boundary crates over the core through `sam2::__private` (not part of
//! the API): a caller that must not unwind (the C ABI) runs each call inside [`catch`] after
//! [`install_hook`], and reports [`describe`].
//!
//! Rust's default hook prints "thread '…' panicked at …" (and, with `RUST_BACKTRACE`, a whole
//! backtrace) on stderr before the panic is caught, so every `SAM2_ERR_PANIC` used to write on a
//! host's terminal. The hook installed by [`install_hook`] (once, from the C boundary's first
//! call) handles the panics of code running inside [`catch`] itself: it records the panic's
//! location for the error message and sends one `SAM2_LOG_ERROR` line through the log callback.
//! Every other panic goes to the hook that was installed before (the host's own, or Rust's
//! default), untouched.
//!
//! A panic counts as ours when this thread is inside [`catch`], or when it is a worker of the
//! rayon pool while some [`catch`] is running (the library's parallel loops run there, and their
//! panics come back to the caught call). In the Rust library (not the C one) a host that shares
//! the rayon pool and panics on it during a library call has that panic logged rather than
//! printed.

use std::cell::{Cell, RefCell};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Once;

use crate::log::{emit, LogLevel};

thread_local! {
    /// How many [`catch`] scopes this thread is inside.
    static DEPTH: Cell<u32> = const { Cell::new(0) };
    /// `file:line` of the last panic the hook took for this thread's [`catch`].
    static LOCATION: RefCell<Option<String>> = const { RefCell::new(None) };
}

/// [`catch`] scopes running on any thread.
static ACTIVE: AtomicUsize = AtomicUsize::new(0);

static HOOK: Once = Once::new();

/// Leaves a [`catch`] scope, also when the body unwinds.
struct Scope;

impl Scope {
    fn enter() -> Scope {
        DEPTH.with(|d| d.set(d.get() + 1));
        ACTIVE.fetch_add(1, Ordering::SeqCst);
        Scope
    }
}

impl Drop for Scope {
    fn drop(&mut self) {
        ACTIVE.fetch_sub(1, Ordering::SeqCst);
        DEPTH.with(|d| d.set(d.get().saturating_sub(1)));
    }
}

fn ours() -> bool {
    DEPTH.with(|d| d.get() > 0)
        || (ACTIVE.load(Ordering::SeqCst) > 0 && rayon::current_thread_index().is_some())
}

/// The text of a panic's payload.
pub(crate) fn message(payload: &(dyn std::any::Any + Send)) -> String {
    if let Some(s) = payload.downcast_ref::<&str>() {
        (*s).to_string()
    } else if let Some(s) = payload.downcast_ref::<String>() {
        s.clone()
    } else {
        "unknown panic".to_string()
    }
}

/// Installs the hook (once per process; later calls cost one atomic load). The hook it replaces
/// is kept and still receives every panic that is not the library's.
pub fn install_hook() {
    HOOK.call_once(|| {
        let previous = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            if !ours() {
                return previous(info);
            }
            let location = info
                .location()
                .map(|l| format!("{}:{}", l.file(), l.line()))
                .unwrap_or_else(|| "an unknown location".to_string());
            let text = message(info.payload());
            emit(
                LogLevel::Error,
                &format!("internal error (panic) at {location}: {text}"),
            );
            if DEPTH.with(|d| d.get() > 0) {
                LOCATION.with(|l| *l.borrow_mut() = Some(location));
            }
        }));
    });
}

/// Runs `body`, catching a panic. Inside, a panic's message goes to the log (once the hook is
/// installed) rather than to stderr.
pub fn catch<T>(body: impl FnOnce() -> T) -> std::thread::Result<T> {
    let _scope = Scope::enter();
    LOCATION.with(|l| *l.borrow_mut() = None);
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(body))
}

/// The message of a panic [`catch`] returned, with where it happened when the hook saw it.
pub fn describe(payload: &(dyn std::any::Any + Send)) -> String {
    let text = message(payload);
    match LOCATION.with(|l| l.borrow_mut().take()) {
        Some(location) => format!("{text} (at {location})"),
        None => text,
    }
}
