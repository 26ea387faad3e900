namespace Sam2
{
    /// <summary>
    /// Mirrors <c>sam2_status</c>: the result of every fallible native function. The values are
    /// the header's and never change.
    /// </summary>
    public enum Sam2Status : uint
    {
        /// <summary>SAM2_OK: success.</summary>
        Ok = 0,
        /// <summary>SAM2_ERR_NULL_ARGUMENT: a required pointer argument was NULL.</summary>
        NullArgument = 1,
        /// <summary>SAM2_ERR_INVALID_ARGUMENT: an argument was out of range, malformed or inconsistent.</summary>
        InvalidArgument = 2,
        /// <summary>SAM2_ERR_BUFFER_TOO_SMALL: a caller buffer is too small.</summary>
        BufferTooSmall = 3,
        /// <summary>SAM2_ERR_RUNTIME_NOT_FOUND: no usable ONNX Runtime library could be loaded.</summary>
        RuntimeNotFound = 4,
        /// <summary>SAM2_ERR_MODEL: a model file is unreadable or is not a recognised SAM2 export.</summary>
        Model = 5,
        /// <summary>SAM2_ERR_IO: the operating system failed a file operation.</summary>
        Io = 6,
        /// <summary>SAM2_ERR_EMBEDDING_NOT_SERIALIZABLE: the embedding is in device memory and cannot be written.</summary>
        EmbeddingNotSerializable = 7,
        /// <summary>SAM2_ERR_EMBEDDING_FORMAT: an embedding file is truncated, corrupted, foreign or unsupported.</summary>
        EmbeddingFormat = 8,
        /// <summary>SAM2_ERR_MODEL_MISMATCH: an embedding (or file) was made by a different model.</summary>
        ModelMismatch = 9,
        /// <summary>SAM2_ERR_ENVIRONMENT_CONFIGURATION: the environment cannot provide what was requested.</summary>
        EnvironmentConfiguration = 10,
        /// <summary>SAM2_ERR_ONNXRUNTIME: ONNX Runtime reported an error.</summary>
        OnnxRuntime = 11,
        /// <summary>SAM2_ERR_PANIC: an internal error (a caught panic); the library stays usable.</summary>
        Panic = 12,
        /// <summary>SAM2_ERR_TIMEOUT: a wait ended before the work did; the work goes on.</summary>
        Timeout = 13,
        /// <summary>SAM2_ERR_CANCELLED: the work was cancelled before it finished.</summary>
        Cancelled = 14,
        /// <summary>SAM2_ERR_QUEUE_FULL: the cache's background queue is full.</summary>
        QueueFull = 15,
        /// <summary>SAM2_ERR_OUT_OF_MEMORY: memory for a result could not be allocated; nothing changed.</summary>
        OutOfMemory = 16,
    }
}
