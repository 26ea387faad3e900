// One sealed SafeHandle per native handle type. The runtime releases each exactly once (Dispose
// or finalisation), never while a P/Invoke call that received it is still running, because the
// marshaller (or a HandleLease) holds a reference for the duration of the call.
using System;
using System.Runtime.InteropServices;
using Microsoft.Win32.SafeHandles;

namespace Sam2
{
    /// <summary>Owns a <c>sam2_encoder*</c>; released with <c>sam2_encoder_free</c>.</summary>
    internal sealed class EncoderHandle : SafeHandleZeroOrMinusOneIsInvalid
    {
        /// <summary>Used by the marshaller for out-params.</summary>
        public EncoderHandle() : base(true) { }

        protected override bool ReleaseHandle()
        {
            NativeMethods.sam2_encoder_free(handle);
            return true;
        }
    }

    /// <summary>Owns a <c>sam2_cache*</c>; released with <c>sam2_cache_free</c> (which cancels its work).</summary>
    internal sealed class CacheHandle : SafeHandleZeroOrMinusOneIsInvalid
    {
        /// <summary>Used by the marshaller for out-params.</summary>
        public CacheHandle() : base(true) { }

        protected override bool ReleaseHandle()
        {
            NativeMethods.sam2_cache_free(handle);
            return true;
        }
    }

    /// <summary>Owns a <c>sam2_encode_job*</c>; released with <c>sam2_encode_job_free</c> (which does not cancel the encode).</summary>
    internal sealed class EncodeJobHandle : SafeHandleZeroOrMinusOneIsInvalid
    {
        /// <summary>Used by the marshaller for out-params.</summary>
        public EncodeJobHandle() : base(true) { }

        protected override bool ReleaseHandle()
        {
            NativeMethods.sam2_encode_job_free(handle);
            return true;
        }
    }

    /// <summary>Owns a <c>sam2_embedding*</c>; released with <c>sam2_embedding_free</c>.</summary>
    internal sealed class EmbeddingHandle : SafeHandleZeroOrMinusOneIsInvalid
    {
        /// <summary>Used by the marshaller for out-params.</summary>
        public EmbeddingHandle() : base(true) { }

        protected override bool ReleaseHandle()
        {
            NativeMethods.sam2_embedding_free(handle);
            return true;
        }
    }

    /// <summary>Owns a <c>sam2_predictor*</c>; released with <c>sam2_predictor_free</c>.</summary>
    internal sealed class PredictorHandle : SafeHandleZeroOrMinusOneIsInvalid
    {
        /// <summary>Used by the marshaller for out-params.</summary>
        public PredictorHandle() : base(true) { }

        protected override bool ReleaseHandle()
        {
            NativeMethods.sam2_predictor_free(handle);
            return true;
        }
    }

    /// <summary>Owns a <c>sam2_masks*</c>; released with <c>sam2_masks_free</c>.</summary>
    internal sealed class MasksHandle : SafeHandleZeroOrMinusOneIsInvalid
    {
        /// <summary>Used by the marshaller for out-params.</summary>
        public MasksHandle() : base(true) { }

        protected override bool ReleaseHandle()
        {
            NativeMethods.sam2_masks_free(handle);
            return true;
        }
    }

    /// <summary>
    /// Keeps a SafeHandle from being released while its raw pointer, or memory it owns, is in use
    /// (an optional handle passed as IntPtr; a string or buffer the handle owns being copied).
    /// Throws ObjectDisposedException when the handle is already closed. A null handle gives an
    /// empty lease whose Pointer is IntPtr.Zero.
    /// </summary>
    internal struct HandleLease : IDisposable
    {
        private readonly SafeHandle _handle;
        private bool _added;

        internal HandleLease(SafeHandle handle, string objectName)
        {
            _handle = handle;
            _added = false;
            if (handle == null)
                return;
            if (handle.IsClosed)
                throw new ObjectDisposedException(objectName);
            handle.DangerousAddRef(ref _added);
        }

        internal IntPtr Pointer
        {
            get { return _handle == null ? IntPtr.Zero : _handle.DangerousGetHandle(); }
        }

        public void Dispose()
        {
            if (_added)
            {
                _added = false;
                _handle.DangerousRelease();
            }
        }
    }
}
