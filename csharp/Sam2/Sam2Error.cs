using System;
using System.Runtime.InteropServices;

namespace Sam2
{
    /// <summary>
    /// The one place that turns a native status into an exception (as ONNX Runtime's
    /// NativeApiStatus.VerifySuccess and LibGit2Sharp's Ensure do). The message is read from
    /// <c>sam2_last_error_message</c>, which is per thread: call <see cref="Check"/> right after
    /// the failing call, on the same thread, before any other sam2 call.
    /// </summary>
    internal static class Sam2Error
    {
        /// <summary>Throws the exception for <paramref name="status"/> unless it is Ok.</summary>
        /// <param name="status">What the native call returned.</param>
        /// <param name="embedding">The embedding the call was about, if any: a refused save
        /// names its allocator (<c>sam2_embedding_allocator_name</c>).</param>
        internal static void Check(Sam2Status status, EmbeddingHandle embedding = null)
        {
            if (status != Sam2Status.Ok)
                throw Create(status, embedding);
        }

        /// <summary>
        /// Like <see cref="Check"/> for a call that returned a new handle: on failure the
        /// (invalid) handle the marshaller made is disposed after the message has been read.
        /// </summary>
        internal static T CheckNew<T>(Sam2Status status, T created, EmbeddingHandle embedding = null) where T : SafeHandle
        {
            if (status == Sam2Status.Ok)
            {
                if (created == null || created.IsInvalid)
                    throw new Sam2Exception(Sam2Status.Panic, "the native library reported success but returned no handle");
                return created;
            }
            Exception error = Create(status, embedding);
            if (created != null)
                created.Dispose();
            throw error;
        }

        internal static Exception Create(Sam2Status status, EmbeddingHandle embedding)
        {
            // First, before anything else can touch the thread's last error.
            string message = LastErrorMessage();
            if (string.IsNullOrEmpty(message))
                message = Sam2Runtime.DescribeStatus(status);
            switch (status)
            {
                case Sam2Status.EmbeddingNotSerializable:
                    return new EmbeddingNotSerializableException(AllocatorNameOf(embedding), message);
                case Sam2Status.NullArgument:
                    return new ArgumentNullException(ArgumentName(message), message);
                case Sam2Status.InvalidArgument:
                    return new ArgumentException(message, ArgumentName(message));
                case Sam2Status.EnvironmentConfiguration:
                    return new Sam2EnvironmentConfigurationException(message);
                case Sam2Status.Timeout:
                    return new TimeoutException(message);
                case Sam2Status.Cancelled:
                    return new OperationCanceledException(message);
                case Sam2Status.OutOfMemory:
                    return new InsufficientMemoryException(message);
                default:
                    return new Sam2Exception(status, message);
            }
        }

        /// <summary>The calling thread's last native error message ("" when none was recorded).</summary>
        internal static string LastErrorMessage()
        {
            var buffer = new byte[512];
            for (int attempt = 0; attempt < 4; attempt++)
            {
                UIntPtr needed;
                Sam2Status status = NativeMethods.sam2_last_error_message(buffer, (UIntPtr)buffer.Length, out needed);
                if (status == Sam2Status.Ok)
                    return Utf8.FromBuffer(buffer, Math.Max(0, (int)needed.ToUInt64() - 1));
                if (status != Sam2Status.BufferTooSmall || needed.ToUInt64() <= (ulong)buffer.Length || needed.ToUInt64() > int.MaxValue)
                    break;
                buffer = new byte[(int)needed.ToUInt64()];
            }
            return string.Empty;
        }

        /// <summary>
        /// The argument a native message names: "invalid argument `NAME`: …" and
        /// "argument `NAME` must not be NULL" both quote it in backticks. Null when absent.
        /// </summary>
        internal static string ArgumentName(string message)
        {
            if (message == null)
                return null;
            int start = message.IndexOf('`');
            if (start < 0)
                return null;
            int end = message.IndexOf('`', start + 1);
            if (end <= start + 1)
                return null;
            return message.Substring(start + 1, end - start - 1);
        }

        private static string AllocatorNameOf(EmbeddingHandle embedding)
        {
            if (embedding == null || embedding.IsClosed)
                return null;
            using (new HandleLease(embedding, "Sam2Embedding"))
                return Utf8.FromNative(NativeMethods.sam2_embedding_allocator_name(embedding));
        }

        internal delegate Sam2Status BufferCall(byte[] buffer, UIntPtr length, out UIntPtr needed);

        /// <summary>
        /// Reads a string through the header's <c>(buf, buf_len, needed)</c> convention. The first
        /// buffer is large enough for the strings the library returns today, so the BUFFER_TOO_SMALL
        /// path (which overwrites the thread's last error) is only a fallback.
        /// </summary>
        internal static string ReadString(BufferCall call, EmbeddingHandle embedding = null)
        {
            var buffer = new byte[128];
            for (int attempt = 0; ; attempt++)
            {
                UIntPtr needed;
                Sam2Status status = call(buffer, (UIntPtr)buffer.Length, out needed);
                ulong size = needed.ToUInt64();
                if (status == Sam2Status.Ok)
                {
                    int length = (int)Math.Min(size, (ulong)buffer.Length);
                    return Utf8.FromBuffer(buffer, length > 0 ? length - 1 : 0);
                }
                if (status == Sam2Status.BufferTooSmall && attempt < 3 && size > (ulong)buffer.Length && size <= int.MaxValue)
                {
                    buffer = new byte[(int)size];
                    continue;
                }
                Check(status, embedding);
            }
        }
    }
}
