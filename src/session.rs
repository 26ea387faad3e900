//! Building ONNX Runtime sessions: the one place that turns the library's options into a session.

use std::path::Path;

use ort::session::builder::GraphOptimizationLevel;
use ort::session::Session;

use crate::device::{self, DeviceOptions, EffectiveDevice};
use crate::error::{Error, Result};
use crate::runtime;
use crate::weights::{ModelWeights, Optimization, WeightSharing};

/// Session settings common to encoders and predictors.
#[derive(Debug, Clone, Default)]
pub struct SessionOptions {
    /// Intra-op threads per session; `None` lets ONNX Runtime choose (one per core).
    pub intra_threads: Option<usize>,
    /// Execution providers wanted, and what to do when a GPU one is not available.
    pub device: DeviceOptions,
    /// Shared weights (default) or an explicit copy for this session.
    pub weights: WeightSharing,
    /// Graph optimisations ONNX Runtime applies when building the session.
    pub optimization: Optimization,
    /// The library's own load-time rewrites allowed (every one by default; see
    /// [`crate::models::Rewrite`]). Sessions with different sets hold different weights.
    pub rewrites: crate::models::Rewrites,
}

/// Most intra-op threads a session may ask for.
pub const MAX_INTRA_THREADS: usize = 1024;

impl SessionOptions {
    /// Refuses settings no session can honour, naming the field.
    pub fn validate(&self) -> Result<()> {
        if let Some(n) = self.intra_threads {
            if n == 0 || n > MAX_INTRA_THREADS {
                return Err(Error::invalid(
                    "intra_threads",
                    format!("must be 1 to {MAX_INTRA_THREADS} (unset: automatic), got {n}"),
                ));
            }
        }
        self.device.validate()
    }
}

/// What a session's intra-op worker threads do when a parallel section is over.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Idle {
    /// They spin a while for the next one (ONNX Runtime's default): the next operator of the same
    /// run starts without a wake-up.
    Spin,
    /// They sleep at once. For sessions run one after another, as the tracker's four modules are:
    /// each session has its own pool, and a finished module's spinning workers take the cores
    /// the next module's workers need. Measured on 2 cores (`bench_video`, EdgeTAM at 1280×720):
    /// 852–882 ms a frame against 967–976 ms with spinning; the generated tracker 16.4–17.2 ms
    /// against 17.5–18.6.
    Sleep,
}

/// Creates a session on the requested providers from a model's shared weights (each weight used
/// in place, pre-packed forms shared), and says what it really runs on. The weights hold a graph
/// optimised at `options.optimization` already, so the session optimises nothing itself.
pub(crate) fn build(
    weights: &ModelWeights,
    path: &Path,
    options: &SessionOptions,
    role: &str,
    idle: Idle,
) -> Result<(Session, EffectiveDevice)> {
    let bytes = weights.model.as_slice();
    let file_name = path
        .file_name()
        .map(|n| n.to_string_lossy())
        .unwrap_or_default();
    let env = runtime::environment()?;
    let mut builder = Session::builder(env)?
        .with_optimization_level(GraphOptimizationLevel::Disable)?
        .with_log_id(format!("sam2:{file_name}"))?;
    if let Some(n) = options.intra_threads {
        builder = builder.with_intra_threads(n)?;
    }
    if runtime::shared_arena() {
        builder = builder.with_env_allocators()?;
    }
    // No memory patterns. A pattern plans a run's intermediate tensors as one block, cached per
    // set of input shapes. The decoder's shapes change on every call (points, objects, image
    // size), so it would plan again and again, each new block landing elsewhere in the arena;
    // the encoder's block is one huge allocation (512 MiB for the SAM2-sized bench model) that
    // fits none of the arena regions its first run made, so a second region of that size is
    // added and the first ones sit idle. Measured: the bench encoder holds 820 MiB resident
    // without patterns against 1150-1250 MiB with them, for about 2% more encode time (six
    // interleaved runs); the tiny-model soak (tests/soak.rs) ends 50 MiB lower without them.
    builder = builder.with_memory_pattern(false)?;
    if idle == Idle::Sleep {
        builder = builder.with_config_entry("session.intra_op.allow_spinning", "0")?;
    }
    let outcome = device::register(&mut builder, &options.device);
    for (name, value) in weights.values_for(&options.device) {
        builder = builder.with_initializer(name, value)?;
    }
    builder = builder.with_prepacked_weights(&weights.prepacked)?;
    if !weights.values.is_empty() {
        // The external-data entries name an empty file that ONNX Runtime checks exists and never
        // reads (every such initializer was given above).
        let dir = match &weights.weights_file {
            Some(file) => file.dir.as_path(),
            None => {
                crate::platform::empty_file()
                    .map_err(|e| Error::io("preparing the empty file shared weights point to", e))?
                    .0
            }
        };
        builder = builder.with_config_entry(
            "session.model_external_initializers_file_folder_path",
            dir.to_str()
                .ok_or_else(|| Error::invalid("temporary directory", "is not valid UTF-8"))?,
        )?;
    }
    let session = builder
        .commit_from_memory(bytes)
        .map_err(|e| Error::model(path, format!("ONNX Runtime cannot load it: {e}")))?;
    let what = format!("{role} {file_name}");
    let effective = device::resolve(&session, &options.device, outcome, &what)?;
    Ok((session, effective))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn intra_threads_are_bounded() {
        let options = |n: Option<usize>| SessionOptions {
            intra_threads: n,
            ..Default::default()
        };
        for ok in [None, Some(1), Some(MAX_INTRA_THREADS)] {
            assert!(options(ok).validate().is_ok(), "{ok:?}");
        }
        for bad in [0, MAX_INTRA_THREADS + 1, usize::MAX] {
            let e = options(Some(bad)).validate().unwrap_err().to_string();
            assert!(
                e.contains("`intra_threads`") && e.contains(&bad.to_string()),
                "{e}"
            );
        }
    }

    #[test]
    fn the_device_part_is_checked() {
        let options = SessionOptions {
            device: DeviceOptions {
                providers: vec![crate::device::ProviderRequest::cuda(-1)],
                ..Default::default()
            },
            ..Default::default()
        };
        let e = options.validate().unwrap_err().to_string();
        assert!(e.contains("device_id"), "{e}");
    }
}
