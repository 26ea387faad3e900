using System;

namespace Sam2
{
    /// <summary>
    /// An encoded image: three feature tensors, the original image size, the fingerprint of the
    /// encoder that made it, and where it lives. Immutable: several predictors on several threads
    /// may read it at once. It does not depend on the encoder that made it.
    /// </summary>
    public sealed class Sam2Embedding : Sam2NativeObject
    {
        internal Sam2Embedding(EmbeddingHandle handle) : base(handle)
        {
        }

        internal EmbeddingHandle Handle
        {
            get { return (EmbeddingHandle)OpenHandle; }
        }

        /// <summary>
        /// Loads an embedding file written by <see cref="Save"/> (<c>sam2_embedding_load</c>).
        /// </summary>
        /// <param name="path">The file.</param>
        /// <param name="predictor">Null, or the predictor the embedding is for: a file made by a
        /// different encoder than the predictor's is refused (Status ModelMismatch).</param>
        /// <param name="placement">Host memory, or the predictor's device (needs a predictor).</param>
        /// <exception cref="Sam2Exception">Status EmbeddingFormat (truncated, corrupted, foreign or
        /// unsupported file), ModelMismatch, Io.</exception>
        public static Sam2Embedding Load(string path, Sam2Predictor predictor = null, Placement placement = Placement.Host)
        {
            if (path == null)
                throw new ArgumentNullException("path");
            byte[] nativePath = Utf8.ToNative(path, "path");
            PredictorHandle predictorHandle = predictor == null ? null : predictor.Handle;
            using (var lease = new HandleLease(predictorHandle, "Sam2Predictor"))
            {
                EmbeddingHandle result;
                Sam2Status status = NativeMethods.sam2_embedding_load(nativePath, lease.Pointer, (uint)placement, out result);
                return new Sam2Embedding(Sam2Error.CheckNew(status, result));
            }
        }

        /// <summary>
        /// Saves the embedding (<c>sam2_embedding_save</c>; safetensors with sam2 metadata). The
        /// write is atomic: a crash leaves any previous file intact. Through a symbolic link, the
        /// file the link names is replaced and the link kept.
        /// </summary>
        /// <exception cref="EmbeddingNotSerializableException">The embedding is in device memory;
        /// nothing was written. Copy it with <see cref="ToHost"/> first.</exception>
        /// <exception cref="Sam2Exception">Status Io.</exception>
        public void Save(string path)
        {
            if (path == null)
                throw new ArgumentNullException("path");
            EmbeddingHandle handle = Handle;
            Sam2Error.Check(NativeMethods.sam2_embedding_save(handle, Utf8.ToNative(path, "path")), handle);
        }

        /// <summary>
        /// A host copy of the embedding (<c>sam2_embedding_to_host</c>): cheap for a host embedding
        /// (the tensors are shared), a device-to-host copy for a device one.
        /// </summary>
        /// <exception cref="Sam2EnvironmentConfigurationException">The device's execution provider is not available.</exception>
        public Sam2Embedding ToHost()
        {
            EmbeddingHandle handle = Handle;
            EmbeddingHandle result;
            Sam2Status status = NativeMethods.sam2_embedding_to_host(handle, out result);
            return new Sam2Embedding(Sam2Error.CheckNew(status, result, handle));
        }

        /// <summary>The ONNX Runtime allocator holding the embedding ("Cpu", "Cuda", "CudaPinned", "DML", …).</summary>
        public string AllocatorName
        {
            get
            {
                EmbeddingHandle handle = Handle;
                // The string is owned by the embedding: decode it before the handle can be released.
                using (new HandleLease(handle, GetType().Name))
                    return Utf8.FromNative(NativeMethods.sam2_embedding_allocator_name(handle));
            }
        }

        /// <summary>True when the embedding is in host-readable memory and so can be saved.</summary>
        public bool IsSerializable
        {
            get { return NativeMethods.sam2_embedding_is_serializable(Handle) != 0; }
        }

        /// <summary>Device id of the memory holding the embedding (0 for the host).</summary>
        public int DeviceId
        {
            get
            {
                EmbeddingHandle handle = Handle;
                int id;
                Sam2Error.Check(NativeMethods.sam2_embedding_device_id(handle, out id), handle);
                return id;
            }
        }

        /// <summary>The precision of the encoder that made the embedding (<c>sam2_embedding_precision</c>; embedding files record it).</summary>
        public Precision Precision
        {
            get
            {
                EmbeddingHandle handle = Handle;
                uint value;
                Sam2Error.Check(NativeMethods.sam2_embedding_precision(handle, out value), handle);
                return (Precision)value;
            }
        }

        /// <summary>Width of the image the embedding was made from.</summary>
        public int ImageWidth
        {
            get { return (int)ImageSize()[0]; }
        }

        /// <summary>Height of the image the embedding was made from.</summary>
        public int ImageHeight
        {
            get { return (int)ImageSize()[1]; }
        }

        /// <summary>Fingerprint ("sam2fp1-…") of the encoder model that made the embedding.</summary>
        public string Fingerprint
        {
            get
            {
                EmbeddingHandle handle = Handle;
                return Sam2Error.ReadString((byte[] buf, UIntPtr len, out UIntPtr needed) =>
                    NativeMethods.sam2_embedding_fingerprint(handle, buf, len, out needed), handle);
            }
        }

        private uint[] ImageSize()
        {
            EmbeddingHandle handle = Handle;
            uint width, height;
            Sam2Error.Check(NativeMethods.sam2_embedding_image_size(handle, out width, out height), handle);
            return new[] { width, height };
        }
    }
}
