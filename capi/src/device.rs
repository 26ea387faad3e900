//! Execution-provider requests and effective-device queries of the C ABI.

use std::ffi::c_char;

use super::c_enum::c_enum;
use super::{arg_out, arg_slice, copy_out_str};
use sam2::device::{
    ArenaStrategy, DeviceOptions, EffectiveDevice, MismatchPolicy, Provider, ProviderRequest,
};
use sam2::device::{Optimization, WeightSharing};
use sam2::Error;

/// Execution provider: the CPU.
pub const SAM2_PROVIDER_CPU: u32 = 0;
/// Execution provider: NVIDIA CUDA.
pub const SAM2_PROVIDER_CUDA: u32 = 1;
/// Execution provider: NVIDIA TensorRT.
pub const SAM2_PROVIDER_TENSORRT: u32 = 2;
/// Execution provider: DirectML (Windows).
pub const SAM2_PROVIDER_DIRECTML: u32 = 3;
/// Execution provider: CoreML (Apple).
pub const SAM2_PROVIDER_COREML: u32 = 4;
/// Execution provider: WebGPU (AMD, Intel, NVIDIA and Apple GPUs through Vulkan, Metal or D3D12;
/// needs an ONNX Runtime build with the WebGPU provider).
pub const SAM2_PROVIDER_WEBGPU: u32 = 5;

c_enum! {
    /// `SAM2_PROVIDER_*` ↔ [`Provider`].
    pub(crate) ProviderCodes: u32 => Provider {
        SAM2_PROVIDER_CPU => Provider::Cpu,
        SAM2_PROVIDER_CUDA => Provider::Cuda,
        SAM2_PROVIDER_TENSORRT => Provider::TensorRt,
        SAM2_PROVIDER_DIRECTML => Provider::DirectMl,
        SAM2_PROVIDER_COREML => Provider::CoreMl,
        SAM2_PROVIDER_WEBGPU => Provider::WebGpu,
    }
}

/// Device mismatch resolution: warn through the log callback and continue on the device that
/// works (the next requested provider, or the CPU). The default.
pub const SAM2_ON_MISMATCH_FALLBACK: u32 = 0;
/// Device mismatch resolution: fail with `SAM2_ERR_ENVIRONMENT_CONFIGURATION`.
pub const SAM2_ON_MISMATCH_FAIL: u32 = 1;

c_enum! {
    /// `SAM2_ON_MISMATCH_*` ↔ [`MismatchPolicy`].
    pub(crate) MismatchPolicyCodes: u32 => MismatchPolicy {
        SAM2_ON_MISMATCH_FALLBACK => MismatchPolicy::Fallback,
        SAM2_ON_MISMATCH_FAIL => MismatchPolicy::Fail,
    }
}

/// Weights: one copy per process, used in place by every session of the model (the default).
pub const SAM2_WEIGHTS_SHARED: u32 = 0;
/// Weights: an explicit copy for this session alone (isolation); never made unless asked for.
pub const SAM2_WEIGHTS_COPY: u32 = 1;

c_enum! {
    /// `SAM2_WEIGHTS_*` ↔ [`WeightSharing`].
    pub(crate) WeightSharingCodes: u32 => WeightSharing {
        SAM2_WEIGHTS_SHARED => WeightSharing::Shared,
        SAM2_WEIGHTS_COPY => WeightSharing::Copy,
    }
}

/// Graph optimisation: provider-independent rewrites only (constant folding, redundant nodes,
/// transposes). The graph is optimised once per process and model at every level, so the weights
/// stay shared whatever the level.
pub const SAM2_OPTIMIZATION_BASIC: u32 = 0;
/// Graph optimisation: none; the graph runs as exported.
pub const SAM2_OPTIMIZATION_NONE: u32 = 1;
/// Graph optimisation: everything ONNX Runtime has for the provider, fusions and (on the CPU)
/// blocked layouts included (the default, as in ONNX Runtime). Providers that compile the graph
/// themselves (TensorRT, DirectML, CoreML) get the basic rewrites and do the rest.
pub const SAM2_OPTIMIZATION_ALL: u32 = 2;

c_enum! {
    /// `SAM2_OPTIMIZATION_*` ↔ [`Optimization`].
    pub(crate) OptimizationCodes: u32 => Optimization {
        SAM2_OPTIMIZATION_BASIC => Optimization::Basic,
        SAM2_OPTIMIZATION_NONE => Optimization::None,
        SAM2_OPTIMIZATION_ALL => Optimization::All,
    }
}

/// Load-time rewrite (a bit of `disabled_rewrites` in the encoder, predictor and tracker options):
/// attention cores into ONNX Runtime's fused `MultiHeadAttention` (CPU, CUDA, WebGPU).
pub const SAM2_REWRITE_ATTENTION: u64 = 1;
/// Load-time rewrite: values that are a narrower tensor's projection projected after the fused
/// kernel (part of a fused core).
pub const SAM2_REWRITE_VALUES_AFTER_ATTENTION: u64 = 2;
/// Load-time rewrite: int8 attention scores, where a model asks for them and the CPU has VNNI.
pub const SAM2_REWRITE_INT8_SCORES: u64 = 4;
/// Load-time rewrite: means over the channels of NCHW tensors as matrix products (CPU).
pub const SAM2_REWRITE_CHANNEL_MEANS: u64 = 8;
/// Load-time rewrite: joint query-key-value projections split by their weights (CPU).
pub const SAM2_REWRITE_QKV_SPLIT: u64 = 16;
/// Load-time rewrite: sums of parallel depthwise convolutions of one input merged into one (CPU).
pub const SAM2_REWRITE_DEPTHWISE_BRANCHES: u64 = 32;
/// Every load-time rewrite: `disabled_rewrites = SAM2_REWRITE_ALL` loads the graph as exported
/// (ONNX Runtime's own optimisations, `graph_optimization`, still apply).
pub const SAM2_REWRITE_ALL: u64 = 63;

/// The rewrites a session may make: every one but those `disabled_rewrites` names. An unknown
/// bit is `SAM2_ERR_INVALID_ARGUMENT` naming `options.disabled_rewrites`.
pub(crate) fn rewrites(disabled_rewrites: u64) -> Result<sam2::models::Rewrites, Error> {
    let name = "options.disabled_rewrites";
    Ok(sam2::models::Rewrites::from_bits(disabled_rewrites, name)?.complement())
}

/// The session fields every options struct of a model shares (`intra_threads`, the providers and
/// what to do without them, `weight_sharing`, `graph_optimization`, `disabled_rewrites`), checked
/// in that order, as the library's session options.
#[allow(clippy::too_many_arguments)]
pub(crate) fn session_options(
    intra_threads: u32,
    providers: *const sam2_provider,
    provider_count: usize,
    on_device_mismatch: u32,
    weight_sharing: u32,
    graph_optimization: u32,
    disabled_rewrites: u64,
) -> Result<sam2::device::SessionOptions, Error> {
    let mut out = sam2::device::SessionOptions {
        intra_threads: super::intra_threads(intra_threads),
        device: device_options(providers, provider_count, on_device_mismatch)?,
        ..Default::default()
    };
    (out.weights, out.optimization) = weights_and_optimization(weight_sharing, graph_optimization)?;
    out.rewrites = rewrites(disabled_rewrites)?;
    Ok(out)
}

/// Converts the weight-sharing and optimisation fields shared by encoder and predictor options.
pub(crate) fn weights_and_optimization(
    weight_sharing: u32,
    graph_optimization: u32,
) -> Result<(WeightSharing, Optimization), Error> {
    let weights = WeightSharingCodes::parse(weight_sharing, "options.weight_sharing")?;
    let optimization = OptimizationCodes::parse(graph_optimization, "options.graph_optimization")?;
    Ok((weights, optimization))
}

/// CUDA arena growth: by powers of two (ONNX Runtime's default).
pub const SAM2_ARENA_NEXT_POWER_OF_TWO: u32 = 0;
/// CUDA arena growth: by exactly what is requested.
pub const SAM2_ARENA_SAME_AS_REQUESTED: u32 = 1;

c_enum! {
    /// `SAM2_ARENA_*` ↔ [`ArenaStrategy`].
    pub(crate) ArenaStrategyCodes: u32 => ArenaStrategy {
        SAM2_ARENA_NEXT_POWER_OF_TWO => ArenaStrategy::NextPowerOfTwo,
        SAM2_ARENA_SAME_AS_REQUESTED => ArenaStrategy::SameAsRequested,
    }
}

/// One requested execution provider. Fixed layout (an array element).
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct sam2_provider {
    /// `SAM2_PROVIDER_*`.
    pub provider: u32,
    /// GPU ordinal (CUDA, TensorRT, DirectML); 0 otherwise.
    pub device_id: i32,
    /// Device memory limit in bytes (CUDA's arena limit, TensorRT's workspace); 0 = no limit.
    pub memory_limit: u64,
    /// `SAM2_ARENA_*` (CUDA).
    pub arena_extend_strategy: u32,
}

/// Converts the device fields shared by encoder and predictor options.
pub(crate) fn device_options(
    providers: *const sam2_provider,
    count: usize,
    on_mismatch: u32,
) -> Result<DeviceOptions, Error> {
    // Before reading `count` entries; the core checks the rest when the session is made.
    sam2::device::check_provider_count(count).map_err(super::option_names)?;
    let raw = arg_slice(providers, count, "options.providers")?;
    let mut out = Vec::with_capacity(raw.len());
    for p in raw {
        let provider = ProviderCodes::parse(p.provider, "options.providers.provider")?;
        let arena = ArenaStrategyCodes::parse(
            p.arena_extend_strategy,
            "options.providers.arena_extend_strategy",
        )?;
        let memory_limit = match p.memory_limit {
            0 => None,
            n => Some(
                usize::try_from(n)
                    .map_err(|_| Error::invalid("options.providers.memory_limit", "too large"))?,
            ),
        };
        out.push(ProviderRequest {
            provider,
            device_id: p.device_id,
            memory_limit,
            arena,
        });
    }
    let on_mismatch = MismatchPolicyCodes::parse(on_mismatch, "options.on_device_mismatch")?;
    Ok(DeviceOptions {
        providers: out,
        on_mismatch,
    })
}

/// Writes the effective device and copies the provider list, for the `_device` queries.
pub(crate) fn write_device(
    device: &EffectiveDevice,
    out_provider: *mut u32,
    out_device_id: *mut i32,
    out_fell_back: *mut i32,
) -> Result<(), Error> {
    let p = arg_out(out_provider, "out_provider")?;
    let d = arg_out(out_device_id, "out_device_id")?;
    let f = arg_out(out_fell_back, "out_fell_back")?;
    p.set(ProviderCodes::code(device.primary));
    d.set(device.device_id);
    f.set(device.fell_back as i32);
    Ok(())
}

pub(crate) fn write_providers(
    device: &EffectiveDevice,
    buf: *mut c_char,
    buf_len: usize,
    needed: *mut usize,
) -> Result<(), Error> {
    copy_out_str(&device.provider_names(), buf, buf_len, needed)
}

#[cfg(test)]
mod tests {
    use super::*;
    use sam2::models::{Rewrite, Rewrites};

    /// `(NAME, value)` of every `PREFIX*` constant in `text`, in order: the header's
    /// `#define PREFIXNAME value` or the wrapper's `const uint PREFIXNAME = value;`.
    fn constants(text: &str, prefix: &str) -> Vec<(String, u32)> {
        text.lines()
            .filter_map(|l| {
                let rest = l.trim().split_once(prefix)?.1;
                let (name, value) = rest.split_once([' ', '='])?;
                let value = value.trim_start_matches([' ', '=']).trim_end_matches(';');
                Some((name.to_string(), value.trim().parse().ok()?))
            })
            .collect()
    }

    /// The C constants, the .NET wrapper's and its enum are the core's table of providers: one
    /// `SAM2_PROVIDER_<SHORT NAME>` per provider with its code, and a code means that provider.
    #[test]
    fn the_provider_constants_are_the_cores_table() {
        let expected: Vec<(String, u32)> = Provider::ALL
            .iter()
            .map(|p| (p.info().short.to_uppercase(), p.info().code))
            .collect();
        let header = include_str!("../../include/sam2.h");
        assert_eq!(constants(header, "#define SAM2_PROVIDER_"), expected);
        let native = include_str!("../../csharp/Sam2/NativeMethods.cs");
        assert_eq!(constants(native, "const uint SAM2_PROVIDER_"), expected);
        let devices = include_str!("../../csharp/Sam2/Devices.cs");
        let start = devices
            .find("public enum ExecutionProvider")
            .expect("the wrapper's enum");
        let members = devices[start..].split_once('}').expect("its end").0;
        let named: Vec<&str> = members
            .lines()
            .filter_map(|l| l.split_once("= NativeMethods.SAM2_PROVIDER_"))
            .map(|(_, c)| c.trim_end_matches(','))
            .collect();
        let shorts: Vec<String> = expected.iter().map(|(n, _)| n.clone()).collect();
        assert_eq!(named, shorts, "one member per provider, in order");
        for p in Provider::ALL {
            assert_eq!(ProviderCodes::code(p), p.info().code);
            assert_eq!(ProviderCodes::parse(p.info().code, "provider").unwrap(), p);
        }
    }

    /// The header's `SAM2_REWRITE_*` constants are the core's rewrites, by name and bit, and
    /// `disabled_rewrites` turns off exactly the bits it names.
    #[test]
    fn the_rewrite_constants_are_the_cores_rewrites() {
        let header = include_str!("../../include/sam2.h");
        let defined: Vec<(String, u64)> = header
            .lines()
            .filter_map(|l| l.strip_prefix("#define SAM2_REWRITE_"))
            .map(|rest| {
                let (name, value) = rest.split_once(' ').expect("a value");
                (name.to_string(), value.trim().parse().expect("a number"))
            })
            .collect();
        let mut expected: Vec<(String, u64)> = Rewrite::ALL
            .iter()
            .map(|r| {
                (
                    r.name().to_uppercase().replace('-', "_"),
                    u64::from(r.bit()),
                )
            })
            .collect();
        expected.push(("ALL".into(), u64::from(Rewrites::ALL.bits())));
        assert_eq!(defined, expected);
        assert_eq!(rewrites(0).unwrap(), Rewrites::ALL);
        assert_eq!(rewrites(SAM2_REWRITE_ALL).unwrap(), Rewrites::NONE);
        assert_eq!(
            rewrites(SAM2_REWRITE_QKV_SPLIT).unwrap(),
            Rewrites::ALL.without(Rewrite::QkvSplit)
        );
        let e = rewrites(128).unwrap_err().to_string();
        assert!(e.contains("`options.disabled_rewrites`"), "{e}");
    }
}
