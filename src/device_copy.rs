//! Copies of tensors between the host and a device, counted.
//!
//! ort's `Value::to` copies through a one-node identity session on the device's execution
//! provider, for the devices it knows (CUDA, DirectML). WebGPU buffers are copied the same way
//! here: a one-node `Identity` model, one session per (device id, element type), its input bound
//! where the value lives and its output bound to the target memory. ONNX Runtime keeps one WebGPU
//! context per device id for the whole process, so a buffer written by an encoder's session is a
//! valid input of this one.
//!
//! Every copy the library makes between memories goes through [`copy`], which counts it: a host
//! can check that a click on a device embedding copies nothing ([`copy_stats`]).
//!
//! A WebGPU buffer is a handle, not an address: tensors on it cannot be written at an offset, so
//! the tracker's memories are stacked there by a one-node `Concat` session on the device
//! ([`concat_webgpu`]) where device memory that can be addressed takes plain copies.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;

use ort::ep;
use ort::memory::{AllocationDevice, AllocatorType, MemoryInfo, MemoryType};
use ort::session::builder::GraphOptimizationLevel;
use ort::session::Session;
use ort::value::{DynTensor, DynTensorValueType, DynValue, Tensor, TensorElementType, ValueType};

use crate::error::{Error, Result};
use crate::onnx::data_type::tensor_byte_len;
use crate::onnx::model::{self, GraphParts};
use crate::onnx::DataType;
use crate::runtime;

static COPIES: AtomicU64 = AtomicU64::new(0);
static COPIED_BYTES: AtomicU64 = AtomicU64::new(0);

/// Copies made between memories (host→device, device→host, device→device) since the process
/// started, and their bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct CopyStats {
    pub copies: u64,
    pub bytes: u64,
}

/// Every copy the library has made between memories so far.
pub fn copy_stats() -> CopyStats {
    CopyStats {
        copies: COPIES.load(Ordering::Relaxed),
        bytes: COPIED_BYTES.load(Ordering::Relaxed),
    }
}

/// A copy of `value` in `target` memory of device `device_id` (the host: `AllocationDevice::CPU`, 0).
pub(crate) fn copy(
    value: &DynTensor,
    target: AllocationDevice<'static>,
    device_id: i32,
) -> Result<DynTensor> {
    let source = value.memory_info();
    let copied = if is_webgpu(&source.allocation_device()) || is_webgpu(&target) {
        let on = if is_webgpu(&target) {
            device_id
        } else {
            source.device_id()
        };
        copy_through_webgpu(value, target, device_id, on)?
    } else {
        value.to(target, device_id)?
    };
    COPIES.fetch_add(1, Ordering::Relaxed);
    COPIED_BYTES.fetch_add(tensor_byte_len(value) as u64, Ordering::Relaxed);
    Ok(copied)
}

/// WebGPU memory: ONNX Runtime creates it as "WebGPU_Buffer" and its tensors report it as
/// "WebGPU_Buf" (1.30).
pub(crate) fn is_webgpu(device: &AllocationDevice<'_>) -> bool {
    device.as_str().starts_with("WebGPU_Buf")
}

/// One identity session per (WebGPU device id, element type).
#[allow(clippy::type_complexity)]
static WEBGPU_IDENTITY: Mutex<Vec<((i32, TensorElementType), Session)>> = Mutex::new(Vec::new());

fn copy_through_webgpu(
    value: &DynTensor,
    target: AllocationDevice<'static>,
    device_id: i32,
    webgpu_device: i32,
) -> Result<DynTensor> {
    let ValueType::Tensor { ty, .. } = value.dtype() else {
        return Err(Error::invalid("value", "only tensors can be copied"));
    };
    let ty = *ty;
    let mut sessions = WEBGPU_IDENTITY.lock().unwrap_or_else(|p| p.into_inner());
    let index = match sessions.iter().position(|(k, _)| *k == (webgpu_device, ty)) {
        Some(i) => i,
        None => {
            sessions.push(((webgpu_device, ty), identity_session(webgpu_device, ty)?));
            sessions.len() - 1
        }
    };
    let session = &mut sessions[index].1;
    let target_memory = MemoryInfo::new(
        target,
        device_id,
        AllocatorType::Device,
        MemoryType::Default,
    )?;
    let mut binding = session.create_binding()?;
    binding.bind_input("x", value)?;
    binding.bind_output_to_device("y", &target_memory)?;
    let mut outputs = session.run_binding(&binding)?;
    let out = outputs
        .remove("y")
        .ok_or_else(|| Error::OnnxRuntime("the identity copy produced no output".into()))?;
    drop(outputs);
    out.downcast::<DynTensorValueType>()
        .map_err(|e| Error::OnnxRuntime(format!("the identity copy produced a non-tensor: {e}")))
}

/// One concatenation session per (WebGPU device id, number of parts).
static WEBGPU_CONCAT: Mutex<Vec<((i32, usize), Session)>> = Mutex::new(Vec::new());

/// The float tensors `parts` (each on WebGPU device `device_id`), flattened and concatenated in
/// order into one tensor of `shape` on that device: what the tracker does with plain copies in
/// memory it can address. Not counted as a copy between memories (nothing leaves the device).
pub(crate) fn concat_webgpu(
    parts: &[&DynValue],
    shape: &[i64],
    device_id: i32,
) -> Result<DynValue> {
    if parts.is_empty() {
        return Err(Error::invalid("parts", "nothing to concatenate"));
    }
    let mut sessions = WEBGPU_CONCAT.lock().unwrap_or_else(|p| p.into_inner());
    let key = (device_id, parts.len());
    let index = match sessions.iter().position(|(k, _)| *k == key) {
        Some(i) => i,
        None => {
            let model = concat_model(parts.len());
            sessions.push((
                key,
                webgpu_session(device_id, &model, "sam2:device-concat")?,
            ));
            sessions.len() - 1
        }
    };
    let session = &mut sessions[index].1;
    let target_memory = MemoryInfo::new(
        AllocationDevice::WEBGPU_BUFFER,
        device_id,
        AllocatorType::Device,
        MemoryType::Default,
    )?;
    // The shapes are Reshape's second inputs, which WebGPU reads from host memory.
    let flat = Tensor::from_array(([1usize], vec![-1i64]))?;
    let target = Tensor::from_array(([shape.len()], shape.to_vec()))?;
    let mut binding = session.create_binding()?;
    for (i, part) in parts.iter().enumerate() {
        binding.bind_input(format!("x{i}"), *part)?;
    }
    binding.bind_input("flat", &flat)?;
    binding.bind_input("shape", &target)?;
    binding.bind_output_to_device("y", &target_memory)?;
    let mut outputs = session.run_binding(&binding)?;
    let out = outputs
        .remove("y")
        .ok_or_else(|| Error::OnnxRuntime("the device concatenation produced no output".into()))?;
    drop(outputs);
    Ok(out)
}

fn identity_session(device_id: i32, ty: TensorElementType) -> Result<Session> {
    let elem = DataType::of_ort(ty).ok_or_else(|| {
        Error::OnnxRuntime(format!(
            "a {ty:?} tensor cannot be copied on a WebGPU device"
        ))
    })?;
    webgpu_session(device_id, &identity_model(elem), "sam2:device-copy")
}

/// A session of `model` on WebGPU device `device_id`, unoptimised (one node or a handful).
fn webgpu_session(device_id: i32, model: &[u8], log_id: &str) -> Result<Session> {
    let env = runtime::environment()?;
    let mut builder = Session::builder(env)?
        .with_optimization_level(GraphOptimizationLevel::Disable)?
        .with_log_id(log_id)?;
    ep::WebGPU::default()
        .with_device_id(device_id)
        .with_preferred_layout(ep::webgpu::PreferredLayout::NCHW)
        .build()
        .error_on_failure()
        .register(&mut builder)
        .map_err(|e| {
            Error::EnvironmentConfiguration(format!(
                "copying a WebGPU tensor needs the WebGPU execution provider, which did not start: {e}"
            ))
        })?;
    Ok(builder.commit_from_memory(model)?)
}

/// The ONNX model `y = Identity(x)` for tensors of element type `elem` and any shape.
fn identity_model(elem: DataType) -> Vec<u8> {
    let graph = GraphParts {
        name: "sam2-device-copy",
        nodes: vec![model::node(&["x"], &["y"], "Identity", &[])],
        initializers: Vec::new(),
        inputs: vec![model::value_info("x", Some((elem, None)))],
        outputs: vec![model::value_info("y", Some((elem, None)))],
        value_infos: Vec::new(),
    };
    model::model(13, &graph.encode())
}

/// The ONNX model `y = Reshape(Concat(Reshape(x0, flat), …, Reshape(x{n-1}, flat)), shape)` for
/// `n` float tensors of any shape (`flat` = [-1], `shape` the result's, both int64 inputs).
fn concat_model(n: usize) -> Vec<u8> {
    let names: Vec<(String, String)> = (0..n).map(|i| (format!("x{i}"), format!("r{i}"))).collect();
    let mut nodes: Vec<Vec<u8>> = names
        .iter()
        .map(|(x, r)| model::node(&[x, "flat"], &[r], "Reshape", &[]))
        .collect();
    let flat: Vec<&str> = names.iter().map(|(_, r)| r.as_str()).collect();
    nodes.push(model::node(
        &flat,
        &["c"],
        "Concat",
        &[model::int_attribute("axis", 0)],
    ));
    nodes.push(model::node(&["c", "shape"], &["y"], "Reshape", &[]));
    let float = |name: &str| model::value_info(name, Some((DataType::Float, None)));
    let int64 = |name: &str| model::value_info(name, Some((DataType::Int64, None)));
    let mut inputs: Vec<Vec<u8>> = names.iter().map(|(x, _)| float(x)).collect();
    inputs.extend([int64("flat"), int64("shape")]);
    let graph = GraphParts {
        name: "sam2-device-concat",
        nodes,
        initializers: Vec::new(),
        inputs,
        outputs: vec![float("y")],
        value_infos: Vec::new(),
    };
    model::model(13, &graph.encode())
}
