//! One copy of a model's weights for every session of it.
//!
//! A SAM2 export carries its weights inline. Opened naively, every ONNX Runtime session parses
//! its own copy of them, rewrites its own copy while optimising the graph, and pre-packs its own
//! copy again. Instead, the library reads a model file once and:
//!
//! 1. optimises the graph once, at the requested level, in a throwaway session that writes the
//!    optimised model (fused and re-laid-out weights included) to a private temporary file,
//!    read back and deleted at once ([`optimize`]);
//! 2. moves the large initializers of that optimised graph out of the proto: they become
//!    external-data entries naming a file that exists but holds nothing (`/dev/null`), so any
//!    attempt by ONNX Runtime to read them fails loudly instead of reading wrong bytes;
//! 3. keeps each initializer once as an ONNX Runtime value and hands it to every session with
//!    `AddInitializer` (used in place), together with one shared pre-packed-weights container.
//!
//! Every session then runs the optimised graph with optimisation disabled: nothing rewrites a
//! weight after the values are handed over. (Handing values to a session that optimises the
//! graph itself is what broke real SAM2 exports: ONNX Runtime's transpose optimiser re-lays an
//! initializer out under its own name, then `AddInitializer`'s value of the old shape replaces it,
//! and the encoder fails with "Attempting to broadcast an axis by a dimension other than 1".)
//!
//! A process-wide registry keyed by the file's identity and the optimisation plan holds the
//! weights while any session uses them and releases them with the last one.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, Weak};
use std::time::SystemTime;

use ort::session::builder::PrepackedWeights;
use ort::value::{DynValue, Tensor};

use ort::session::builder::GraphOptimizationLevel;
use ort::session::Session;

use crate::device::{DeviceOptions, Optimise, Provider};
use crate::error::{Error, Result};
use crate::fingerprint::Fingerprint;
use crate::onnx::split;
use crate::onnx::DataType;
use crate::platform;
use crate::precision::{self, Variant};
use crate::rewrite::{self, Rewrite, RewriteReport, Rewrites};

/// How far ONNX Runtime optimises the graph. The graph is optimised once per process and model
/// (see [`get`]), so every level keeps the weights shared, fused ones included.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Optimization {
    /// Provider-independent rewrites (constant folding, redundant-node removal, transposes).
    Basic,
    /// None at all: the graph runs as exported.
    None,
    /// Everything ONNX Runtime has for the session's provider: fusions and, on the CPU, blocked
    /// layouts (the default; ONNX Runtime's own default level).
    #[default]
    All,
}

/// Reads a model file whole. Kept separate so the bytes can be fingerprinted and shared.
pub(crate) fn read_model(path: &Path) -> Result<Vec<u8>> {
    // A FIFO would block the read forever and a device would never end: only regular files.
    match std::fs::metadata(path) {
        // A directory is the same I/O error on every system (Windows would say "access denied").
        Ok(meta) if meta.is_dir() => {
            return Err(Error::io(
                format!("reading model {}", path.display()),
                std::io::Error::other("it is a directory"),
            ));
        }
        Ok(meta) if !meta.is_file() => {
            let kind = crate::platform::kind_of(meta.file_type());
            return Err(Error::model(path, format!("is {kind}, not a regular file")));
        }
        _ => {}
    }
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

/// How sessions of one model hold its weights. Values are part of the C ABI (`SAM2_WEIGHTS_*`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum WeightSharing {
    /// One copy per process, used in place by every session (the default).
    #[default]
    Shared,
    /// An explicit copy of the weights for this session alone (isolation), made only on request.
    Copy,
}

/// Initializers smaller than this stay inline in the model: sharing them saves nothing.
const MIN_SHARED_BYTES: usize = 1024;

/// How a model's graph is optimised before its weights are shared: the level, and the provider
/// whose kernels the optimiser may target. Sessions of different plans hold different weights
/// (a fused graph has other initializers than an unfused one).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Plan {
    level: Optimization,
    /// `None`: optimised for the CPU provider, which suits every provider (basic rewrites are
    /// provider-independent). `Some`: optimised with these providers registered, so that their
    /// own fusions apply (CUDA); the throwaway session registers them as the real ones will.
    providers: Option<DeviceOptions>,
    /// The sessions may read some shared weights from the model file themselves: WebGPU kernels
    /// re-lay some weights out while the session is built, from the graph's copy of them. Their
    /// external-data entries then name a private file holding the optimised model (so every
    /// reference is true) instead of the empty file.
    readable_weights: bool,
    /// Attention subgraphs are rewritten into ONNX Runtime's fused attention first
    /// ([`crate::rewrite`]): on the CPU, CUDA and WebGPU, which have kernels for it, at every
    /// level but `None` (the graph as exported).
    fuse_attention: bool,
    /// The sessions run on the CPU provider.
    cpu: bool,
    /// The library's own rewrites allowed ([`crate::SessionOptions::rewrites`]).
    rewrites: Rewrites,
}

impl Plan {
    /// The plan for sessions with these options: the first requested provider's
    /// ([`crate::device::ProviderInfo::graph`]). CPU sessions and CUDA ones are optimised at the
    /// requested level with their providers. Providers that compile the graph themselves
    /// (TensorRT, DirectML, CoreML) cannot have a pre-optimised graph saved with their nodes, nor
    /// WebGPU (it picks its kernels and re-lays some weights out when the session is built), so
    /// their graph gets the provider-independent basic rewrites and they do the rest.
    pub(crate) fn new(level: Optimization, device: &DeviceOptions, rewrites: Rewrites) -> Self {
        let first = device
            .providers
            .first()
            .map_or(Provider::Cpu, |r| r.provider);
        let graph = first.info().graph;
        Plan {
            level: match graph.optimise {
                Optimise::Basic if level == Optimization::All => Optimization::Basic,
                _ => level,
            },
            providers: (graph.optimise == Optimise::WithProviders).then(|| device.clone()),
            readable_weights: graph.readable_weights,
            fuse_attention: graph.fused_attention && level != Optimization::None,
            cpu: graph.cpu_rewrites,
            rewrites,
        }
    }

    fn ort_level(&self) -> GraphOptimizationLevel {
        match self.level {
            Optimization::None => GraphOptimizationLevel::Disable,
            Optimization::Basic => GraphOptimizationLevel::Level1,
            Optimization::All => GraphOptimizationLevel::All,
        }
    }
}

/// A model's weights, held once.
#[derive(Debug)]
pub(crate) struct ModelWeights {
    /// The optimised model proto without its large initializers (external-data entries that
    /// name [`platform::empty_file`], which has no data to give).
    pub model: Vec<u8>,
    /// Each moved initializer as one ONNX Runtime value (host memory), given to every session.
    pub values: Vec<(String, Arc<DynValue>)>,
    /// Pre-packed kernel forms of the weights, shared by the sessions built with these weights.
    pub prepacked: PrepackedWeights,
    pub fingerprint: Fingerprint,
    /// Bytes of weight data held in `values`.
    pub weight_bytes: usize,
    /// Copies of `values` on a device, one per (allocator, device id), made on first use.
    #[allow(clippy::type_complexity)]
    device_values: Mutex<Vec<((String, i32), Vec<(String, Arc<DynValue>)>)>>,
    /// The device copies that `device_values` are views of (declared after them, so dropped after).
    device_owners: Mutex<Vec<ort::value::DynTensor>>,
    /// Weights kept in host memory on every device: those that are graph outputs as they are.
    host_only: std::collections::HashSet<String>,
    /// The private file the external-data entries name when sessions may read weights
    /// ([`Plan`]'s `readable_weights`); removed with the weights.
    pub weights_file: Option<WeightsFile>,
    /// Which attention subgraphs were fused when the model was loaded.
    pub attention: RewriteReport,
    /// The precision the model file says or shows it runs in ([`crate::precision`]).
    pub variant: Variant,
}

// SAFETY: every field is immutable after construction; the ONNX Runtime values and the
// prepacked container are only read by sessions, which ONNX Runtime allows from any thread.
unsafe impl Send for ModelWeights {}
unsafe impl Sync for ModelWeights {}

/// Which file a model is: a model copied over another with the same size and a restored
/// modification time is another model (the device, inode and change time say so).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
struct Key {
    path: PathBuf,
    len: u64,
    modified: Option<SystemTime>,
    identity: platform::FileIdentity,
}

#[allow(clippy::type_complexity)]
static REGISTRY: Mutex<Vec<((Key, Plan), Weak<ModelWeights>)>> = Mutex::new(Vec::new());

fn key(path: &Path) -> Result<Key> {
    let canonical = path
        .canonicalize()
        .map_err(|e| Error::model(path, format!("cannot be read: {e}")))?;
    let meta = std::fs::metadata(&canonical)
        .map_err(|e| Error::model(path, format!("cannot be read: {e}")))?;
    Ok(Key {
        path: canonical,
        len: meta.len(),
        modified: meta.modified().ok(),
        identity: platform::FileIdentity::of(&meta),
    })
}

/// A tensor that owns a copy of `bytes` in memory the library allocated: ONNX Runtime's
/// `AddInitializer` accepts only user-owned buffers (not ones from its own allocators).
fn typed<T: ort::value::PrimitiveTensorElementType + std::fmt::Debug + Clone + 'static>(
    dims: &[i64],
    bytes: &[u8],
    from: fn(&[u8]) -> T,
) -> Result<DynValue> {
    let size = std::mem::size_of::<T>();
    let data: Vec<T> = bytes.chunks_exact(size).map(from).collect();
    Ok(Tensor::from_array((dims.to_vec(), data))?.into_dyn())
}

fn owned_value(data_type: i32, dims: &[i64], b: &[u8]) -> Option<Result<DynValue>> {
    macro_rules! le {
        ($t:ty) => {
            |c: &[u8]| <$t>::from_le_bytes(c.try_into().expect("element size"))
        };
    }
    Some(match DataType::from_code(data_type.into())? {
        DataType::Float => typed::<f32>(dims, b, le!(f32)),
        DataType::Uint8 => typed::<u8>(dims, b, |c| c[0]),
        DataType::Int8 => typed::<i8>(dims, b, |c| c[0] as i8),
        DataType::Uint16 => typed::<u16>(dims, b, le!(u16)),
        DataType::Int16 => typed::<i16>(dims, b, le!(i16)),
        DataType::Int32 => typed::<i32>(dims, b, le!(i32)),
        DataType::Int64 => typed::<i64>(dims, b, le!(i64)),
        DataType::Bool => typed::<bool>(dims, b, |c| c[0] != 0),
        DataType::Float16 => typed::<half::f16>(dims, b, |c| {
            half::f16::from_bits(u16::from_le_bytes([c[0], c[1]]))
        }),
        DataType::Double => typed::<f64>(dims, b, le!(f64)),
        DataType::Uint32 => typed::<u32>(dims, b, le!(u32)),
        DataType::Uint64 => typed::<u64>(dims, b, le!(u64)),
        DataType::Bfloat16 => typed::<half::bf16>(dims, b, |c| {
            half::bf16::from_bits(u16::from_le_bytes([c[0], c[1]]))
        }),
        _ => return None,
    })
}

/// Optimises `bytes` once at the plan's level (`None`: not at all) in a throwaway session and
/// returns the optimised model, every weight inline. The session writes it to a private temporary
/// directory, removed before returning.
///
/// A large export may keep its weights in external-data files beside the `.onnx`: they are read
/// from the directory of `path` as given (as ONNX Runtime does for a model opened by path, so a
/// symbolic link to a model reads the files beside the link), and ONNX Runtime refuses a location
/// that is absolute or leaves that directory.
///
/// `source`: a rewritten model to optimise instead of the file (every weight inline: the
/// attention rewriter leaves models with external data alone).
fn optimize(path: &Path, plan: &Plan, source: Option<&[u8]>) -> Result<Vec<u8>> {
    let level = plan.ort_level();
    let absolute = std::path::absolute(path)
        .map_err(|e| Error::model(path, format!("cannot be read: {e}")))?;
    let dir = platform::PrivateTempDir::new("sam2-optimize")
        .map_err(|e| Error::io("creating a temporary directory for graph optimisation", e))?;
    let out = dir.path().join("optimized.onnx");
    let env = crate::runtime::environment()?;
    let mut builder = Session::builder(env)?
        .with_optimization_level(level)?
        .with_optimized_model_path(&out)?
        // The throwaway session is never run: no pre-packing, no thread pool to speak of, and
        // only errors in the log (saving a fused graph always warns that it is hardware-specific,
        // which is the point: it is used on this machine, by this process, only).
        .with_config_entry("session.disable_prepacking", "1")?
        .with_intra_threads(1)?
        .with_log_level(ort::logging::LogLevel::Error)?
        // Every weight inline in the saved model, those of external-data files included (without
        // an external-initializer file named, ONNX Runtime would keep the model's references to
        // its own data files, which the shared sessions do not read).
        .with_config_entry(
            "session.optimized_model_external_initializers_file_name",
            "optimized.bin",
        )?
        .with_config_entry(
            "session.optimized_model_external_initializers_min_size_in_bytes",
            (1u64 << 62).to_string(),
        )?;
    if let Some(device) = &plan.providers {
        let _ = crate::device::register(&mut builder, device);
    }
    // Opened by path, not from the bytes the caller read: ONNX Runtime resolves and checks
    // external data against the model's directory only for a model it opens by path (from bytes
    // it resolves against the working directory and ignores the folder option during that
    // check). The caller's bytes, read just before, give the fingerprint.
    let session = match source {
        Some(bytes) => builder.commit_from_memory(bytes),
        None => builder.commit_from_file(&absolute),
    }
    .map_err(|e| Error::model(path, format!("ONNX Runtime cannot load it: {e}")))?;
    drop(session);
    std::fs::read(&out).map_err(|e| Error::io("reading the optimised model back", e))
}

/// Reads a model and sets its weights apart: the graph is optimised once, then the bytes of each
/// large initializer are copied once into an aligned ONNX Runtime tensor, and the proto keeps
/// only references to them.
fn load(path: &Path, bytes: &[u8], plan: &Plan) -> Result<ModelWeights> {
    let fingerprint = Fingerprint::of_bytes(bytes);
    let variant = precision::detect(bytes).map_err(|e| Error::model(path, e))?;
    if let Some(label) = variant.contradicted {
        crate::log::emit(
            crate::log::LogLevel::Warning,
            &format!(
                "{}: its metadata says sam2.precision = {label}, but its graph is {}: reported as \
                 {}",
                path.display(),
                variant.precision,
                variant.precision
            ),
        );
    }
    let (fused, mut attention) = fuse_attention(path, bytes, plan, &variant);
    let optimized = match fused.map(|model| optimize(path, plan, Some(&model))) {
        Some(Ok(optimized)) => Ok(optimized),
        Some(Err(e)) => {
            crate::log::emit(
                crate::log::LogLevel::Warning,
                &format!("{}: attention runs as exported: {e}", path.display()),
            );
            attention = RewriteReport::not_tried(
                format!("ONNX Runtime refused the fused graph: {e}"),
                plan.rewrites,
            );
            optimize(path, plan, None)
        }
        None => optimize(path, plan, None),
    };
    let optimized = optimized.map_err(|error| {
        // A file that is not ONNX at all gets the splitter's precise message (field, byte
        // offset) rather than ONNX Runtime's parse error; the walk (a copy of the model) is
        // made only when loading failed.
        match split::split(bytes, usize::MAX) {
            Err(e) => Error::model(path, format!("is not a readable ONNX model: {e}")),
            Ok(_) => error,
        }
    })?;
    let (_, empty) = platform::empty_file()
        .map_err(|e| Error::io("preparing the empty file shared weights point to", e))?;
    let weights_file = if plan.readable_weights {
        Some(WeightsFile::write(&optimized)?)
    } else {
        None
    };
    let location = match &weights_file {
        Some(file) => file.name.as_str(),
        None => empty,
    };
    let split = split::split_with_location(&optimized, MIN_SHARED_BYTES, location)
        .map_err(|e| Error::model(path, format!("is not a readable ONNX model: {e}")))?;
    // Weights that are graph outputs as they are (the memory encoder's constant `temporal_code`
    // and `maskmem_pos_enc`) feed no kernel: ONNX Runtime plans them in host memory, and a device
    // copy would be refused with a warning and copied back by every session.
    let outputs: std::collections::HashSet<String> = split::graph_output_names(&optimized)
        .map_err(|e| Error::model(path, format!("is not a readable ONNX model: {e}")))?
        .into_iter()
        .collect();
    let mut values = Vec::with_capacity(split.initializers.len());
    let mut host_only = std::collections::HashSet::new();
    let mut weight_bytes = 0;
    for init in &split.initializers {
        let src = &optimized[init.offset..init.offset + init.len];
        let value = owned_value(init.data_type, &init.dims, src).ok_or_else(|| {
            Error::model(
                path,
                format!(
                    "initializer `{}` has unsupported data type {}",
                    init.name, init.data_type
                ),
            )
        })??;
        weight_bytes += init.len;
        if outputs.contains(&init.name) {
            host_only.insert(init.name.clone());
        }
        values.push((init.name.clone(), Arc::new(value)));
    }
    Ok(ModelWeights {
        model: split.model,
        values,
        prepacked: PrepackedWeights::new(),
        fingerprint,
        weight_bytes,
        device_values: Mutex::new(Vec::new()),
        device_owners: Mutex::new(Vec::new()),
        host_only,
        weights_file,
        attention,
        variant,
    })
}

/// The model with its attention fused, when the plan asks for it and the rewriter found some;
/// and the report. A failure of the rewriter itself leaves the model as exported.
fn fuse_attention(
    path: &Path,
    bytes: &[u8],
    plan: &Plan,
    variant: &Variant,
) -> (Option<Vec<u8>>, RewriteReport) {
    if !plan.fuse_attention {
        let why = if plan.level == Optimization::None {
            "optimisation off"
        } else {
            "not done for this provider"
        };
        return (None, RewriteReport::not_tried(why, plan.rewrites));
    }
    // A model that asks for int8 attention scores gets them where their kernel runs (ONNX
    // Runtime's int8 matrix kernels are CPU ones) and sums exactly.
    let mut note = None;
    let scores = match (
        variant.int8_scores,
        plan.cpu,
        rewrite::int8_scores_available(),
    ) {
        (true, _, _) if !plan.rewrites.contains(Rewrite::Int8Scores) => {
            note = Some("int8 scores asked for, not used: switched off".to_string());
            rewrite::Scores::Float
        }
        (true, true, Ok(())) => rewrite::Scores::INT8,
        (true, true, Err(why)) => {
            note = Some(format!("int8 scores asked for, not used: {why}"));
            rewrite::Scores::Float
        }
        (true, false, _) => {
            note = Some("int8 scores asked for, not used: they are for the CPU".to_string());
            rewrite::Scores::Float
        }
        (false, _, _) => rewrite::Scores::Float,
    };
    match rewrite::fuse(bytes, scores, plan.cpu, plan.rewrites) {
        Ok((model, mut report)) => {
            report.note = note;
            (model, report)
        }
        Err(e) => {
            crate::log::emit(
                crate::log::LogLevel::Debug,
                &format!("{}: attention runs as exported: {e}", path.display()),
            );
            (None, RewriteReport::not_tried(e, plan.rewrites))
        }
    }
}

impl ModelWeights {
    /// The values to give a session on these providers: the host copy, or, when the first
    /// requested provider is a GPU one that this ONNX Runtime build has, one copy on that
    /// device, made once and shared by every session there (a host value given to a GPU session
    /// would be copied to the device by each session: the per-session copy this module avoids).
    pub(crate) fn values_for(&self, device: &DeviceOptions) -> Vec<(String, Arc<DynValue>)> {
        let target = device
            .providers
            .first()
            .filter(|r| r.provider.is_gpu() && r.available_in_build());
        let Some(request) = target else {
            return self.values.clone();
        };
        let Some(memory_device) = request.provider.allocation_device() else {
            return self.values.clone();
        };
        let key = (memory_device.as_str().to_string(), request.device_id);
        let mut cache = self.device_values.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(values) = cache
            .iter()
            .find(|(k, _)| *k == key)
            .map(|(_, v)| v.clone())
        {
            return values;
        }
        // Each weight is copied to the device once; sessions get a view of that copy, since
        // `AddInitializer` refuses a value that owns its buffer (as ONNX Runtime's copies do).
        let copied: Result<Vec<_>> = self
            .values
            .iter()
            .map(|(name, value)| {
                let tensor = value.view().downcast::<ort::value::DynTensorValueType>()?;
                if self.host_only.contains(name) || !request.provider.computes_on_device(&tensor) {
                    // Integer weights (shapes, indices) feed the CPU kernels ONNX Runtime keeps
                    // shape arithmetic on, and graph outputs feed no kernel: they stay on the
                    // host, used in place there.
                    return Ok((name.clone(), Arc::clone(value), None));
                }
                let on_device =
                    crate::device_copy::copy(&tensor, memory_device.clone(), request.device_id)?;
                let view = crate::ort_raw::borrowed_view(&on_device).map_err(Error::OnnxRuntime)?;
                Ok((name.clone(), Arc::new(view), Some(on_device)))
            })
            .collect();
        let copied = copied.map(|all| {
            let mut owners = self.device_owners.lock().unwrap_or_else(|p| p.into_inner());
            all.into_iter()
                .map(|(name, view, owner)| {
                    owners.extend(owner);
                    (name, view)
                })
                .collect::<Vec<_>>()
        });
        match copied {
            Ok(values) => {
                cache.push((key, values.clone()));
                values
            }
            Err(e) => {
                crate::log::emit(
                    crate::log::LogLevel::Debug,
                    &format!(
                        "weights stay on the host: placing them on {} failed: {e}",
                        request.provider.ort_name()
                    ),
                );
                self.values.clone()
            }
        }
    }
}

/// A private file in the temporary directory holding an optimised model, for sessions that read
/// some weights from their external-data entries; deleted when dropped.
#[derive(Debug)]
pub(crate) struct WeightsFile {
    pub dir: PathBuf,
    pub name: String,
}

impl WeightsFile {
    fn write(model: &[u8]) -> Result<Self> {
        use std::sync::atomic::{AtomicU64, Ordering};
        static NEXT: AtomicU64 = AtomicU64::new(0);
        let dir = std::env::temp_dir();
        let name = format!(
            "sam2-weights-{}-{}.onnx",
            std::process::id(),
            NEXT.fetch_add(1, Ordering::Relaxed)
        );
        let mut file = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(dir.join(&name))
            .map_err(|e| Error::io("writing the weights file WebGPU sessions read", e))?;
        std::io::Write::write_all(&mut file, model)
            .map_err(|e| Error::io("writing the weights file WebGPU sessions read", e))?;
        Ok(WeightsFile { dir, name })
    }
}

impl Drop for WeightsFile {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(self.dir.join(&self.name));
    }
}

/// The weights of the model at `path`: the registry's shared copy (made on first use), or a
/// fresh copy for this caller alone.
pub(crate) fn get(path: &Path, sharing: WeightSharing, plan: Plan) -> Result<Arc<ModelWeights>> {
    crate::runtime::environment()?;
    // Before anything opens it (on Windows, even a metadata query does).
    if let Some(kind) = platform::kind_of_path(path) {
        return Err(Error::model(path, format!("is {kind}, not a regular file")));
    }
    if sharing == WeightSharing::Copy {
        let bytes = read_model(path)?;
        return Ok(Arc::new(load(path, &bytes, &plan)?));
    }
    let key = (key(path)?, plan);
    let mut registry = REGISTRY.lock().unwrap_or_else(|p| p.into_inner());
    registry.retain(|(_, weak)| weak.strong_count() > 0);
    if let Some(existing) = registry
        .iter()
        .find(|(k, _)| *k == key)
        .and_then(|(_, w)| w.upgrade())
    {
        return Ok(existing);
    }
    // Loading under the lock: two threads opening one model must not both read it.
    let bytes = read_model(path)?;
    let weights = Arc::new(load(path, &bytes, &key.1)?);
    drop(bytes);
    registry.push((key, Arc::downgrade(&weights)));
    Ok(weights)
}

/// Number of models whose weights the registry currently holds (for tests and diagnostics).
pub fn shared_models() -> usize {
    let registry = REGISTRY.lock().unwrap_or_else(|p| p.into_inner());
    registry
        .iter()
        .filter(|(_, w)| w.strong_count() > 0)
        .count()
}

/// Address of the data of the first shared weight (its identity, for tests and diagnostics).
pub(crate) fn weights_address(weights: &ModelWeights) -> Option<usize> {
    weights.values.first().and_then(|(_, v)| {
        v.view()
            .downcast::<ort::value::DynTensorValueType>()
            .ok()
            .map(|t| t.data_ptr() as usize)
    })
}
