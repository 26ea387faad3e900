//! `sam2_status`: the result of every fallible export, the one map from core errors onto it, the
//! calling thread's last error message recorded beside it (as rustls-ffi keeps its error and its
//! status in one place), and the guards that turn an export's body (its `Result`, or a panic)
//! into a status.

use std::cell::RefCell;

use super::c_enum::c_enum;
use sam2::Error;

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
    /// The status of a core error: the one map from errors onto statuses.
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
            Error::Cancelled | Error::Interrupted { .. } => SAM2_ERR_CANCELLED,
            Error::QueueFull { .. } => SAM2_ERR_QUEUE_FULL,
            Error::OutOfMemory { .. } => SAM2_ERR_OUT_OF_MEMORY,
        }
    }
}

c_enum! {
    impl sam2_status {
        SAM2_OK => "success",
        SAM2_ERR_NULL_ARGUMENT => "a required pointer argument was NULL",
        SAM2_ERR_INVALID_ARGUMENT => "an argument is invalid",
        SAM2_ERR_BUFFER_TOO_SMALL => "the buffer is too small",
        SAM2_ERR_RUNTIME_NOT_FOUND => "ONNX Runtime could not be loaded",
        SAM2_ERR_MODEL => "the model is unreadable or not a recognised SAM2 export",
        SAM2_ERR_IO => "a file operation failed",
        SAM2_ERR_EMBEDDING_NOT_SERIALIZABLE => "the embedding is in device memory and cannot be saved",
        SAM2_ERR_EMBEDDING_FORMAT => "the embedding file is invalid",
        SAM2_ERR_MODEL_MISMATCH => "made by a different model",
        SAM2_ERR_ENVIRONMENT_CONFIGURATION => "the requested device or environment is not available",
        SAM2_ERR_ONNXRUNTIME => "ONNX Runtime reported an error",
        SAM2_ERR_PANIC => "internal error",
        SAM2_ERR_TIMEOUT => "the wait ended before the work did",
        SAM2_ERR_CANCELLED => "the work was cancelled",
        SAM2_ERR_QUEUE_FULL => "the queue is full",
        SAM2_ERR_OUT_OF_MEMORY => "not enough memory for the result",
    }
}

/// Runs an export's body: a `Result<(), Error>` becomes a status (recording the message), and a
/// panic becomes `SAM2_ERR_PANIC` instead of unwinding into C. The first call installs the panic
/// hook (`sam2::__private::panics`), so the panic's message reaches the last error and the log callback,
/// not the host's stderr.
pub(crate) fn guard(body: impl FnOnce() -> Result<(), Error>) -> sam2_status {
    sam2::__private::panics::install_hook();
    match sam2::__private::panics::catch(body) {
        Ok(Ok(())) => sam2_status::SAM2_OK,
        Ok(Err(e)) => fail(e),
        Err(payload) => fail(Error::Panic(sam2::__private::panics::describe(
            payload.as_ref(),
        ))),
    }
}

/// Runs an export that returns a value rather than a status (a pointer, a flag, a count): a panic
/// gives `fallback`, its message recorded as the thread's last error and sent to the log callback
/// as [`guard`] does.
pub(crate) fn guard_value<T>(fallback: T, body: impl FnOnce() -> T) -> T {
    sam2::__private::panics::install_hook();
    match sam2::__private::panics::catch(body) {
        Ok(value) => value,
        Err(payload) => {
            fail(Error::Panic(sam2::__private::panics::describe(
                payload.as_ref(),
            )));
            fallback
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A panic in an export that returns a value reaches the host as it does from a status
    /// export: the fallback, and the panic's message (with its place) as the last error.
    #[test]
    fn guard_value_keeps_the_panic_message() {
        let got = guard_value(-1, || -> i32 { panic!("boom in a value export") });
        assert_eq!(got, -1);
        let message = super::super::last_error();
        assert!(
            message.contains("boom in a value export") && message.contains("status.rs"),
            "{message}"
        );
        assert_eq!(guard_value(-1, || 7), 7);
    }
}
