//! DirectML (Windows): it compiles the graph itself, so the graph gets the basic rewrites only.

use ort::ep::{DirectML, ExecutionProvider};
use ort::memory::AllocationDevice;

use super::{every_type, GraphPlan, Optimise, ProviderInfo};
use crate::device::Provider;

pub(super) static INFO: ProviderInfo = ProviderInfo {
    provider: Provider::DirectMl,
    short: "directml",
    ort_name: "DmlExecutionProvider",
    code: 3,
    about: "DirectML (Windows)",
    needs: "an ONNX Runtime build with DirectML on Windows 10 or later, DirectML.dll beside it, \
            and a Direct3D 12 GPU",
    gpu: true,
    memory: Some(AllocationDevice::DIRECTML),
    graph: GraphPlan {
        optimise: Optimise::Basic,
        readable_weights: false,
        fused_attention: false,
        cpu_rewrites: false,
    },
    dispatch: |request| {
        DirectML::default()
            .with_device_id(request.device_id)
            .build()
    },
    available: DirectML::is_available,
    computes_on_device: every_type,
};
