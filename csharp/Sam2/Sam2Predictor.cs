using System;
using System.Collections.Generic;

namespace Sam2
{
    /// <summary>
    /// A SAM2 prompt decoder. Thread-safe: several threads may predict at once, on one predictor
    /// and one embedding. Results do not depend on it and may outlive it.
    /// </summary>
    public sealed class Sam2Predictor : Sam2NativeObject
    {
        // The defaults of sam2_predict_options never change in a process: read them once.
        private static readonly Lazy<NativeMethods.sam2_predict_options> PredictDefaults =
            new Lazy<NativeMethods.sam2_predict_options>(() =>
                NativeOptions.Defaults<NativeMethods.sam2_predict_options>(NativeMethods.sam2_predict_options_init));

        /// <summary>Loads a decoder model (<c>sam2_predictor_new</c>).</summary>
        /// <param name="encoder">Null, or the encoder whose embeddings this predictor accepts (its
        /// fingerprint is recorded; the encoder may be disposed afterwards). With no providers in
        /// <paramref name="options"/>, the predictor then runs where that encoder's embeddings live
        /// (its GPU when it leaves them there, reading them in place; the CPU otherwise). Without an
        /// encoder or <see cref="Sam2PredictorOptions.EncoderFingerprint"/>, embeddings are checked for
        /// layout only.</param>
        /// <param name="decoderPath">Path of the decoder .onnx file.</param>
        /// <param name="options">Null for the defaults.</param>
        /// <exception cref="ArgumentNullException"><paramref name="decoderPath"/> is null.</exception>
        /// <exception cref="Sam2Exception">Status Model, RuntimeNotFound, …</exception>
        public Sam2Predictor(Sam2Encoder encoder, string decoderPath, Sam2PredictorOptions options = null)
            : base(Load(encoder, decoderPath, options))
        {
        }

        private static PredictorHandle Load(Sam2Encoder encoder, string decoderPath, Sam2PredictorOptions options)
        {
            if (decoderPath == null)
                throw new ArgumentNullException("decoderPath");
            byte[] path = Utf8.ToNative(decoderPath, "decoderPath");
            EncoderHandle encoderHandle = encoder == null ? null : encoder.Handle;
            using (var pins = new PinSet())
            using (var lease = new HandleLease(encoderHandle, "Sam2Encoder"))
            {
                var native = (options ?? new Sam2PredictorOptions()).ToNative(pins);
                PredictorHandle handle;
                Sam2Status status = NativeMethods.sam2_predictor_new(lease.Pointer, path, ref native, out handle);
                return Sam2Error.CheckNew(status, handle);
            }
        }

        internal PredictorHandle Handle
        {
            get { return (PredictorHandle)OpenHandle; }
        }

        /// <summary>What the predictor effectively runs on (<c>sam2_predictor_device</c>); FellBack tells a silent CPU fallback.</summary>
        public Sam2DeviceInfo Device
        {
            get { return SessionDevice.Device(Handle, NativeMethods.sam2_predictor_device); }
        }

        /// <summary>The session's ONNX Runtime execution providers in priority order ("CPUExecutionProvider", …).</summary>
        public string[] ExecutionProviders
        {
            get { return SessionDevice.ExecutionProviders(Handle, NativeMethods.sam2_predictor_providers); }
        }

        /// <summary>Predicts the best mask of each prompt (one object per prompt).</summary>
        public Sam2Masks Predict(Sam2Embedding embedding, params Sam2Prompt[] prompts)
        {
            return Predict(embedding, prompts, false);
        }

        /// <summary>Predicts masks for independent prompts, one object each (<c>sam2_predict</c>).</summary>
        /// <param name="embedding">The encoded image; read in place, never copied.</param>
        /// <param name="prompts">At least one prompt.</param>
        /// <param name="multimask">False: the best mask per object (by predicted IoU); true: every candidate.</param>
        /// <returns>A new result, owned by the caller.</returns>
        /// <exception cref="ArgumentNullException"><paramref name="embedding"/>, <paramref name="prompts"/> or one of its elements is null.</exception>
        /// <exception cref="ArgumentException">A point outside the image, NaN, an empty prompt, a box
        /// with x2 &lt; x1, an embedding this predictor cannot read, …; ParamName is the native
        /// argument's name ("points", "box", "prompt", "mask_input", "embedding", "prompt_count").</exception>
        /// <exception cref="Sam2Exception">Status ModelMismatch: the embedding was made by another model.</exception>
        public Sam2Masks Predict(Sam2Embedding embedding, Sam2Prompt[] prompts, bool multimask)
        {
            if (embedding == null)
                throw new ArgumentNullException("embedding");
            if (prompts == null)
                throw new ArgumentNullException("prompts");
            PredictorHandle predictor = Handle;
            EmbeddingHandle embeddingHandle = embedding.Handle;

            var native = new NativeMethods.sam2_prompt[prompts.Length];
            using (var pins = new PinSet())
            {
                for (int i = 0; i < prompts.Length; i++)
                {
                    Sam2Prompt prompt = prompts[i];
                    if (prompt == null)
                        throw new ArgumentNullException("prompts", "prompts[" + i + "] is null");
                    native[i] = ToNative(prompt, pins);
                }
                NativeMethods.sam2_predict_options options = PredictDefaults.Value;
                options.multimask = multimask ? 1u : 0u;
                MasksHandle result;
                Sam2Status status = NativeMethods.sam2_predict(predictor, embeddingHandle, native, (UIntPtr)native.Length, ref options, out result);
                return new Sam2Masks(Sam2Error.CheckNew(status, result, embeddingHandle));
            }
        }

        internal static unsafe NativeMethods.sam2_prompt ToNative(Sam2Prompt prompt, PinSet pins)
        {
            var result = new NativeMethods.sam2_prompt();
            IList<Sam2Point> points = prompt.Points;
            if (points.Count > 0)
            {
                var nativePoints = new NativeMethods.sam2_point[points.Count];
                for (int j = 0; j < nativePoints.Length; j++)
                {
                    nativePoints[j].x = points[j].X;
                    nativePoints[j].y = points[j].Y;
                    nativePoints[j].label = (int)points[j].Label;
                }
                result.points = pins.Pin(nativePoints);
                result.point_count = (UIntPtr)nativePoints.Length;
            }
            Sam2Box? box = prompt.Box;
            if (box.HasValue)
            {
                result.has_box = 1;
                result.box[0] = box.Value.X1;
                result.box[1] = box.Value.Y1;
                result.box[2] = box.Value.X2;
                result.box[3] = box.Value.Y2;
            }
            float[] mask = prompt.MaskInput;
            if (mask != null)
            {
                result.mask_input = pins.Pin(mask);
                result.mask_input_len = (UIntPtr)mask.Length;
            }
            return result;
        }
    }
}
