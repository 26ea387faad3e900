//! Execution-provider requests, what a session really got, and the policy for a mismatch.
//!
//! ONNX Runtime does not say which providers a session ended up with, and by default a provider
//! that fails to register is only logged. The library registers every requested provider on its
//! own with failures reported, then checks each GPU provider that registered by asking the
//! built session for that device's allocator (which only exists when the provider is in the
//! session). A GPU request that did not survive is a device mismatch, resolved by policy.

use ort::memory::{AllocationDevice, Allocator, AllocatorType, MemoryInfo, MemoryType};
use ort::session::builder::SessionBuilder;
use ort::session::Session;

mod providers;

pub use crate::device_copy::{copy_stats, CopyStats};
use crate::error::{Error, Result};
use crate::log::{self, LogLevel};
pub use crate::session::SessionOptions;
pub use crate::weights::{shared_models, Optimization, WeightSharing};
pub(crate) use providers::Optimise;
pub use providers::ProviderInfo;

/// An execution provider, its rules in [`Provider::info`]. Values are part of the C ABI
/// (`SAM2_PROVIDER_*`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Provider {
    Cpu,
    Cuda,
    TensorRt,
    DirectMl,
    CoreMl,
    /// WebGPU (Dawn over Vulkan, Metal or D3D12): AMD, Intel, NVIDIA and Apple GPUs, and
    /// software Vulkan drivers such as Mesa's llvmpipe.
    WebGpu,
}

impl Provider {
    /// Every provider, in the order of their codes.
    pub const ALL: [Provider; 6] = [
        Provider::Cpu,
        Provider::Cuda,
        Provider::TensorRt,
        Provider::DirectMl,
        Provider::CoreMl,
        Provider::WebGpu,
    ];

    /// Everything the library knows of the provider ([`providers`]: a file per provider).
    pub fn info(self) -> &'static ProviderInfo {
        providers::PROVIDERS[self as usize]
    }

    /// The provider of a short name (`cpu`, `cuda`, `tensorrt`, `directml`, `coreml`, `webgpu`),
    /// as the command line and the documentation write it.
    pub fn parse(short: &str) -> Option<Provider> {
        Provider::ALL.into_iter().find(|p| p.info().short == short)
    }

    /// The short names, joined by `sep` (`cpu|cuda|…` for a help text).
    pub fn short_names(sep: &str) -> String {
        let names: Vec<&str> = Provider::ALL.iter().map(|p| p.info().short).collect();
        names.join(sep)
    }

    /// ONNX Runtime's name of the provider.
    pub fn ort_name(self) -> &'static str {
        self.info().ort_name
    }

    /// True for providers whose tensors live in device memory.
    pub fn is_gpu(self) -> bool {
        self.info().gpu
    }

    /// Whether a weight of this tensor's element type is used by the provider's own kernels (and
    /// so belongs in its device memory).
    pub(crate) fn computes_on_device(self, tensor: &ort::value::DynTensor) -> bool {
        (self.info().computes_on_device)(tensor)
    }

    /// The device memory the provider runs on, if it has its own.
    pub(crate) fn allocation_device(self) -> Option<AllocationDevice<'static>> {
        self.info().memory.clone()
    }

    /// The allocator of the provider's device memory, if it has one of its own.
    fn device_memory(self, device_id: i32) -> Option<Result<MemoryInfo<'static>>> {
        let device = self.allocation_device()?;
        Some(
            MemoryInfo::new(
                device,
                device_id,
                AllocatorType::Device,
                MemoryType::Default,
            )
            .map_err(Error::from),
        )
    }
}

/// Plain host memory: where outputs bound to the host land.
pub(crate) fn host_memory() -> Result<MemoryInfo<'static>> {
    Ok(MemoryInfo::new(
        AllocationDevice::CPU,
        0,
        AllocatorType::Device,
        MemoryType::Default,
    )?)
}

/// How the device arena grows (CUDA).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ArenaStrategy {
    #[default]
    NextPowerOfTwo,
    SameAsRequested,
}

/// One requested provider and its key settings.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ProviderRequest {
    pub provider: Provider,
    pub device_id: i32,
    /// Device memory limit in bytes (CUDA; TensorRT's workspace); `None` = unlimited.
    pub memory_limit: Option<usize>,
    pub arena: ArenaStrategy,
}

impl ProviderRequest {
    pub fn cpu() -> Self {
        ProviderRequest {
            provider: Provider::Cpu,
            device_id: 0,
            memory_limit: None,
            arena: ArenaStrategy::default(),
        }
    }

    pub fn cuda(device_id: i32) -> Self {
        ProviderRequest {
            provider: Provider::Cuda,
            device_id,
            ..Self::cpu()
        }
    }

    fn describe(&self) -> String {
        if self.provider.is_gpu() {
            format!("{} (device {})", self.provider.ort_name(), self.device_id)
        } else {
            self.provider.ort_name().to_string()
        }
    }

    pub(crate) fn available_in_build(&self) -> bool {
        (self.provider.info().available)().unwrap_or(false)
    }
}

/// What to do when a requested GPU provider is not what the session got.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum MismatchPolicy {
    /// Warn through the log callback and continue on the device that works.
    #[default]
    Fallback,
    /// Fail with `EnvironmentConfiguration`.
    Fail,
}

/// The device part of encoder and predictor options.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DeviceOptions {
    /// Providers in order of preference; empty means CPU. The CPU provider is always the last resort.
    pub providers: Vec<ProviderRequest>,
    pub on_mismatch: MismatchPolicy,
}

/// Most providers one request may list (there are six, and a device id each is plenty).
pub const MAX_PROVIDERS: usize = 16;

impl DeviceOptions {
    /// Refuses a request no session can honour, naming the field: more than [`MAX_PROVIDERS`]
    /// providers, or a negative device id.
    pub fn validate(&self) -> Result<()> {
        check_provider_count(self.providers.len())?;
        for request in &self.providers {
            if request.device_id < 0 {
                return Err(Error::invalid(
                    "providers.device_id",
                    format!("must be ≥ 0, got {}", request.device_id),
                ));
            }
        }
        Ok(())
    }
}

/// The rule on the number of providers, on its own so that the C ABI applies it to a count before
/// it reads that many entries.
pub fn check_provider_count(count: usize) -> Result<()> {
    if count > MAX_PROVIDERS {
        return Err(Error::invalid(
            "providers",
            format!("at most {MAX_PROVIDERS} providers, got {count}"),
        ));
    }
    Ok(())
}

/// What a session effectively runs on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EffectiveDevice {
    /// The provider that runs the model (the first requested one that works, or CPU).
    pub primary: Provider,
    pub device_id: i32,
    /// Every provider in the session, in priority order (always ending with the CPU provider).
    pub providers: Vec<Provider>,
    /// A requested GPU provider did not survive and the session fell back.
    pub fell_back: bool,
    /// ONNX Runtime's name of the memory the session's device allocator hands out ("Cpu" for
    /// the host; "Cuda", "DML", "WebGPU_Buf", … as the built session reports it).
    pub memory: String,
}

impl EffectiveDevice {
    pub fn cpu() -> Self {
        EffectiveDevice {
            primary: Provider::Cpu,
            device_id: 0,
            providers: vec![Provider::Cpu],
            fell_back: false,
            memory: AllocationDevice::CPU.as_str().to_string(),
        }
    }

    /// Comma-separated ONNX Runtime names, e.g. `CUDAExecutionProvider,CPUExecutionProvider`.
    pub fn provider_names(&self) -> String {
        self.providers
            .iter()
            .map(|p| p.ort_name())
            .collect::<Vec<_>>()
            .join(",")
    }

    /// Where outputs bound "on the device" land: the primary provider's device memory, or the host.
    pub(crate) fn output_memory(&self) -> Result<MemoryInfo<'static>> {
        match self.primary.device_memory(self.device_id) {
            Some(info) => info,
            None => host_memory(),
        }
    }

    /// The allocator name of the device memory this session reads in place ("Cpu" for the host):
    /// ONNX Runtime's own name for it, the name its tensors carry.
    pub fn allocator_name(&self) -> &str {
        &self.memory
    }
}

/// Registers the requested providers on a builder one by one, remembering which registered.
pub(crate) fn register(
    builder: &mut SessionBuilder,
    options: &DeviceOptions,
) -> Vec<(ProviderRequest, Result<(), String>)> {
    let mut outcome = Vec::new();
    for request in &options.providers {
        if request.provider == Provider::Cpu {
            outcome.push((*request, Ok(())));
            continue;
        }
        let result = (request.provider.info().dispatch)(request)
            .error_on_failure()
            .register(builder)
            .map_err(|e| e.to_string());
        outcome.push((*request, result));
    }
    outcome
}

/// After the session is built: which providers it really has, and the policy for a mismatch.
/// `what` names the model for messages ("encoder tiny_a_encoder.onnx").
pub(crate) fn resolve(
    session: &Session,
    options: &DeviceOptions,
    outcome: Vec<(ProviderRequest, Result<(), String>)>,
    what: &str,
) -> Result<EffectiveDevice> {
    let mut effective: Vec<(ProviderRequest, bool, String)> = Vec::new();
    let mut memory_names: Vec<(Provider, String)> = Vec::new();
    for (request, registered) in outcome {
        let (ok, why) = match registered {
            Err(e) => (false, e),
            Ok(()) => match request.provider.device_memory(request.device_id) {
                // The provider's device allocator exists only when the provider is in the session.
                Some(info) => match Allocator::new(session, info?) {
                    Ok(allocator) => {
                        let name = allocator
                            .memory_info()
                            .allocation_device()
                            .as_str()
                            .to_string();
                        memory_names.push((request.provider, name));
                        (true, String::new())
                    }
                    Err(e) => (
                        false,
                        format!(
                            "the session has no {} allocator: {e}",
                            request.provider.ort_name()
                        ),
                    ),
                },
                None => (true, String::new()),
            },
        };
        effective.push((request, ok, why));
    }
    let mut providers: Vec<Provider> = effective
        .iter()
        .filter(|(r, ok, _)| *ok && r.provider != Provider::Cpu)
        .map(|(r, _, _)| r.provider)
        .collect();
    providers.push(Provider::Cpu);
    let first_working = effective.iter().find(|(_, ok, _)| *ok).map(|(r, _, _)| *r);
    let primary = first_working.unwrap_or_else(ProviderRequest::cpu);
    let device = EffectiveDevice {
        primary: primary.provider,
        device_id: if primary.provider.is_gpu() {
            primary.device_id
        } else {
            0
        },
        providers,
        fell_back: false,
        memory: memory_names
            .into_iter()
            .find(|(p, _)| *p == primary.provider)
            .map(|(_, name)| name)
            .unwrap_or_else(|| AllocationDevice::CPU.as_str().to_string()),
    };
    let Some((requested, false, why)) = effective.first().cloned() else {
        return Ok(device);
    };
    let cause = if !requested.available_in_build() {
        format!(
            "this ONNX Runtime build does not include {} (a CPU-only build, such as the `onnxruntime` \
             PyPI wheel); load a GPU build of ONNX Runtime with sam2_runtime_init",
            requested.provider.ort_name()
        )
    } else {
        format!(
            "{} is built in but could not start: it needs {}",
            requested.provider.ort_name(),
            requested.provider.info().needs
        )
    };
    let why = why.trim_end_matches('.');
    let message = format!(
        "{what}: requested {}, but the session runs on {}. Likely cause: {cause}. Detail: {why}",
        requested.describe(),
        primary.describe()
    );
    match options.on_mismatch {
        MismatchPolicy::Fail => Err(Error::EnvironmentConfiguration(message)),
        MismatchPolicy::Fallback => {
            log::emit(
                LogLevel::Warning,
                &format!("{message}. Falling back (resolution mode FALLBACK)."),
            );
            Ok(EffectiveDevice {
                fell_back: true,
                ..device
            })
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn provider_count_is_bounded() {
        let options = |n: usize| DeviceOptions {
            providers: vec![ProviderRequest::cpu(); n],
            ..Default::default()
        };
        assert!(options(0).validate().is_ok());
        assert!(options(MAX_PROVIDERS).validate().is_ok());
        let e = options(MAX_PROVIDERS + 1)
            .validate()
            .unwrap_err()
            .to_string();
        assert!(e.contains("`providers`") && e.contains("got 17"), "{e}");
        assert!(check_provider_count(usize::MAX).is_err());
    }

    #[test]
    fn device_id_is_not_negative() {
        let options = |id: i32| DeviceOptions {
            providers: vec![ProviderRequest::cuda(id)],
            ..Default::default()
        };
        assert!(options(0).validate().is_ok());
        assert!(options(i32::MAX).validate().is_ok());
        for id in [-1, i32::MIN] {
            let e = options(id).validate().unwrap_err().to_string();
            assert!(
                e.contains("`providers.device_id`") && e.contains(&id.to_string()),
                "{e}"
            );
        }
    }
}
