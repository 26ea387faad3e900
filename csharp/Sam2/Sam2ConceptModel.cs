using System;
using System.Collections.Generic;
using Microsoft.Win32.SafeHandles;

namespace Sam2
{
    /// <summary>Owns a <c>sam2_concept_model*</c>; released with <c>sam2_concept_model_free</c>.</summary>
    internal sealed class ConceptModelHandle : SafeHandleZeroOrMinusOneIsInvalid
    {
        /// <summary>Used by the marshaller for out-params.</summary>
        public ConceptModelHandle() : base(true) { }

        protected override bool ReleaseHandle()
        {
            NativeMethods.sam2_concept_model_free(handle);
            return true;
        }
    }

    /// <summary>Options of <see cref="Sam2ConceptModel"/>. A new instance holds the library's defaults.
    /// The session settings are those of <see cref="Sam2EncoderOptions"/>, for all three graphs.</summary>
    public sealed class Sam2ConceptModelOptions
    {
        private readonly List<Sam2ProviderRequest> _providers = new List<Sam2ProviderRequest>();
        private int _intraThreads;

        /// <summary>Creates options holding the native defaults (<c>sam2_concept_model_options_init</c>).</summary>
        public Sam2ConceptModelOptions()
        {
            var defaults = NativeOptions.Defaults<NativeMethods.sam2_concept_model_options>(NativeMethods.sam2_concept_model_options_init);
            OutputTarget = (OutputTarget)defaults.output_target;
            _intraThreads = (int)defaults.intra_threads;
            OnDeviceMismatch = (DeviceMismatchPolicy)defaults.on_device_mismatch;
            WeightSharing = (WeightSharing)defaults.weight_sharing;
            GraphOptimization = (GraphOptimization)defaults.graph_optimization;
            DisabledRewrites = (Rewrites)defaults.disabled_rewrites;
        }

        /// <summary>Where embeddings are placed: <see cref="Sam2.OutputTarget.Device"/> (default) or <see cref="Sam2.OutputTarget.Host"/> (they can then be saved).</summary>
        public OutputTarget OutputTarget { get; set; }

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

        /// <summary>Execution providers wanted, in order of preference; empty means the CPU.</summary>
        public IList<Sam2ProviderRequest> Providers
        {
            get { return _providers; }
        }

        /// <summary>What to do when the first requested provider is a GPU one the sessions did not get.</summary>
        public DeviceMismatchPolicy OnDeviceMismatch { get; set; }

        /// <summary>Shared weights (default) or an explicit copy.</summary>
        public WeightSharing WeightSharing { get; set; }

        /// <summary>How far ONNX Runtime optimises the graphs (default All).</summary>
        public GraphOptimization GraphOptimization { get; set; }

        /// <summary>Load-time rewrites switched off (default <see cref="Rewrites.None"/>).</summary>
        public Rewrites DisabledRewrites { get; set; }

        /// <summary>
        /// Null (default): CLIP's vocabulary <c>bpe_simple_vocab_16e6.txt.gz</c> beside the graphs;
        /// otherwise the path of that file. Read while the model loads only.
        /// </summary>
        public string VocabularyPath { get; set; }

        /// <summary>The native struct; strings and arrays it points to are pinned in <paramref name="pins"/>.</summary>
        internal NativeMethods.sam2_concept_model_options ToNative(PinSet pins)
        {
            var native = NativeOptions.Defaults<NativeMethods.sam2_concept_model_options>(NativeMethods.sam2_concept_model_options_init);
            native.output_target = (uint)OutputTarget;
            native.intra_threads = (uint)_intraThreads;
            Sam2ProviderRequest.Pin(_providers, pins, out native.providers, out native.provider_count);
            native.on_device_mismatch = (uint)OnDeviceMismatch;
            native.weight_sharing = (uint)WeightSharing;
            native.graph_optimization = (uint)GraphOptimization;
            native.disabled_rewrites = (ulong)DisabledRewrites;
            byte[] vocabulary = Utf8.ToNative(VocabularyPath, "options.VocabularyPath");
            native.vocabulary_path = vocabulary == null ? IntPtr.Zero : pins.Pin(vocabulary);
            return native;
        }
    }

    /// <summary>Options of <see cref="Sam2ConceptModel.Segment(Sam2Embedding, IReadOnlyList{Sam2Concept}, Sam2ConceptSegmentOptions)"/>. A new instance holds the library's defaults.</summary>
    public sealed class Sam2ConceptSegmentOptions
    {
        private static readonly Lazy<NativeMethods.sam2_concept_segment_options> NativeDefaults =
            new Lazy<NativeMethods.sam2_concept_segment_options>(() =>
                NativeOptions.Defaults<NativeMethods.sam2_concept_segment_options>(NativeMethods.sam2_concept_segment_options_init));

        private int _maxInstances;

        /// <summary>Creates options holding the native defaults (<c>sam2_concept_segment_options_init</c>).</summary>
        public Sam2ConceptSegmentOptions()
        {
            NativeMethods.sam2_concept_segment_options d = NativeDefaults.Value;
            ScoreThreshold = d.score_threshold;
            Nms = (Suppression)d.nms;
            NmsIou = d.nms_iou;
            _maxInstances = checked((int)d.max_instances);
            Masks = d.masks != 0;
        }

        /// <summary>Instances scoring above it are kept, in [0, 1] (0.5, SAM 3's).</summary>
        public float ScoreThreshold { get; set; }

        /// <summary>How each concept's instances are thinned (<see cref="Suppression.None"/>).</summary>
        public Suppression Nms { get; set; }

        /// <summary>The overlap (intersection over union) above which suppression drops, in (0, 1] (0.7).</summary>
        public float NmsIou { get; set; }

        /// <summary>Most instances kept per concept, the best first, at least 1 (200: all the decoder's queries).</summary>
        public int MaxInstances
        {
            get { return _maxInstances; }
            set
            {
                if (value < 0)
                    throw new ArgumentOutOfRangeException("value", value, "must not be negative");
                _maxInstances = value;
            }
        }

        /// <summary>True (default): each instance has its mask; false: boxes and scores only (much less memory).</summary>
        public bool Masks { get; set; }

        internal NativeMethods.sam2_concept_segment_options ToNative()
        {
            NativeMethods.sam2_concept_segment_options o = NativeDefaults.Value;
            o.score_threshold = ScoreThreshold;
            o.nms = (uint)Nms;
            o.nms_iou = NmsIou;
            o.max_instances = (uint)_maxInstances;
            o.masks = Masks ? 1u : 0u;
            return o;
        }
    }

    /// <summary>
    /// A SAM 3 concept model (<c>sam2_concept_model</c>): its image encoder, language encoder and
    /// decoder, on shared weights. It finds every instance of a concept named by a phrase
    /// ("yellow school bus") or shown by exemplar boxes. Thread-safe: encodes and segmentations may
    /// run from several threads at once. Embeddings and results it makes may outlive it.
    /// </summary>
    public sealed class Sam2ConceptModel : Sam2NativeObject
    {
        /// <summary>Loads a SAM 3 export (<c>sam2_concept_model_new</c>).</summary>
        /// <param name="path">Its folder (<c>sam3_image_encoder.onnx</c>, <c>sam3_language_encoder.onnx</c>,
        /// <c>sam3_decoder.onnx</c>, and CLIP's vocabulary unless <see cref="Sam2ConceptModelOptions.VocabularyPath"/>
        /// names it), or one of its graphs (the others beside it, with the same prefix).</param>
        /// <param name="options">Null for the defaults.</param>
        /// <exception cref="ArgumentNullException"><paramref name="path"/> is null.</exception>
        /// <exception cref="Sam2Exception">Status Model (a graph missing, unreadable or not SAM 3's; a
        /// missing or foreign vocabulary), Io, RuntimeNotFound, …</exception>
        public Sam2ConceptModel(string path, Sam2ConceptModelOptions options = null) : base(Load(path, options))
        {
        }

        private static ConceptModelHandle Load(string path, Sam2ConceptModelOptions options)
        {
            if (path == null)
                throw new ArgumentNullException("path");
            byte[] nativePath = Utf8.ToNative(path, "path");
            using (var pins = new PinSet())
            {
                var native = (options ?? new Sam2ConceptModelOptions()).ToNative(pins);
                ConceptModelHandle handle;
                Sam2Status status = NativeMethods.sam2_concept_model_new(nativePath, ref native, out handle);
                return Sam2Error.CheckNew(status, handle);
            }
        }

        internal ConceptModelHandle Handle
        {
            get { return (ConceptModelHandle)OpenHandle; }
        }

        /// <summary>
        /// The model's image encoder, shared with it (no copy; <c>sam2_concept_model_encoder</c>):
        /// give it to a <see cref="Sam2Predictor"/> of SAM 3's click decoder
        /// (<c>sam3_interactive_decoder.onnx</c>) to segment clicks and boxes on the same embeddings
        /// as the concepts. Dispose it when done; the model stays valid.
        /// </summary>
        public Sam2Encoder OpenEncoder()
        {
            EncoderHandle handle;
            Sam2Status status = NativeMethods.sam2_concept_model_encoder(Handle, out handle);
            return Sam2Encoder.Wrap(Sam2Error.CheckNew(status, handle));
        }

        /// <summary>The most exemplar boxes one concept may hold (the decoder's box slots).</summary>
        public int MaxExemplars
        {
            get
            {
                UIntPtr slots;
                Sam2Error.Check(NativeMethods.sam2_concept_model_max_exemplars(Handle, out slots));
                return checked((int)slots.ToUInt64());
            }
        }

        /// <summary>Encodes tightly packed pixels (stride = width × bytes per pixel).</summary>
        public Sam2Embedding Encode(byte[] pixels, int width, int height, PixelFormat format)
        {
            return Encode(pixels, width, height, 0, format);
        }

        /// <summary>Encodes one image with the model's image encoder (<c>sam2_concept_encode</c>).</summary>
        /// <param name="pixels"><paramref name="height"/> rows of <paramref name="width"/> pixels in <paramref name="format"/>.</param>
        /// <param name="width">Width in pixels.</param>
        /// <param name="height">Height in pixels.</param>
        /// <param name="stride">Bytes from one row to the next; 0 means tightly packed.</param>
        /// <param name="format">Pixel layout.</param>
        /// <returns>A new embedding (SAM 3's three feature levels, 111 MB in float32), owned by the
        /// caller; only this model's <c>Segment</c> reads it.</returns>
        /// <exception cref="ArgumentNullException"><paramref name="pixels"/> is null.</exception>
        /// <exception cref="ArgumentException">A size, stride or format the library refuses; ParamName is the native argument's name.</exception>
        public Sam2Embedding Encode(byte[] pixels, int width, int height, int stride, PixelFormat format)
        {
            Sam2Encoder.CheckPixels(pixels, width, height, stride);
            EmbeddingHandle result;
            Sam2Status status = NativeMethods.sam2_concept_encode(Handle, pixels, (UIntPtr)pixels.Length, (uint)width, (uint)height,
                (UIntPtr)stride, (uint)format, out result);
            return new Sam2Embedding(Sam2Error.CheckNew(status, result));
        }

        /// <summary>
        /// Encodes pixels held in unmanaged memory (a locked bitmap, say); the memory is only read
        /// during the call.
        /// </summary>
        /// <param name="pixels">Address of the first row.</param>
        /// <param name="length">Bytes readable at <paramref name="pixels"/>.</param>
        /// <param name="width">Width in pixels.</param>
        /// <param name="height">Height in pixels.</param>
        /// <param name="stride">Bytes from one row to the next; 0 means tightly packed.</param>
        /// <param name="format">Pixel layout.</param>
        public Sam2Embedding Encode(IntPtr pixels, long length, int width, int height, int stride, PixelFormat format)
        {
            if (pixels == IntPtr.Zero)
                throw new ArgumentNullException("pixels");
            if (length < 0)
                throw new ArgumentOutOfRangeException("length", length, "must not be negative");
            Sam2Encoder.CheckSizes(width, height, stride);
            EmbeddingHandle result;
            Sam2Status status = NativeMethods.sam2_concept_encode_ptr(Handle, pixels, (UIntPtr)(ulong)length, (uint)width, (uint)height,
                (UIntPtr)stride, (uint)format, out result);
            return new Sam2Embedding(Sam2Error.CheckNew(status, result));
        }

        /// <summary>Finds every instance of each phrase, with the default options: one concept per phrase, in order.</summary>
        /// <exception cref="ArgumentException">No phrase; ParamName "phrases".</exception>
        public Sam2ConceptResult Segment(Sam2Embedding embedding, params string[] phrases)
        {
            if (phrases == null)
                throw new ArgumentNullException("phrases");
            if (phrases.Length == 0)
                throw new ArgumentException("give at least one phrase", "phrases");
            var concepts = new Sam2Concept[phrases.Length];
            for (int i = 0; i < phrases.Length; i++)
            {
                if (phrases[i] == null)
                    throw new ArgumentNullException("phrases", "phrases[" + i + "] is null");
                concepts[i] = new Sam2Concept(phrases[i]);
            }
            return Segment(embedding, concepts, null);
        }

        /// <summary>
        /// Finds every instance of each concept in an image this model encoded
        /// (<c>sam2_concept_segment</c>; <see cref="Encode(byte[], int, int, int, PixelFormat)"/>, or
        /// <see cref="Sam2Embedding.Load"/> of its file): one decoder run per concept.
        /// </summary>
        /// <param name="embedding">The encoded image; read in place.</param>
        /// <param name="concepts">1 to 256 concepts, read during the call only.</param>
        /// <param name="options">Null for the defaults.</param>
        /// <returns>A new result, owned by the caller: instances concept by concept in the order
        /// given, the best first within each.</returns>
        /// <exception cref="ArgumentNullException"><paramref name="embedding"/>, <paramref name="concepts"/> or one of its elements is null.</exception>
        /// <exception cref="ArgumentException">No concept, a concept with neither a phrase nor a box,
        /// a box that is not finite, empty, inverted or outside the image, more boxes than
        /// <see cref="MaxExemplars"/>, an option out of range; ParamName is the native argument's name
        /// ("concepts", "concept", "phrase", "exemplars", "score_threshold", "nms_iou", …) and the
        /// message says which concept and box. A phrase holding a NUL character: ParamName "concepts".</exception>
        /// <exception cref="Sam2Exception">Status ModelMismatch: the embedding was made by a SAM2
        /// encoder or another SAM 3 export.</exception>
        public Sam2ConceptResult Segment(Sam2Embedding embedding, IReadOnlyList<Sam2Concept> concepts, Sam2ConceptSegmentOptions options = null)
        {
            if (embedding == null)
                throw new ArgumentNullException("embedding");
            if (concepts == null)
                throw new ArgumentNullException("concepts");
            ConceptModelHandle model = Handle;
            EmbeddingHandle embeddingHandle = embedding.Handle;
            var native = new NativeMethods.sam2_concept[concepts.Count];
            using (var pins = new PinSet())
            {
                for (int i = 0; i < native.Length; i++)
                {
                    Sam2Concept concept = concepts[i];
                    if (concept == null)
                        throw new ArgumentNullException("concepts", "concepts[" + i + "] is null");
                    native[i] = concept.ToNative(i, pins);
                }
                Sam2ConceptSegmentOptions managed = options ?? new Sam2ConceptSegmentOptions();
                NativeMethods.sam2_concept_segment_options nativeOptions = managed.ToNative();
                // Pinned even when empty: the library then reports "no concept" itself, not a NULL.
                IntPtr conceptArray = pins.Pin(native);
                ConceptResultHandle result;
                Sam2Status status = NativeMethods.sam2_concept_segment(model, embeddingHandle, conceptArray,
                    (UIntPtr)native.Length, ref nativeOptions, out result);
                return new Sam2ConceptResult(Sam2Error.CheckNew(status, result, embeddingHandle), managed.Masks);
            }
        }
    }
}
