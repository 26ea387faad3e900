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

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;

use ort::ep;
use ort::memory::{AllocationDevice, AllocatorType, MemoryInfo, MemoryType};
use ort::session::builder::GraphOptimizationLevel;
use ort::session::Session;
use ort::value::{DynTensor, DynTensorValueType, TensorElementType, ValueType};

use crate::error::{Error, Result};
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
    COPIED_BYTES.fetch_add(
        crate::embedding::tensor_byte_len(value) as u64,
        Ordering::Relaxed,
    );
    Ok(copied)
}

/// WebGPU memory: ONNX Runtime creates it as "WebGPU_Buffer" and its tensors report it as
/// "WebGPU_Buf" (1.30).
fn is_webgpu(device: &AllocationDevice<'_>) -> bool {
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

fn identity_session(device_id: i32, ty: TensorElementType) -> Result<Session> {
    let env = runtime::environment()?;
    let mut builder = Session::builder(env)?
        .with_optimization_level(GraphOptimizationLevel::Disable)?
        .with_log_id("sam2:device-copy")?;
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
    Ok(builder.commit_from_memory(&identity_model(onnx_type(ty)))?)
}

/// ONNX's `TensorProto.DataType` number of an element type.
fn onnx_type(ty: TensorElementType) -> u64 {
    match ty {
        TensorElementType::Float32 => 1,
        TensorElementType::Uint8 => 2,
        TensorElementType::Int8 => 3,
        TensorElementType::Uint16 => 4,
        TensorElementType::Int16 => 5,
        TensorElementType::Int32 => 6,
        TensorElementType::Int64 => 7,
        TensorElementType::String => 8,
        TensorElementType::Bool => 9,
        TensorElementType::Float16 => 10,
        TensorElementType::Float64 => 11,
        TensorElementType::Uint32 => 12,
        TensorElementType::Uint64 => 13,
        TensorElementType::Bfloat16 => 16,
        _ => 0,
    }
}

/// The ONNX model `y = Identity(x)` for tensors of element type `elem_type` and any shape.
fn identity_model(elem_type: u64) -> Vec<u8> {
    use crate::onnx_split::{put_len_field, put_varint_field};
    let value_info = |name: &str| {
        let mut tensor_type = Vec::new();
        put_varint_field(&mut tensor_type, 1, elem_type);
        let mut type_proto = Vec::new();
        put_len_field(&mut type_proto, 1, &tensor_type);
        let mut info = Vec::new();
        put_len_field(&mut info, 1, name.as_bytes());
        put_len_field(&mut info, 2, &type_proto);
        info
    };
    let mut node = Vec::new();
    put_len_field(&mut node, 1, b"x");
    put_len_field(&mut node, 2, b"y");
    put_len_field(&mut node, 4, b"Identity");
    let mut graph = Vec::new();
    put_len_field(&mut graph, 1, &node);
    put_len_field(&mut graph, 2, b"sam2-device-copy");
    put_len_field(&mut graph, 11, &value_info("x"));
    put_len_field(&mut graph, 12, &value_info("y"));
    let mut opset = Vec::new();
    put_varint_field(&mut opset, 2, 13);
    let mut model = Vec::new();
    put_varint_field(&mut model, 1, 8);
    put_len_field(&mut model, 7, &graph);
    put_len_field(&mut model, 8, &opset);
    model
}
