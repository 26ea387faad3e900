using System;

namespace Sam2
{
    /// <summary>
    /// A SAM2 image encoder (an ONNX export whose contract is recognised from its input and output
    /// names). Thread-safe: several threads may encode at once. Embeddings it makes do not depend
    /// on it and may outlive it.
    /// </summary>
    public sealed class Sam2Encoder : Sam2NativeObject
    {
        /// <summary>Loads an encoder model (<c>sam2_encoder_new</c>).</summary>
        /// <param name="modelPath">Path of the encoder .onnx file.</param>
        /// <param name="options">Null for the defaults.</param>
        /// <exception cref="ArgumentNullException"><paramref name="modelPath"/> is null.</exception>
        /// <exception cref="Sam2Exception">Status Model (unreadable or unrecognised model), RuntimeNotFound, …</exception>
        public Sam2Encoder(string modelPath, Sam2EncoderOptions options = null) : base(Load(modelPath, options))
        {
        }

        /// <summary>Wraps a handle the library gave (a concept model's shared encoder). A factory,
        /// not a constructor overload: <c>new Sam2Encoder(null)</c> must stay the path's.</summary>
        internal static Sam2Encoder Wrap(EncoderHandle handle)
        {
            return new Sam2Encoder(handle, true);
        }

        private Sam2Encoder(EncoderHandle handle, bool wrapped) : base(handle)
        {
        }

        private static EncoderHandle Load(string modelPath, Sam2EncoderOptions options)
        {
            if (modelPath == null)
                throw new ArgumentNullException("modelPath");
            byte[] path = Utf8.ToNative(modelPath, "modelPath");
            using (var pins = new PinSet())
            {
                var native = (options ?? new Sam2EncoderOptions()).ToNative(pins);
                EncoderHandle handle;
                Sam2Status status = NativeMethods.sam2_encoder_new(path, ref native, out handle);
                return Sam2Error.CheckNew(status, handle);
            }
        }

        internal EncoderHandle Handle
        {
            get { return (EncoderHandle)OpenHandle; }
        }

        /// <summary>The model's fingerprint ("sam2fp1-…"), identifying the encoder file.</summary>
        public string Fingerprint
        {
            get
            {
                EncoderHandle handle = Handle;
                return Sam2Error.ReadString((byte[] buf, UIntPtr len, out UIntPtr needed) =>
                    NativeMethods.sam2_encoder_fingerprint(handle, buf, len, out needed));
            }
        }

        /// <summary>The precision the encoder runs in (<c>sam2_encoder_precision</c>): a variant is another model, whose embeddings the original's predictor refuses.</summary>
        public Precision Precision
        {
            get
            {
                uint value;
                Sam2Error.Check(NativeMethods.sam2_encoder_precision(Handle, out value));
                return (Precision)value;
            }
        }

        /// <summary>What the encoder effectively runs on (<c>sam2_encoder_device</c>); FellBack tells a silent CPU fallback.</summary>
        public Sam2DeviceInfo Device
        {
            get { return SessionDevice.Device(Handle, NativeMethods.sam2_encoder_device); }
        }

        /// <summary>The session's ONNX Runtime execution providers in priority order ("CPUExecutionProvider", …).</summary>
        public string[] ExecutionProviders
        {
            get { return SessionDevice.ExecutionProviders(Handle, NativeMethods.sam2_encoder_providers); }
        }

        /// <summary>Encodes tightly packed pixels (stride = width × bytes per pixel).</summary>
        public Sam2Embedding Encode(byte[] pixels, int width, int height, PixelFormat format)
        {
            return Encode(pixels, width, height, 0, format);
        }

        /// <summary>Encodes one image (<c>sam2_encode</c>).</summary>
        /// <param name="pixels"><paramref name="height"/> rows of <paramref name="width"/> pixels in <paramref name="format"/>.</param>
        /// <param name="width">Width in pixels.</param>
        /// <param name="height">Height in pixels.</param>
        /// <param name="stride">Bytes from one row to the next; 0 means tightly packed.</param>
        /// <param name="format">Pixel layout.</param>
        /// <returns>A new embedding, owned by the caller.</returns>
        /// <exception cref="ArgumentNullException"><paramref name="pixels"/> is null.</exception>
        /// <exception cref="ArgumentException">A size, stride or format the library refuses; ParamName is the native argument's name ("width", "stride", "pixels", "pixel_format").</exception>
        public Sam2Embedding Encode(byte[] pixels, int width, int height, int stride, PixelFormat format)
        {
            CheckPixels(pixels, width, height, stride);
            EmbeddingHandle result;
            Sam2Status status = NativeMethods.sam2_encode(Handle, pixels, (UIntPtr)pixels.Length, (uint)width, (uint)height,
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
            CheckSizes(width, height, stride);
            EmbeddingHandle result;
            Sam2Status status = NativeMethods.sam2_encode_ptr(Handle, pixels, (UIntPtr)(ulong)length, (uint)width, (uint)height,
                (UIntPtr)stride, (uint)format, out result);
            return new Sam2Embedding(Sam2Error.CheckNew(status, result));
        }

        /// <summary>The checks of a managed pixel buffer that come before the native ones.</summary>
        internal static void CheckPixels(byte[] pixels, int width, int height, int stride)
        {
            if (pixels == null)
                throw new ArgumentNullException("pixels");
            if (pixels.Length == 0)
                throw new ArgumentException("invalid argument `pixels`: the buffer is empty", "pixels");
            CheckSizes(width, height, stride);
        }

        internal static void CheckSizes(int width, int height, int stride)
        {
            if (width < 0)
                throw new ArgumentOutOfRangeException("width", width, "must not be negative");
            if (height < 0)
                throw new ArgumentOutOfRangeException("height", height, "must not be negative");
            if (stride < 0)
                throw new ArgumentOutOfRangeException("stride", stride, "must not be negative");
        }
    }
}
