using System;
using System.Collections.Generic;

namespace Sam2
{
    /// <summary>An ONNX Runtime execution provider (SAM2_PROVIDER_*).</summary>
    public enum ExecutionProvider : uint
    {
        /// <summary>The CPU.</summary>
        Cpu = NativeMethods.SAM2_PROVIDER_CPU,
        /// <summary>NVIDIA CUDA.</summary>
        Cuda = NativeMethods.SAM2_PROVIDER_CUDA,
        /// <summary>NVIDIA TensorRT.</summary>
        TensorRT = NativeMethods.SAM2_PROVIDER_TENSORRT,
        /// <summary>DirectML (Windows).</summary>
        DirectML = NativeMethods.SAM2_PROVIDER_DIRECTML,
        /// <summary>CoreML (Apple).</summary>
        CoreML = NativeMethods.SAM2_PROVIDER_COREML,
        /// <summary>WebGPU (AMD, Intel, NVIDIA and Apple GPUs through Vulkan, Metal or D3D12).</summary>
        WebGpu = NativeMethods.SAM2_PROVIDER_WEBGPU,
    }

    /// <summary>What to do when a requested GPU provider is not what the session got (SAM2_ON_MISMATCH_*).</summary>
    public enum DeviceMismatchPolicy : uint
    {
        /// <summary>Warn through <see cref="Sam2Runtime.Log"/> and continue on the device that works (default).</summary>
        Fallback = NativeMethods.SAM2_ON_MISMATCH_FALLBACK,
        /// <summary>Fail with <see cref="Sam2EnvironmentConfigurationException"/>.</summary>
        Fail = NativeMethods.SAM2_ON_MISMATCH_FAIL,
    }

    /// <summary>How sessions of one model hold its weights (SAM2_WEIGHTS_*).</summary>
    public enum WeightSharing : uint
    {
        /// <summary>One copy per process, used in place by every session (default).</summary>
        Shared = NativeMethods.SAM2_WEIGHTS_SHARED,
        /// <summary>An explicit copy for this session alone.</summary>
        Copy = NativeMethods.SAM2_WEIGHTS_COPY,
    }

    /// <summary>How far ONNX Runtime optimises the graph (SAM2_OPTIMIZATION_*).</summary>
    public enum GraphOptimization : uint
    {
        /// <summary>Provider-independent rewrites only. Weights stay shared at every level.</summary>
        Basic = NativeMethods.SAM2_OPTIMIZATION_BASIC,
        /// <summary>No graph optimisation.</summary>
        None = NativeMethods.SAM2_OPTIMIZATION_NONE,
        /// <summary>Everything ONNX Runtime has for the provider, fusions included (default).</summary>
        All = NativeMethods.SAM2_OPTIMIZATION_ALL,
    }

    /// <summary>
    /// The library's load-time graph rewrites (SAM2_REWRITE_*), to switch off with an options'
    /// <c>DisabledRewrites</c> when one is suspected: the model then loads without it.
    /// </summary>
    [Flags]
    public enum Rewrites : ulong
    {
        /// <summary>No rewrite.</summary>
        None = 0,
        /// <summary>Attention cores into ONNX Runtime's fused MultiHeadAttention (CPU, CUDA, WebGPU).</summary>
        Attention = NativeMethods.SAM2_REWRITE_ATTENTION,
        /// <summary>Values that are a narrower tensor's projection projected after the fused kernel.</summary>
        ValuesAfterAttention = NativeMethods.SAM2_REWRITE_VALUES_AFTER_ATTENTION,
        /// <summary>int8 attention scores, where a model asks for them and the CPU has VNNI.</summary>
        Int8Scores = NativeMethods.SAM2_REWRITE_INT8_SCORES,
        /// <summary>Means over the channels of NCHW tensors as matrix products (CPU).</summary>
        ChannelMeans = NativeMethods.SAM2_REWRITE_CHANNEL_MEANS,
        /// <summary>Joint query-key-value projections split by their weights (CPU).</summary>
        QkvSplit = NativeMethods.SAM2_REWRITE_QKV_SPLIT,
        /// <summary>Sums of parallel depthwise convolutions of one input merged into one (CPU).</summary>
        DepthwiseBranches = NativeMethods.SAM2_REWRITE_DEPTHWISE_BRANCHES,
        /// <summary>Every rewrite: as <c>DisabledRewrites</c>, the graph loads as exported.</summary>
        All = NativeMethods.SAM2_REWRITE_ALL,
    }

    /// <summary>How CUDA's memory arena grows (SAM2_ARENA_*).</summary>
    public enum ArenaExtendStrategy : uint
    {
        /// <summary>By powers of two (ONNX Runtime's default).</summary>
        NextPowerOfTwo = NativeMethods.SAM2_ARENA_NEXT_POWER_OF_TWO,
        /// <summary>By exactly what is requested.</summary>
        SameAsRequested = NativeMethods.SAM2_ARENA_SAME_AS_REQUESTED,
    }

    /// <summary>One requested execution provider (<c>sam2_provider</c>).</summary>
    public sealed class Sam2ProviderRequest
    {
        private int _deviceId;
        private long _memoryLimit;

        /// <summary>Requests <paramref name="provider"/> on device <paramref name="deviceId"/>.</summary>
        public Sam2ProviderRequest(ExecutionProvider provider, int deviceId = 0)
        {
            Provider = provider;
            DeviceId = deviceId;
        }

        /// <summary>The provider.</summary>
        public ExecutionProvider Provider { get; set; }

        /// <summary>GPU ordinal (CUDA, TensorRT, DirectML); 0 otherwise.</summary>
        public int DeviceId
        {
            get { return _deviceId; }
            set
            {
                if (value < 0)
                    throw new ArgumentOutOfRangeException("value", value, "must not be negative");
                _deviceId = value;
            }
        }

        /// <summary>Device memory limit in bytes (CUDA's arena limit, TensorRT's workspace); 0 = no limit.</summary>
        public long MemoryLimit
        {
            get { return _memoryLimit; }
            set
            {
                if (value < 0)
                    throw new ArgumentOutOfRangeException("value", value, "must not be negative");
                _memoryLimit = value;
            }
        }

        /// <summary>CUDA arena growth.</summary>
        public ArenaExtendStrategy ArenaExtendStrategy { get; set; }

        internal NativeMethods.sam2_provider ToNative()
        {
            return new NativeMethods.sam2_provider
            {
                provider = (uint)Provider,
                device_id = _deviceId,
                memory_limit = (ulong)_memoryLimit,
                arena_extend_strategy = (uint)ArenaExtendStrategy,
            };
        }

        /// <summary>Pins the native form of <paramref name="requests"/> and writes its address and count; null or empty gives NULL, 0.</summary>
        internal static void Pin(IList<Sam2ProviderRequest> requests, PinSet pins, out IntPtr pointer, out UIntPtr count)
        {
            pointer = IntPtr.Zero;
            count = UIntPtr.Zero;
            if (requests == null || requests.Count == 0)
                return;
            var native = new NativeMethods.sam2_provider[requests.Count];
            for (int i = 0; i < native.Length; i++)
            {
                if (requests[i] == null)
                    throw new ArgumentNullException("options.Providers", "options.Providers[" + i + "] is null");
                native[i] = requests[i].ToNative();
            }
            pointer = pins.Pin(native);
            count = (UIntPtr)native.Length;
        }
    }

    /// <summary>
    /// The one reader of what a session runs on: the encoder and the predictor answer the same two
    /// questions through their own exports (<c>sam2_encoder_device</c>/<c>sam2_predictor_device</c>,
    /// <c>sam2_encoder_providers</c>/<c>sam2_predictor_providers</c>).
    /// </summary>
    internal static class SessionDevice
    {
        internal delegate Sam2Status DeviceCall<THandle>(THandle handle, out uint provider, out int deviceId, out int fellBack);

        internal delegate Sam2Status ProvidersCall<THandle>(THandle handle, byte[] buffer, UIntPtr length, out UIntPtr needed);

        internal static Sam2DeviceInfo Device<THandle>(THandle handle, DeviceCall<THandle> call)
        {
            uint provider;
            int deviceId, fellBack;
            Sam2Error.Check(call(handle, out provider, out deviceId, out fellBack));
            return new Sam2DeviceInfo((ExecutionProvider)provider, deviceId, fellBack != 0);
        }

        /// <summary>The session's execution providers in priority order, from their comma-separated native list.</summary>
        internal static string[] ExecutionProviders<THandle>(THandle handle, ProvidersCall<THandle> call)
        {
            string list = Sam2Error.ReadString((byte[] buf, UIntPtr len, out UIntPtr needed) => call(handle, buf, len, out needed));
            return list.Length == 0 ? new string[0] : list.Split(',');
        }
    }

    /// <summary>What a session effectively runs on (<c>sam2_encoder_device</c>, <c>sam2_predictor_device</c>).</summary>
    public struct Sam2DeviceInfo
    {
        internal Sam2DeviceInfo(ExecutionProvider provider, int deviceId, bool fellBack) : this()
        {
            Provider = provider;
            DeviceId = deviceId;
            FellBack = fellBack;
        }

        /// <summary>The provider that runs the model.</summary>
        public ExecutionProvider Provider { get; private set; }

        /// <summary>Its device id.</summary>
        public int DeviceId { get; private set; }

        /// <summary>True when a requested GPU provider was unavailable and the session fell back.</summary>
        public bool FellBack { get; private set; }

        /// <inheritdoc />
        public override string ToString()
        {
            return Provider + ":" + DeviceId + (FellBack ? " (fell back)" : "");
        }
    }
}
