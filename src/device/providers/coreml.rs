//! CoreML (Apple): it compiles the graph itself and manages its own memory, so its tensors are
//! host tensors to the library and its graph gets the basic rewrites only.

use ort::ep::{CoreML, ExecutionProvider};

use super::{every_type, GraphPlan, Optimise, ProviderInfo};
use crate::device::Provider;

pub(super) static INFO: ProviderInfo = ProviderInfo {
    provider: Provider::CoreMl,
    short: "coreml",
    ort_name: "CoreMLExecutionProvider",
    code: 4,
    about: "CoreML (Apple)",
    needs: "an ONNX Runtime build with CoreML, on macOS or iOS",
    gpu: false,
    memory: None,
    graph: GraphPlan {
        optimise: Optimise::Basic,
        readable_weights: false,
        fused_attention: false,
        cpu_rewrites: false,
    },
    dispatch: |_| CoreML::default().build(),
    available: CoreML::is_available,
    computes_on_device: every_type,
};
