using System;
using System.Collections.Generic;
using System.Runtime.InteropServices;

namespace Sam2
{
    /// <summary>Options of <see cref="Sam2Encoder"/>. A new instance holds the library's defaults.</summary>
    public sealed class Sam2EncoderOptions
    {
        private readonly List<Sam2ProviderRequest> _providers = new List<Sam2ProviderRequest>();
        private int _intraThreads;

        /// <summary>Creates options holding the native defaults (<c>sam2_encoder_options_init</c>).</summary>
        public Sam2EncoderOptions()
        {
            var defaults = NativeOptions.Defaults<NativeMethods.sam2_encoder_options>(NativeMethods.sam2_encoder_options_init);
            OutputTarget = (OutputTarget)defaults.output_target;
            _intraThreads = (int)defaults.intra_threads;
            OnDeviceMismatch = (DeviceMismatchPolicy)defaults.on_device_mismatch;
            WeightSharing = (WeightSharing)defaults.weight_sharing;
            GraphOptimization = (GraphOptimization)defaults.graph_optimization;
            DisabledRewrites = (Rewrites)defaults.disabled_rewrites;
        }

        /// <summary>Shared weights (default: one copy for every session of the model) or an explicit copy.</summary>
        public WeightSharing WeightSharing { get; set; }

        /// <summary>How far ONNX Runtime optimises the graph (default All; weights stay shared at every level).</summary>
        public GraphOptimization GraphOptimization { get; set; }

        /// <summary>
        /// Load-time rewrites switched off (default <see cref="Rewrites.None"/>: every rewrite the
        /// model allows; <see cref="Rewrites.All"/>: the graph as exported). An unknown bit is an
        /// ArgumentException from the library.
        /// </summary>
        public Rewrites DisabledRewrites { get; set; }

        /// <summary>Where the embedding is placed: <see cref="Sam2.OutputTarget.Device"/> (default) or <see cref="Sam2.OutputTarget.Host"/>.</summary>
        public OutputTarget OutputTarget { get; set; }

        /// <summary>Intra-op threads of the session; 0 lets ONNX Runtime choose (one per core).</summary>
        public int IntraThreads
        {
            get { return _intraThreads; }
            set
            {
                if (value < 0)
                    throw new ArgumentOutOfRangeException("value", value, "must be 0 (automatic) or more");
                _intraThreads = value;
            }
        }

        /// <summary>Execution providers wanted, in order of preference; empty means the CPU.</summary>
        public IList<Sam2ProviderRequest> Providers
        {
            get { return _providers; }
        }

        /// <summary>What to do when the first requested provider is a GPU one the session did not get.</summary>
        public DeviceMismatchPolicy OnDeviceMismatch { get; set; }

        /// <summary>The native struct; arrays it points to are pinned in <paramref name="pins"/>.</summary>
        internal NativeMethods.sam2_encoder_options ToNative(PinSet pins)
        {
            var native = NativeOptions.Defaults<NativeMethods.sam2_encoder_options>(NativeMethods.sam2_encoder_options_init);
            native.output_target = (uint)OutputTarget;
            native.intra_threads = (uint)_intraThreads;
            Sam2ProviderRequest.Pin(_providers, pins, out native.providers, out native.provider_count);
            native.on_device_mismatch = (uint)OnDeviceMismatch;
            native.weight_sharing = (uint)WeightSharing;
            native.graph_optimization = (uint)GraphOptimization;
            native.disabled_rewrites = (ulong)DisabledRewrites;
            return native;
        }
    }

    /// <summary>Options of <see cref="Sam2Predictor"/>. A new instance holds the library's defaults.</summary>
    public sealed class Sam2PredictorOptions
    {
        private readonly List<Sam2ProviderRequest> _providers = new List<Sam2ProviderRequest>();
        private int _intraThreads;

        /// <summary>Creates options holding the native defaults (<c>sam2_predictor_options_init</c>).</summary>
        public Sam2PredictorOptions()
        {
            var defaults = NativeOptions.Defaults<NativeMethods.sam2_predictor_options>(NativeMethods.sam2_predictor_options_init);
            _intraThreads = (int)defaults.intra_threads;
            EncoderFingerprint = Utf8.FromNative(defaults.encoder_fingerprint);
            OnDeviceMismatch = (DeviceMismatchPolicy)defaults.on_device_mismatch;
            AllowEmbeddingCopy = defaults.allow_embedding_copy != 0;
            _poolSize = (int)defaults.pool_size;
            WeightSharing = (WeightSharing)defaults.weight_sharing;
            GraphOptimization = (GraphOptimization)defaults.graph_optimization;
            DisabledRewrites = (Rewrites)defaults.disabled_rewrites;
        }

        private int _poolSize;

        /// <summary>Sessions in the pool (predictions that run at once); 0 = one per core.</summary>
        public int PoolSize
        {
            get { return _poolSize; }
            set
            {
                if (value < 0)
                    throw new ArgumentOutOfRangeException("value", value, "must be 0 (one per core) or more");
                _poolSize = value;
            }
        }

        /// <summary>Shared weights (default) or an explicit copy.</summary>
        public WeightSharing WeightSharing { get; set; }

        /// <summary>How far ONNX Runtime optimises the graph (default All; weights stay shared at every level).</summary>
        public GraphOptimization GraphOptimization { get; set; }

        /// <summary>
        /// Load-time rewrites switched off (default <see cref="Rewrites.None"/>: every rewrite the
        /// model allows; <see cref="Rewrites.All"/>: the graph as exported). An unknown bit is an
        /// ArgumentException from the library.
        /// </summary>
        public Rewrites DisabledRewrites { get; set; }

        /// <summary>Intra-op threads of each session; 0 lets ONNX Runtime choose.</summary>
        public int IntraThreads
        {
            get { return _intraThreads; }
            set
            {
                if (value < 0)
                    throw new ArgumentOutOfRangeException("value", value, "must be 0 (automatic) or more");
                _intraThreads = value;
            }
        }

        /// <summary>
        /// Null, or the fingerprint ("sam2fp1-…") of the encoder whose embeddings are accepted
        /// (<see cref="Sam2Encoder.Fingerprint"/>), for a predictor made without its encoder.
        /// </summary>
        public string EncoderFingerprint { get; set; }

        /// <summary>Execution providers wanted, in order of preference; empty means the CPU.</summary>
        public IList<Sam2ProviderRequest> Providers
        {
            get { return _providers; }
        }

        /// <summary>What to do when the first requested provider is a GPU one the session did not get.</summary>
        public DeviceMismatchPolicy OnDeviceMismatch { get; set; }

        /// <summary>
        /// False (default): an embedding held on another device than the predictor's is refused
        /// (ArgumentException). True: it is copied to the host for each prediction.
        /// </summary>
        public bool AllowEmbeddingCopy { get; set; }

        /// <summary>The native struct; strings and arrays it points to are pinned in <paramref name="pins"/>.</summary>
        internal NativeMethods.sam2_predictor_options ToNative(PinSet pins)
        {
            var native = NativeOptions.Defaults<NativeMethods.sam2_predictor_options>(NativeMethods.sam2_predictor_options_init);
            native.intra_threads = (uint)_intraThreads;
            byte[] fingerprint = Utf8.ToNative(EncoderFingerprint, "options.EncoderFingerprint");
            native.encoder_fingerprint = fingerprint == null ? IntPtr.Zero : pins.Pin(fingerprint);
            Sam2ProviderRequest.Pin(_providers, pins, out native.providers, out native.provider_count);
            native.on_device_mismatch = (uint)OnDeviceMismatch;
            native.allow_embedding_copy = AllowEmbeddingCopy ? 1u : 0u;
            native.pool_size = (uint)_poolSize;
            native.weight_sharing = (uint)WeightSharing;
            native.graph_optimization = (uint)GraphOptimization;
            native.disabled_rewrites = (ulong)DisabledRewrites;
            return native;
        }
    }

    /// <summary>
    /// Reads an options struct's defaults from its native <c>_init</c> function safely across
    /// versions: <c>_init</c> writes the library's own sizeof(struct), which is larger than this
    /// wrapper's struct when the library is newer than the wrapper. So it writes into a generous
    /// scratch block; the wrapper keeps the prefix it knows and sets struct_size to the smaller of
    /// the two sizes (the library reads a smaller struct_size as an older caller's prefix).
    /// </summary>
    internal static class NativeOptions
    {
        private const int ScratchSize = 4096;

        internal delegate Sam2Status InitFunction(IntPtr options, UIntPtr structSize);

        internal static T Defaults<T>(InitFunction init) where T : struct
        {
            int managedSize = Marshal.SizeOf(typeof(T));
            IntPtr scratch = Marshal.AllocHGlobal(ScratchSize);
            try
            {
                for (int offset = 0; offset < ScratchSize; offset += 8)
                    Marshal.WriteInt64(scratch, offset, 0);
                // The library writes exactly the struct size this wrapper was built with.
                Sam2Error.Check(init(scratch, new UIntPtr((uint)managedSize)));
                return (T)Marshal.PtrToStructure(scratch, typeof(T));
            }
            finally
            {
                Marshal.FreeHGlobal(scratch);
            }
        }
    }
}
