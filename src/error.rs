//! Errors of the safe core. The C boundary maps each variant onto one `sam2_status`.

use std::path::PathBuf;
use std::sync::Arc;

/// Every way an operation of this library can fail. Cloneable, so that one failed background
/// encode can be reported to each of its waiters.
#[derive(Debug, Clone, thiserror::Error)]
pub enum Error {
    /// A required pointer was NULL (only produced by the C boundary).
    #[error("argument `{0}` must not be NULL")]
    NullArgument(&'static str),

    /// A value was out of range, malformed or inconsistent.
    #[error("invalid argument `{name}`: {reason}")]
    InvalidArgument { name: &'static str, reason: String },

    /// A caller buffer cannot hold the result; `needed` says how large it must be.
    #[error("buffer too small: {needed} bytes needed, {given} given")]
    BufferTooSmall { needed: usize, given: usize },

    /// No usable ONNX Runtime shared library was found.
    #[error("ONNX Runtime could not be loaded: {0}")]
    RuntimeNotFound(String),

    /// A model file is unreadable or does not follow a known SAM2 export contract.
    #[error("model {path}: {reason}")]
    Model { path: PathBuf, reason: String },

    /// The operating system failed a file operation.
    #[error("{context}: {source}")]
    Io {
        context: String,
        /// Shared, because `std::io::Error` cannot be cloned.
        #[source]
        source: Arc<std::io::Error>,
    },

    /// The embedding lives in memory the host cannot read (device memory), so it cannot be written.
    #[error(
        "embedding is held by the `{allocator}` allocator (device memory) and cannot be serialized; \
         copy it to the host first (sam2_embedding_to_host) or encode with a Host output target"
    )]
    EmbeddingNotSerializable { allocator: String },

    /// An embedding file is truncated, corrupted, foreign or of an unsupported version.
    #[error("embedding file: {0}")]
    EmbeddingFormat(String),

    /// An embedding, file or tensor was made by a different model than the one asked to use it.
    #[error("model mismatch: {0}")]
    ModelMismatch(String),

    /// The execution environment cannot give what was asked for (a GPU provider that is not there).
    #[error("environment configuration: {0}")]
    EnvironmentConfiguration(String),

    /// ONNX Runtime reported an error.
    #[error("ONNX Runtime: {0}")]
    OnnxRuntime(String),

    /// A background encode was cancelled before it finished.
    #[error("the encode was cancelled before it finished")]
    Cancelled,

    /// A long call was stopped by its progress callback (segment everything).
    #[error("{what} was cancelled by its progress callback after {done} of {total} {unit}")]
    Interrupted {
        what: &'static str,
        done: u64,
        total: u64,
        unit: &'static str,
    },

    /// A wait ended before the work did; the work goes on.
    #[error(
        "the encode did not finish within {waited_ms} ms; it goes on (wait again, or cancel it)"
    )]
    Timeout { waited_ms: u64 },

    /// The background queue holds as many requests as it may.
    #[error(
        "the background queue already holds {limit} encodes (the cache's queue_limit); \
         wait for one to finish, or cancel some"
    )]
    QueueFull { limit: usize },

    /// A panic was caught at the C boundary.
    #[error("internal error (panic): {0}")]
    Panic(String),

    /// Memory for a result could not be allocated; nothing was changed.
    #[error("not enough memory for {what}: {bytes} bytes could not be allocated")]
    OutOfMemory { what: String, bytes: usize },
}

impl Error {
    /// An invalid argument: `name` (as the caller knows it) and what is wrong with it.
    pub fn invalid(name: &'static str, reason: impl Into<String>) -> Self {
        Error::InvalidArgument {
            name,
            reason: reason.into(),
        }
    }

    pub(crate) fn io(context: impl Into<String>, source: std::io::Error) -> Self {
        Error::Io {
            context: context.into(),
            source: Arc::new(source),
        }
    }

    pub(crate) fn model(path: impl Into<PathBuf>, reason: impl Into<String>) -> Self {
        Error::Model {
            path: path.into(),
            reason: reason.into(),
        }
    }
}

impl<T> From<ort::Error<T>> for Error {
    fn from(e: ort::Error<T>) -> Self {
        Error::OnnxRuntime(e.to_string())
    }
}

pub type Result<T, E = Error> = std::result::Result<T, E>;

/// The error of a reservation of `count` values of `T` that failed.
fn out_of_memory<T>(count: usize, what: &str) -> Error {
    Error::OutOfMemory {
        what: what.to_string(),
        bytes: count.saturating_mul(std::mem::size_of::<T>()),
    }
}

/// A vector of `len` default values, or [`Error::OutOfMemory`] naming `what` when the memory
/// cannot be had (instead of aborting the process, as `vec!` does).
pub(crate) fn try_zeroed<T: Clone + Default>(len: usize, what: &str) -> Result<Vec<T>> {
    try_filled(len, T::default(), what)
}

/// A vector of `len` copies of `value`, or [`Error::OutOfMemory`] naming `what`.
pub(crate) fn try_filled<T: Clone>(len: usize, value: T, what: &str) -> Result<Vec<T>> {
    let mut v = Vec::new();
    try_resize(&mut v, len, value, what)?;
    Ok(v)
}

/// An empty vector with room for `capacity` values, or [`Error::OutOfMemory`] naming `what`.
pub(crate) fn try_with_capacity<T>(capacity: usize, what: &str) -> Result<Vec<T>> {
    let mut v = Vec::new();
    v.try_reserve_exact(capacity)
        .map_err(|_| out_of_memory::<T>(capacity, what))?;
    Ok(v)
}

/// `Vec::resize`, reserving exactly what it needs fallibly first.
pub(crate) fn try_resize<T: Clone>(v: &mut Vec<T>, len: usize, value: T, what: &str) -> Result<()> {
    if len > v.len() {
        v.try_reserve_exact(len - v.len())
            .map_err(|_| out_of_memory::<T>(len, what))?;
    }
    v.resize(len, value);
    Ok(())
}

/// `Vec::push`, growing fallibly (amortised doubling, as `push` does).
#[inline]
pub(crate) fn try_push<T>(v: &mut Vec<T>, value: T, what: &str) -> Result<()> {
    if v.len() == v.capacity() {
        v.try_reserve(1)
            .map_err(|_| out_of_memory::<T>(v.len().saturating_mul(2).max(1), what))?;
    }
    v.push(value);
    Ok(())
}

/// Room for `additional` more values (amortised), or [`Error::OutOfMemory`] naming `what`.
pub(crate) fn try_reserve<T>(v: &mut Vec<T>, additional: usize, what: &str) -> Result<()> {
    v.try_reserve(additional)
        .map_err(|_| out_of_memory::<T>(v.len().saturating_add(additional), what))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_allocation_that_cannot_be_had_is_an_error_not_an_abort() {
        match try_zeroed::<u8>(usize::MAX / 2, "a test buffer") {
            Err(Error::OutOfMemory { what, bytes }) => {
                assert_eq!(what, "a test buffer");
                assert_eq!(bytes, usize::MAX / 2);
            }
            other => panic!("expected OutOfMemory, got {:?}", other.map(|v| v.len())),
        }
        assert_eq!(try_zeroed::<f32>(3, "small").unwrap(), vec![0.0; 3]);
    }

    #[test]
    fn a_clone_is_the_same_error_down_to_the_os_code() {
        let error = Error::io(
            "cannot open /nowhere/x.sam2",
            std::io::Error::from_raw_os_error(libc::ENOENT),
        );
        let copy = error.clone();
        assert_eq!(copy.to_string(), error.to_string());
        match copy {
            Error::Io { source, .. } => {
                assert_eq!(source.raw_os_error(), Some(libc::ENOENT));
                assert_eq!(source.kind(), std::io::ErrorKind::NotFound);
            }
            other => panic!("expected Io, got {other:?}"),
        }
        let invalid = Error::invalid("options.pool_size", "must be 0 to 8, got 9");
        assert_eq!(
            invalid.clone().to_string(),
            "invalid argument `options.pool_size`: must be 0 to 8, got 9"
        );
    }
}
