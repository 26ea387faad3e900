//! NVIDIA TensorRT: it compiles the graph itself, so the graph gets the basic rewrites only;
//! its tensors live in CUDA memory.

use ort::ep::{ExecutionProvider, TensorRT};
use ort::memory::AllocationDevice;

use super::{every_type, GraphPlan, Optimise, ProviderInfo};
use crate::device::Provider;

pub(super) static INFO: ProviderInfo = ProviderInfo {
    provider: Provider::TensorRt,
    short: "tensorrt",
    ort_name: "TensorrtExecutionProvider",
    code: 2,
    about: "NVIDIA TensorRT",
    needs: "an ONNX Runtime build with TensorRT, the TensorRT, CUDA and cuDNN libraries it was \
            built against on the library path, and a driver that matches them",
    gpu: true,
    memory: Some(AllocationDevice::CUDA),
    graph: GraphPlan {
        optimise: Optimise::Basic,
        readable_weights: false,
        fused_attention: false,
        cpu_rewrites: false,
    },
    dispatch: |request| {
        let mut trt = TensorRT::default().with_device_id(request.device_id);
        if let Some(limit) = request.memory_limit {
            trt = trt.with_max_workspace_size(limit);
        }
        trt.build()
    },
    available: TensorRT::is_available,
    computes_on_device: every_type,
};
