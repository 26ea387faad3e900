//! NVIDIA CUDA: the graph optimised with the provider registered, so that its own fusions
//! apply; the fused attention kernel is ONNX Runtime's CUDA one.

use ort::ep::{ArenaExtendStrategy, ExecutionProvider, CUDA};
use ort::memory::AllocationDevice;

use super::{every_type, GraphPlan, Optimise, ProviderInfo};
use crate::device::{ArenaStrategy, Provider};

pub(super) static INFO: ProviderInfo = ProviderInfo {
    provider: Provider::Cuda,
    short: "cuda",
    ort_name: "CUDAExecutionProvider",
    code: 1,
    about: "NVIDIA CUDA",
    needs: "an ONNX Runtime build with CUDA, the CUDA and cuDNN libraries it was built against on \
            the library path, and a driver that matches them",
    gpu: true,
    memory: Some(AllocationDevice::CUDA),
    graph: GraphPlan {
        optimise: Optimise::WithProviders,
        readable_weights: false,
        fused_attention: true,
        cpu_rewrites: false,
    },
    dispatch: |request| {
        let arena = match request.arena {
            ArenaStrategy::NextPowerOfTwo => ArenaExtendStrategy::NextPowerOfTwo,
            ArenaStrategy::SameAsRequested => ArenaExtendStrategy::SameAsRequested,
        };
        let mut cuda = CUDA::default()
            .with_device_id(request.device_id)
            .with_arena_extend_strategy(arena);
        if let Some(limit) = request.memory_limit {
            cuda = cuda.with_memory_limit(limit);
        }
        cuda.build()
    },
    available: CUDA::is_available,
    computes_on_device: every_type,
};
