using System;
using System.Runtime.InteropServices;

namespace Sam2.Tests
{
    /// <summary>
    /// Lets a machine without a GPU exercise the device-residency paths. It calls the library's
    /// test hook (tests/c/sam2_test_support.h), which only a library built with the
    /// <c>test-support</c> cargo feature has; the Sam2 assembly itself has no test hooks.
    /// </summary>
    internal static class Sam2TestSupport
    {
        /// <summary>
        /// Makes a stand-in for a device-resident embedding (<c>sam2_test_embedding_simulate_device</c>):
        /// it shares <paramref name="hostEmbedding"/>'s bytes but is labelled as
        /// <paramref name="allocatorName"/> memory, so it is not serializable, Save refuses it, and
        /// AllocatorName names the allocator. It is never run: Predict and ToHost refuse it.
        /// It is a SIMULATION; no device memory is involved.
        /// </summary>
        /// <param name="hostEmbedding">A host embedding (float32).</param>
        /// <param name="allocatorName">"Cuda", "DML", …</param>
        /// <param name="deviceId">The device id to report.</param>
        [DllImport(NativeMethods.Library, CallingConvention = CallingConvention.Cdecl)]
        private static extern Sam2Status sam2_test_embedding_simulate_device(EmbeddingHandle host_embedding, byte[] allocator_name, int device_id, out EmbeddingHandle @out);

        public static Sam2Embedding SimulateDeviceEmbedding(Sam2Embedding hostEmbedding, string allocatorName, int deviceId = 0)
        {
            if (hostEmbedding == null)
                throw new ArgumentNullException("hostEmbedding");
            if (allocatorName == null)
                throw new ArgumentNullException("allocatorName");
            EmbeddingHandle host = hostEmbedding.Handle;
            EmbeddingHandle result;
            Sam2Status status = sam2_test_embedding_simulate_device(host, Utf8.ToNative(allocatorName, "allocatorName"),
                deviceId, out result);
            return new Sam2Embedding(Sam2Error.CheckNew(status, result, host));
        }

        [DllImport(NativeMethods.Library, CallingConvention = CallingConvention.Cdecl)]
        private static extern Sam2Status sam2_test_masks_from_bytes(byte[] mask, uint width, uint height, out MasksHandle @out);

        /// <summary>
        /// A result holding one given mask (<c>sam2_test_masks_from_bytes</c>), to check the mask
        /// formats on shapes no model draws (holes, islands).
        /// </summary>
        public static Sam2Masks MasksFromBytes(byte[] mask, int width, int height)
        {
            MasksHandle result;
            Sam2Status status = sam2_test_masks_from_bytes(mask, (uint)width, (uint)height, out result);
            return new Sam2Masks(Sam2Error.CheckNew(status, result));
        }

        [DllImport(NativeMethods.Library, CallingConvention = CallingConvention.Cdecl)]
        private static extern Sam2Status sam2_test_panic(byte[] message, int on_worker);

        /// <summary>
        /// Panics inside the native library (<c>sam2_test_panic</c>), on the calling thread or on a
        /// worker of its thread pool: the panic must come back as a Sam2Exception with its message.
        /// </summary>
        public static void Panic(string message, bool onWorker)
        {
            Sam2Error.Check(sam2_test_panic(Utf8.ToNative(message, "message"), onWorker ? 1 : 0));
        }
    }
}
