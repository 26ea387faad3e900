//! One table per execution provider: everything the library knows of a provider is in its file
//! (its names, its `SAM2_PROVIDER_*` code, what it needs on the host, where its tensors live,
//! how its graph is prepared and its weights shared, how it is registered with ONNX Runtime),
//! and the rest of the library, the C ABI's checks, the command's parsing and help read it from
//! [`Provider::info`]. Adding a provider is a file here, a variant of [`Provider`], its C constant
//! and its .NET member (a test holds those two to this table).

mod coreml;
mod cpu;
mod cuda;
mod directml;
mod tensorrt;
mod webgpu;

use ort::ep::ExecutionProviderDispatch;
use ort::memory::AllocationDevice;
use ort::value::DynTensor;

use super::{Provider, ProviderRequest};

/// What the library knows of one execution provider.
pub struct ProviderInfo {
    pub provider: Provider,
    /// The name the command line, the C constant (`SAM2_PROVIDER_` and this in capitals) and the
    /// documentation use.
    pub short: &'static str,
    /// ONNX Runtime's name.
    pub ort_name: &'static str,
    /// Its `SAM2_PROVIDER_*` value.
    pub code: u32,
    /// What it is, for help texts.
    pub about: &'static str,
    /// What the host needs for it to start, for the message of a request that did not.
    pub needs: &'static str,
    /// Its tensors live in device memory; requests name a device.
    pub gpu: bool,
    /// The device memory it runs on, if it has its own.
    pub(crate) memory: Option<AllocationDevice<'static>>,
    /// How its sessions' graph is prepared and their weights shared.
    pub(crate) graph: GraphPlan,
    /// Its registration on a session builder, with the request's settings.
    pub(crate) dispatch: fn(&ProviderRequest) -> ExecutionProviderDispatch,
    /// Whether the loaded ONNX Runtime build has it.
    pub(crate) available: fn() -> ort::Result<bool>,
    /// Whether a weight of this tensor's type is used by its own kernels, and so belongs in its
    /// device memory.
    pub(crate) computes_on_device: fn(&DynTensor) -> bool,
}

/// How a provider's sessions get their graph, optimised once per process and model and shared
/// ([`crate::weights`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct GraphPlan {
    pub(crate) optimise: Optimise,
    /// Its sessions may read some shared weights from the model file themselves (WebGPU's
    /// kernels re-lay some weights out while the session is built, from the graph's copy).
    pub(crate) readable_weights: bool,
    /// The library's attention rewrite applies: it has the fused kernel and the result was
    /// verified on it.
    pub(crate) fused_attention: bool,
    /// The library's CPU rewrites apply (channel means, split projections, depthwise branches).
    pub(crate) cpu_rewrites: bool,
}

/// At which level a provider's graph is optimised before its sessions share it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Optimise {
    /// At the requested level, for the CPU provider (whose rewrites suit every provider).
    Requested,
    /// At the requested level with the providers registered, so that their own fusions apply.
    WithProviders,
    /// The provider-independent basic rewrites at most: the provider compiles the graph itself
    /// or picks its kernels when the session is built, so a graph saved with its nodes is of no
    /// use to it.
    Basic,
}

/// Every provider, in the order of their codes.
pub(crate) static PROVIDERS: [&ProviderInfo; 6] = [
    &cpu::INFO,
    &cuda::INFO,
    &tensorrt::INFO,
    &directml::INFO,
    &coreml::INFO,
    &webgpu::INFO,
];

/// Any tensor: the provider's kernels take every type.
fn every_type(_: &DynTensor) -> bool {
    true
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_provider_has_its_own_entry_and_code() {
        for (i, info) in PROVIDERS.iter().enumerate() {
            assert_eq!(info.code as usize, i, "{}", info.short);
            assert_eq!(info.provider.info().short, info.short);
            assert_eq!(Provider::parse(info.short), Some(info.provider));
            assert_eq!(info.gpu, info.memory.is_some(), "{}", info.short);
        }
        assert_eq!(Provider::parse("CUDA"), None);
        assert_eq!(Provider::parse(""), None);
    }
}
