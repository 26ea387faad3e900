using System;

namespace Sam2
{
    /// <summary>
    /// A failure reported by the native library, with its <see cref="Status"/> and the native
    /// message (<c>sam2_last_error_message</c>). Argument errors are reported as
    /// <see cref="ArgumentException"/>/<see cref="ArgumentNullException"/> instead, and a refused
    /// save of a device embedding as <see cref="EmbeddingNotSerializableException"/>.
    /// </summary>
    public class Sam2Exception : Exception
    {
        /// <summary>Creates an exception for a native status and message.</summary>
        public Sam2Exception(Sam2Status status, string message) : base(message)
        {
            Status = status;
        }

        /// <summary>Creates an exception for a native status and message, with an inner exception.</summary>
        public Sam2Exception(Sam2Status status, string message, Exception innerException) : base(message, innerException)
        {
            Status = status;
        }

        /// <summary>The native status code.</summary>
        public Sam2Status Status { get; private set; }
    }

    /// <summary>
    /// SAM2_ERR_ENVIRONMENT_CONFIGURATION: the execution environment cannot provide what was asked
    /// (a GPU provider in FAIL mode, a second ONNX Runtime library, a device copy without its
    /// provider). The message names what was requested and what is available.
    /// </summary>
    public class Sam2EnvironmentConfigurationException : Sam2Exception
    {
        /// <summary>Creates the exception with the native message.</summary>
        public Sam2EnvironmentConfigurationException(string message)
            : base(Sam2Status.EnvironmentConfiguration, message) { }
    }

    /// <summary>
    /// SAM2_ERR_EMBEDDING_NOT_SERIALIZABLE: the embedding lives in device memory and cannot be
    /// written to disk. Nothing was written and the embedding stays usable; copy it with
    /// <see cref="Sam2Embedding.ToHost"/> first, or encode with <see cref="OutputTarget.Host"/>.
    /// </summary>
    public class EmbeddingNotSerializableException : InvalidOperationException
    {
        /// <summary>Creates the exception for the allocator that holds the embedding.</summary>
        public EmbeddingNotSerializableException(string allocatorName, string message) : base(message)
        {
            AllocatorName = allocatorName;
        }

        /// <summary>The ONNX Runtime allocator holding the embedding ("Cuda", "DML", …).</summary>
        public string AllocatorName { get; private set; }

        /// <summary>Always <see cref="Sam2Status.EmbeddingNotSerializable"/>.</summary>
        public Sam2Status Status
        {
            get { return Sam2Status.EmbeddingNotSerializable; }
        }
    }
}
