//! The library's log: warnings (a device fallback, say) and information reach the host through one sink.

use std::sync::{Arc, RwLock};

/// Severity of a log message. Values are part of the C ABI (`SAM2_LOG_*`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
#[repr(u32)]
pub enum LogLevel {
    Debug = 0,
    Info = 1,
    Warning = 2,
    Error = 3,
}

/// A log sink: receives the level and the message.
pub type LogSink = Arc<dyn Fn(LogLevel, &str) + Send + Sync>;

struct Registered {
    sink: LogSink,
    min_level: LogLevel,
}

static SINK: RwLock<Option<Registered>> = RwLock::new(None);

thread_local! {
    /// Whether this thread is inside [`emit`].
    static EMITTING: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// Installs (or with `None` removes) the process-wide log sink. Messages below `min_level` are dropped.
pub fn set_sink(sink: Option<LogSink>, min_level: LogLevel) {
    let mut guard = SINK.write().unwrap_or_else(|p| p.into_inner());
    *guard = sink.map(|sink| Registered { sink, min_level });
}

/// Sends a message to the sink, if one is installed and the level passes its filter.
///
/// The sink runs under the read lock, so once [`set_sink`] returns, the sink it replaced is
/// running nowhere and will not run again (a host may free what its callback uses).
pub fn emit(level: LogLevel, message: &str) {
    // A sink that logs (or panics, which the panic hook logs) is not called again from within
    // itself: that would recurse, and a panic inside the panic hook aborts the process.
    if EMITTING.with(|e| e.replace(true)) {
        return;
    }
    struct Done;
    impl Drop for Done {
        fn drop(&mut self) {
            EMITTING.with(|e| e.set(false));
        }
    }
    let _done = Done;
    let guard = SINK.read().unwrap_or_else(|p| p.into_inner());
    if let Some(reg) = guard.as_ref() {
        if level >= reg.min_level {
            // A panicking sink must not unwind through ONNX Runtime or the C boundary.
            let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                (reg.sink)(level, message)
            }));
        }
    }
}
