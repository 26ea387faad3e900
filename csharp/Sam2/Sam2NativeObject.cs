using System;
using System.Runtime.InteropServices;
using System.Threading;

namespace Sam2
{
    /// <summary>
    /// A managed object that owns one native sam2 object (an encoder, a predictor, an embedding,
    /// masks, a segment-everything generator, a cache, an encode job, a tracker, a SAM 3 concept
    /// model or its result). Disposing it twice is fine; any use after <see cref="Dispose"/>
    /// throws <see cref="ObjectDisposedException"/>, even while other threads are still inside a
    /// call on it (the native object is freed when the last of those calls returns). Only this
    /// library derives from it.
    /// </summary>
    public abstract class Sam2NativeObject : IDisposable
    {
        private readonly SafeHandle _handle;

        // Set by Dispose. The SafeHandle alone is not enough to refuse later calls: while another
        // thread is inside a native call, Dispose only drops the owner's reference, the handle is
        // not closed yet, and new calls would still be let through.
        private int _disposed;

        /// <summary>Takes ownership of <paramref name="handle"/>, a valid handle.</summary>
        internal Sam2NativeObject(SafeHandle handle)
        {
            _handle = handle;
        }

        /// <summary>The owned handle; throws ObjectDisposedException once Dispose has been called.
        /// Each subclass exposes it with its own handle type.</summary>
        internal SafeHandle OpenHandle
        {
            get
            {
                ThrowIfDisposed();
                return _handle;
            }
        }

        internal void ThrowIfDisposed()
        {
            if (Volatile.Read(ref _disposed) != 0 || _handle.IsClosed)
                throw new ObjectDisposedException(GetType().Name);
        }

        /// <summary>
        /// Releases the native object (its <c>sam2_…_free</c>). What it made (embeddings, masks)
        /// and what it was made from stay valid. Safe to call twice.
        /// </summary>
        public void Dispose()
        {
            Interlocked.Exchange(ref _disposed, 1);
            _handle.Dispose();
        }
    }
}
