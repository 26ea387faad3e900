//! WebGPU (Dawn over Vulkan, Metal or D3D12): AMD, Intel, NVIDIA and Apple GPUs, and software
//! Vulkan drivers such as Mesa's llvmpipe, where the tests run it. It picks its kernels and
//! re-lays some weights out when a session is built, from the graph's copy of them: the graph
//! gets the basic rewrites, its sessions may read the weights from the model file, and its
//! attention is fused (run as exported, a score matrix past the device's limit on one storage
//! binding, 128 MiB on llvmpipe, came out wrong from ONNX Runtime 1.30's WebGPU `Softmax`
//! without an error; fused, the same encoder gives the CPU's embedding there).

use ort::ep::{webgpu::PreferredLayout, ExecutionProvider, WebGPU};
use ort::memory::AllocationDevice;
use ort::value::{DynTensor, TensorElementType, ValueType};

use super::{GraphPlan, Optimise, ProviderInfo};
use crate::device::Provider;

pub(super) static INFO: ProviderInfo = ProviderInfo {
    provider: Provider::WebGpu,
    short: "webgpu",
    ort_name: "WebGpuExecutionProvider",
    code: 5,
    about: "WebGPU (AMD, Intel, NVIDIA and Apple GPUs through Vulkan, Metal or D3D12)",
    needs: "an ONNX Runtime build with WebGPU and a Vulkan, Metal or Direct3D 12 driver",
    gpu: true,
    memory: Some(AllocationDevice::WEBGPU_BUFFER),
    graph: GraphPlan {
        optimise: Optimise::Basic,
        readable_weights: true,
        fused_attention: true,
        cpu_rewrites: false,
    },
    dispatch: |request| {
        WebGPU::default()
            .with_device_id(request.device_id)
            // NHWC would make ONNX Runtime transpose convolution weights when it builds the
            // session, reading them from the model: shared weights are not in the model.
            .with_preferred_layout(PreferredLayout::NCHW)
            .build()
    },
    available: WebGPU::is_available,
    computes_on_device: float_tensors,
};

/// WebGPU computes in float32 and float16 only: integer weights feed the shape arithmetic ONNX
/// Runtime keeps on the CPU.
fn float_tensors(tensor: &DynTensor) -> bool {
    matches!(
        tensor.dtype(),
        ValueType::Tensor {
            ty: TensorElementType::Float32 | TensorElementType::Float16,
            ..
        }
    )
}
