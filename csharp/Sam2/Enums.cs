namespace Sam2
{
    /// <summary>Layout of the pixels given to <see cref="Sam2Encoder.Encode(byte[], int, int, int, PixelFormat)"/> (SAM2_PIXEL_*).</summary>
    public enum PixelFormat : uint
    {
        /// <summary>3 bytes per pixel, R G B.</summary>
        Rgb = NativeMethods.SAM2_PIXEL_RGB,
        /// <summary>3 bytes per pixel, B G R (Windows bitmaps, OpenCV).</summary>
        Bgr = NativeMethods.SAM2_PIXEL_BGR,
        /// <summary>4 bytes per pixel, R G B A (alpha ignored).</summary>
        Rgba = NativeMethods.SAM2_PIXEL_RGBA,
        /// <summary>4 bytes per pixel, B G R A (alpha ignored).</summary>
        Bgra = NativeMethods.SAM2_PIXEL_BGRA,
        /// <summary>1 byte per pixel, gray.</summary>
        Gray = NativeMethods.SAM2_PIXEL_GRAY,
    }

    /// <summary>Where the encoder puts the embedding (SAM2_OUTPUT_*).</summary>
    public enum OutputTarget : uint
    {
        /// <summary>Keep the embedding on the execution device (default; on a CPU session that is host memory).</summary>
        Device = NativeMethods.SAM2_OUTPUT_DEVICE,
        /// <summary>Place the embedding in host memory, so it can be saved.</summary>
        Host = NativeMethods.SAM2_OUTPUT_HOST,
    }

    /// <summary>The precision an encoder runs in (SAM2_PRECISION_*): as exported, or a precision
    /// variant (sam2-variant, docs/models.md).</summary>
    public enum Precision : uint
    {
        /// <summary>As exported: float32 weights and arithmetic.</summary>
        Fp32 = NativeMethods.SAM2_PRECISION_FP32,
        /// <summary>An int8 variant (int8 weights per channel), for CPUs.</summary>
        Int8 = NativeMethods.SAM2_PRECISION_INT8,
        /// <summary>A float16 variant (inputs and outputs float32), for GPUs.</summary>
        Fp16 = NativeMethods.SAM2_PRECISION_FP16,
    }

    /// <summary>Where <see cref="Sam2Embedding.Load"/> puts a loaded embedding (SAM2_PLACE_*).</summary>
    public enum Placement : uint
    {
        /// <summary>Host memory.</summary>
        Host = NativeMethods.SAM2_PLACE_HOST,
        /// <summary>The predictor's execution device (host memory when it runs on the CPU); needs a predictor.</summary>
        Device = NativeMethods.SAM2_PLACE_DEVICE,
    }

    /// <summary>Label of a click (SAM2_POINT_*).</summary>
    public enum PointLabel
    {
        /// <summary>Exclude what is under the point.</summary>
        Negative = NativeMethods.SAM2_POINT_NEGATIVE,
        /// <summary>Include what is under the point.</summary>
        Positive = NativeMethods.SAM2_POINT_POSITIVE,
    }

    /// <summary>Severity of a log message (SAM2_LOG_*).</summary>
    public enum Sam2LogLevel : uint
    {
        /// <summary>Detail useful when debugging.</summary>
        Debug = NativeMethods.SAM2_LOG_DEBUG,
        /// <summary>Information (which ONNX Runtime was loaded, say).</summary>
        Info = NativeMethods.SAM2_LOG_INFO,
        /// <summary>Something the host should know about (a device fallback, say).</summary>
        Warning = NativeMethods.SAM2_LOG_WARNING,
        /// <summary>An error.</summary>
        Error = NativeMethods.SAM2_LOG_ERROR,
    }

    /// <summary>How a concept's instances are thinned (SAM2_NMS_*), within each concept.</summary>
    public enum Suppression : uint
    {
        /// <summary>None: every instance above the threshold is kept (default, as SAM 3's own processor).</summary>
        None = NativeMethods.SAM2_NMS_NONE,
        /// <summary>An instance whose box overlaps a better one's by more than <see cref="Sam2ConceptSegmentOptions.NmsIou"/> goes.</summary>
        Boxes = NativeMethods.SAM2_NMS_BOXES,
        /// <summary>An instance whose mask overlaps a better one's by more than <see cref="Sam2ConceptSegmentOptions.NmsIou"/> goes (needs masks).</summary>
        Masks = NativeMethods.SAM2_NMS_MASKS,
    }
}
