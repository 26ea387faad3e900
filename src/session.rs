//! Building ONNX Runtime sessions: the one place that turns the library's options into a session.

use std::path::Path;

use ort::session::builder::GraphOptimizationLevel;
use ort::session::Session;

use crate::device::{self, DeviceOptions, EffectiveDevice};
use crate::error::{Error, Result};
use crate::runtime;

/// Session settings common to encoders and predictors.
#[derive(Debug, Clone, Default)]
pub struct SessionOptions {
    /// Intra-op threads per session; `None` lets ONNX Runtime choose (one per core).
    pub intra_threads: Option<usize>,
    /// Execution providers wanted, and what to do when a GPU one is not available.
    pub device: DeviceOptions,
}

/// Reads a model file whole. Kept separate so the bytes can be fingerprinted and shared.
pub(crate) fn read_model(path: &Path) -> Result<Vec<u8>> {
    let bytes = std::fs::read(path).map_err(|e| match e.kind() {
        std::io::ErrorKind::NotFound | std::io::ErrorKind::PermissionDenied => {
            Error::model(path, format!("cannot be read: {e}"))
        }
        _ => Error::io(format!("reading model {}", path.display()), e),
    })?;
    if bytes.is_empty() {
        return Err(Error::model(path, "file is empty"));
    }
    Ok(bytes)
}

/// Creates a session from model bytes on the requested providers, and says what it really runs on.
pub(crate) fn build(
    bytes: &[u8],
    path: &Path,
    options: &SessionOptions,
    role: &str,
) -> Result<(Session, EffectiveDevice)> {
    let env = runtime::environment()?;
    let mut builder = Session::builder(env)?
        .with_optimization_level(GraphOptimizationLevel::All)?
        .with_log_id(format!(
            "sam2:{}",
            path.file_name()
                .map(|n| n.to_string_lossy())
                .unwrap_or_default()
        ))?;
    if let Some(n) = options.intra_threads {
        builder = builder.with_intra_threads(n)?;
    }
    let outcome = device::register(&mut builder, &options.device);
    let session = builder
        .commit_from_memory(bytes)
        .map_err(|e| Error::model(path, format!("ONNX Runtime cannot load it: {e}")))?;
    let what = format!(
        "{role} {}",
        path.file_name()
            .map(|n| n.to_string_lossy())
            .unwrap_or_default()
    );
    let effective = device::resolve(&session, &options.device, outcome, &what)?;
    Ok((session, effective))
}
