using System;
using System.Threading;
using System.Threading.Tasks;

namespace Sam2
{
    /// <summary>How <see cref="Sam2Cache.Encode(Sam2Encoder, byte[], int, int, int, PixelFormat, out CacheSource)"/> found an embedding.</summary>
    public enum CacheSource
    {
        /// <summary>It was kept in the cache: no encode ran.</summary>
        Hit = 0,
        /// <summary>An encode of the same image was already queued or running.</summary>
        Joined = 1,
        /// <summary>The encoder ran.</summary>
        Miss = 2,
    }

    /// <summary>How urgent an encode request is.</summary>
    public enum EncodePriority
    {
        /// <summary>Pre-encoding the next images: the back of the bounded queue.</summary>
        Background = 0,
        /// <summary>An image the user opened: ahead of background work, interrupting it; never refused for a full queue.</summary>
        Foreground = 1,
    }

    /// <summary>Where an encode job is.</summary>
    public enum EncodeJobState
    {
        /// <summary>Waiting in the queue.</summary>
        Queued = 0,
        /// <summary>Being encoded.</summary>
        Running = 1,
        /// <summary>The embedding is ready.</summary>
        Done = 2,
        /// <summary>The encode failed; waiting throws its exception.</summary>
        Failed = 3,
        /// <summary>Cancelled before it finished.</summary>
        Cancelled = 4,
    }

    /// <summary>Options of <see cref="Sam2Cache"/>. A new instance holds the library's defaults.</summary>
    public sealed class Sam2CacheOptions
    {
        private long _hostBudgetBytes;
        private long _deviceBudgetBytes;
        private int _queueLimit;

        /// <summary>Creates options holding the native defaults (<c>sam2_cache_options_init</c>).</summary>
        public Sam2CacheOptions()
        {
            var defaults = NativeOptions.Defaults<NativeMethods.sam2_cache_options>(NativeMethods.sam2_cache_options_init);
            _hostBudgetBytes = (long)defaults.host_budget_bytes;
            _deviceBudgetBytes = (long)defaults.device_budget_bytes;
            _queueLimit = (int)defaults.queue_limit;
        }

        /// <summary>Bytes of embeddings in host memory the cache may keep (default 160 MiB, ten fp32 SAM2 embeddings); 0 keeps none.</summary>
        public long HostBudgetBytes
        {
            get { return _hostBudgetBytes; }
            set { _hostBudgetBytes = NotNegative(value); }
        }

        /// <summary>Bytes of embeddings in device memory (VRAM) the cache may keep (default 64 MiB); 0 keeps none.</summary>
        public long DeviceBudgetBytes
        {
            get { return _deviceBudgetBytes; }
            set { _deviceBudgetBytes = NotNegative(value); }
        }

        /// <summary>Background requests that may wait in the queue (default 8).</summary>
        public int QueueLimit
        {
            get { return _queueLimit; }
            set { _queueLimit = (int)NotNegative(value); }
        }

        private static long NotNegative(long value)
        {
            if (value < 0)
                throw new ArgumentOutOfRangeException("value", value, "must not be negative");
            return value;
        }

        internal NativeMethods.sam2_cache_options ToNative()
        {
            var native = NativeOptions.Defaults<NativeMethods.sam2_cache_options>(NativeMethods.sam2_cache_options_init);
            native.host_budget_bytes = (ulong)_hostBudgetBytes;
            native.device_budget_bytes = (ulong)_deviceBudgetBytes;
            native.queue_limit = (uint)_queueLimit;
            return native;
        }
    }

    /// <summary>Counters and occupancy of a <see cref="Sam2Cache"/>.</summary>
    public sealed class Sam2CacheStats
    {
        internal Sam2CacheStats(NativeMethods.sam2_cache_stats s)
        {
            Hits = (long)s.hits;
            Joins = (long)s.joins;
            Misses = (long)s.misses;
            Evictions = (long)s.evictions;
            Rejected = (long)s.rejected;
            Cancelled = (long)s.cancelled;
            Preempted = (long)s.preempted;
            Entries = (long)s.entries;
            HostBytes = (long)s.host_bytes;
            DeviceBytes = (long)s.device_bytes;
            Queued = (long)s.queued;
            Running = (int)s.running;
        }

        /// <summary>Requests served from a kept embedding.</summary>
        public long Hits { get; private set; }
        /// <summary>Requests served by an encode of the same image already queued or running.</summary>
        public long Joins { get; private set; }
        /// <summary>Requests that started an encode.</summary>
        public long Misses { get; private set; }
        /// <summary>Embeddings dropped to stay within a budget.</summary>
        public long Evictions { get; private set; }
        /// <summary>Embeddings larger than their whole budget: handed over, not kept.</summary>
        public long Rejected { get; private set; }
        /// <summary>Encodes cancelled before they finished.</summary>
        public long Cancelled { get; private set; }
        /// <summary>Background encodes interrupted so a foreground one runs first.</summary>
        public long Preempted { get; private set; }
        /// <summary>Embeddings kept now.</summary>
        public long Entries { get; private set; }
        /// <summary>Bytes of kept embeddings in host memory.</summary>
        public long HostBytes { get; private set; }
        /// <summary>Bytes of kept embeddings in device memory.</summary>
        public long DeviceBytes { get; private set; }
        /// <summary>Encodes waiting in the queue.</summary>
        public long Queued { get; private set; }
        /// <summary>Encodes running now (0 or 1).</summary>
        public int Running { get; private set; }
    }

    /// <summary>
    /// Keeps embeddings within byte budgets (host and device memory counted apart, least recently
    /// used dropped first) and encodes on a background thread: <see cref="Encode(Sam2Encoder, byte[], int, int, int, PixelFormat)"/>
    /// serves an image seen before without the encoder, <see cref="EncodeAsync"/> encodes without
    /// blocking and can be cancelled, <see cref="Prefetch"/> pre-encodes the next images.
    /// Thread-safe. One cache may serve several encoders; its budgets are shared. Disposing it
    /// (<c>sam2_cache_free</c>) cancels its queued and running encodes and drops the kept
    /// embeddings; handed-out embeddings and jobs stay valid.
    /// </summary>
    public sealed class Sam2Cache : Sam2NativeObject
    {
        /// <summary>Creates a cache and starts its encoder thread (<c>sam2_cache_new</c>).</summary>
        /// <param name="options">Null for the defaults.</param>
        public Sam2Cache(Sam2CacheOptions options = null) : base(Create(options))
        {
        }

        private static CacheHandle Create(Sam2CacheOptions options)
        {
            var native = (options ?? new Sam2CacheOptions()).ToNative();
            CacheHandle handle;
            Sam2Status status = NativeMethods.sam2_cache_new(ref native, out handle);
            return Sam2Error.CheckNew(status, handle);
        }

        internal CacheHandle Handle
        {
            get { return (CacheHandle)OpenHandle; }
        }

        /// <summary>The embedding of an image, blocking until it is there (<c>sam2_cache_encode</c>).</summary>
        public Sam2Embedding Encode(Sam2Encoder encoder, byte[] pixels, int width, int height, int stride, PixelFormat format)
        {
            CacheSource source;
            return Encode(encoder, pixels, width, height, stride, format, out source);
        }

        /// <summary>
        /// The embedding of an image: the kept one, the result of an encode of the same image
        /// under way, or a new encode that runs before any background work. Blocks until it is there.
        /// </summary>
        /// <param name="encoder">The encoder to use on a miss.</param>
        /// <param name="pixels"><paramref name="height"/> rows of <paramref name="width"/> pixels in <paramref name="format"/>.</param>
        /// <param name="width">Width in pixels.</param>
        /// <param name="height">Height in pixels.</param>
        /// <param name="stride">Bytes from one row to the next; 0 means tightly packed.</param>
        /// <param name="format">Pixel layout.</param>
        /// <param name="source">How the embedding was found.</param>
        /// <returns>A new embedding handle, owned by the caller.</returns>
        public Sam2Embedding Encode(Sam2Encoder encoder, byte[] pixels, int width, int height, int stride, PixelFormat format, out CacheSource source)
        {
            CheckImage(encoder, pixels, width, height, stride);
            EmbeddingHandle result;
            uint found;
            Sam2Status status = NativeMethods.sam2_cache_encode(Handle, encoder.Handle, pixels, (UIntPtr)pixels.Length,
                (uint)width, (uint)height, (UIntPtr)stride, (uint)format, out result, out found);
            var embedding = new Sam2Embedding(Sam2Error.CheckNew(status, result));
            source = (CacheSource)found;
            return embedding;
        }

        /// <summary>
        /// Requests the embedding of an image and returns a job at once (<c>sam2_cache_encode_async</c>).
        /// The pixels are hashed and preprocessed during the call, so the array may be reused afterwards.
        /// </summary>
        /// <exception cref="Sam2Exception">Status QueueFull: a background request found the queue full.</exception>
        public Sam2EncodeJob EncodeInBackground(Sam2Encoder encoder, byte[] pixels, int width, int height, int stride, PixelFormat format,
            EncodePriority priority)
        {
            CheckImage(encoder, pixels, width, height, stride);
            EncodeJobHandle job;
            Sam2Status status = NativeMethods.sam2_cache_encode_async(Handle, encoder.Handle, pixels, (UIntPtr)pixels.Length,
                (uint)width, (uint)height, (UIntPtr)stride, (uint)format, (uint)priority, out job);
            return new Sam2EncodeJob(Sam2Error.CheckNew(status, job));
        }

        /// <summary>Pre-encodes an image in the background (fire and forget: the result lands in the cache).</summary>
        /// <returns>False when the queue was full and the request was not taken.</returns>
        public bool Prefetch(Sam2Encoder encoder, byte[] pixels, int width, int height, int stride, PixelFormat format)
        {
            try
            {
                using (EncodeInBackground(encoder, pixels, width, height, stride, format, EncodePriority.Background))
                    return true;
            }
            catch (Sam2Exception e) when (e.Status == Sam2Status.QueueFull)
            {
                return false;
            }
        }

        /// <summary>
        /// The embedding of an image without blocking the calling thread: a foreground request by
        /// default (an image the user opened), which goes ahead of background work. Cancelling the
        /// token withdraws the request; the encode stops unless another request wants the image,
        /// and the task ends as cancelled.
        /// </summary>
        /// <exception cref="ArgumentException">A size, stride or format the library refuses (thrown at once).</exception>
        public Task<Sam2Embedding> EncodeAsync(Sam2Encoder encoder, byte[] pixels, int width, int height, int stride, PixelFormat format,
            EncodePriority priority = EncodePriority.Foreground, CancellationToken cancellationToken = default(CancellationToken))
        {
            if (cancellationToken.IsCancellationRequested)
                return Task.FromCanceled<Sam2Embedding>(cancellationToken);
            Sam2EncodeJob job;
            try
            {
                job = EncodeInBackground(encoder, pixels, width, height, stride, format, priority);
            }
            catch (Exception e) when (!(e is ArgumentException) && !(e is ObjectDisposedException))
            {
                return Task.FromException<Sam2Embedding>(e);
            }
            return job.WaitAsyncAndDispose(cancellationToken);
        }

        /// <summary>
        /// Keeps an embedding made elsewhere (loaded from a file, say) as the one of an image for
        /// <paramref name="encoder"/> (<c>sam2_cache_put</c>). It must come from the encoder's model,
        /// be of the image's size, and live where the encoder's embeddings do (the same allocator
        /// and device; <see cref="ArgumentException"/> otherwise).
        /// </summary>
        public void Put(Sam2Encoder encoder, byte[] pixels, int width, int height, int stride, PixelFormat format, Sam2Embedding embedding)
        {
            CheckImage(encoder, pixels, width, height, stride);
            if (embedding == null)
                throw new ArgumentNullException("embedding");
            Sam2Error.Check(NativeMethods.sam2_cache_put(Handle, encoder.Handle, pixels, (UIntPtr)pixels.Length,
                (uint)width, (uint)height, (UIntPtr)stride, (uint)format, embedding.Handle));
        }

        /// <summary>Drops every kept embedding (handed-out ones stay valid).</summary>
        public void Clear()
        {
            Sam2Error.Check(NativeMethods.sam2_cache_clear(Handle));
        }

        /// <summary>Cancels every background encode nobody waits for in <see cref="Encode(Sam2Encoder, byte[], int, int, int, PixelFormat)"/>; returns how many.</summary>
        public int CancelAll()
        {
            UIntPtr cancelled;
            Sam2Error.Check(NativeMethods.sam2_cache_cancel_all(Handle, out cancelled));
            return (int)cancelled.ToUInt64();
        }

        /// <summary>Counters and occupancy (<c>sam2_cache_get_stats</c>).</summary>
        public Sam2CacheStats Stats
        {
            get
            {
                var native = new NativeMethods.sam2_cache_stats();
                native.struct_size = (uint)System.Runtime.InteropServices.Marshal.SizeOf(typeof(NativeMethods.sam2_cache_stats));
                Sam2Error.Check(NativeMethods.sam2_cache_get_stats(Handle, ref native));
                return new Sam2CacheStats(native);
            }
        }

        private static void CheckImage(Sam2Encoder encoder, byte[] pixels, int width, int height, int stride)
        {
            if (encoder == null)
                throw new ArgumentNullException("encoder");
            Sam2Encoder.CheckPixels(pixels, width, height, stride);
        }
    }

    /// <summary>An encode requested by <see cref="Sam2Cache.EncodeInBackground"/>. Disposing it does not cancel the encode; <see cref="Cancel"/> does.</summary>
    public sealed class Sam2EncodeJob : Sam2NativeObject
    {
        internal Sam2EncodeJob(EncodeJobHandle handle) : base(handle)
        {
        }

        private EncodeJobHandle Handle
        {
            get { return (EncodeJobHandle)OpenHandle; }
        }

        /// <summary>Where the encode is, without waiting (<c>sam2_encode_job_state</c>).</summary>
        public EncodeJobState State
        {
            get
            {
                uint state;
                Sam2Error.Check(NativeMethods.sam2_encode_job_state(Handle, out state));
                return (EncodeJobState)state;
            }
        }

        /// <summary>Waits for the embedding as long as it takes.</summary>
        /// <exception cref="OperationCanceledException">The job was cancelled.</exception>
        public Sam2Embedding Wait()
        {
            return Wait(NativeMethods.SAM2_WAIT_FOREVER);
        }

        /// <summary>Waits for the embedding at most <paramref name="timeout"/> (<c>sam2_encode_job_wait</c>).</summary>
        /// <exception cref="TimeoutException">It was not ready in time; the encode goes on.</exception>
        /// <exception cref="OperationCanceledException">The job was cancelled.</exception>
        public Sam2Embedding Wait(TimeSpan timeout)
        {
            if (timeout < TimeSpan.Zero)
                throw new ArgumentOutOfRangeException("timeout", timeout, "must not be negative");
            double ms = Math.Ceiling(timeout.TotalMilliseconds);
            return Wait(ms >= NativeMethods.SAM2_WAIT_FOREVER ? NativeMethods.SAM2_WAIT_FOREVER - 1 : (uint)ms);
        }

        private Sam2Embedding Wait(uint timeoutMs)
        {
            EmbeddingHandle result;
            Sam2Status status = NativeMethods.sam2_encode_job_wait(Handle, timeoutMs, out result);
            return new Sam2Embedding(Sam2Error.CheckNew(status, result));
        }

        /// <summary>
        /// Withdraws the request (<c>sam2_encode_job_cancel</c>): the encode is dropped from the
        /// queue or stopped in flight unless another request wants the image. Idempotent.
        /// </summary>
        public void Cancel()
        {
            Sam2Error.Check(NativeMethods.sam2_encode_job_cancel(Handle));
        }

        /// <summary>
        /// Waits on a pool thread; cancelling the token cancels the job and ends the task as cancelled.
        /// </summary>
        public Task<Sam2Embedding> WaitAsync(CancellationToken cancellationToken = default(CancellationToken))
        {
            return WaitAsync(cancellationToken, false);
        }

        internal Task<Sam2Embedding> WaitAsyncAndDispose(CancellationToken cancellationToken)
        {
            return WaitAsync(cancellationToken, true);
        }

        private Task<Sam2Embedding> WaitAsync(CancellationToken cancellationToken, bool disposeWhenDone)
        {
            EncodeJobHandle handle = Handle;
            var completion = new TaskCompletionSource<Sam2Embedding>(TaskCreationOptions.RunContinuationsAsynchronously);
            CancellationTokenRegistration registration = cancellationToken.Register(() =>
            {
                try { Cancel(); }
                catch (ObjectDisposedException) { }
            });
            // The native wait blocks; a dedicated thread keeps it off the pool's worker threads.
            Task.Factory.StartNew(() =>
            {
                try
                {
                    EmbeddingHandle result;
                    Sam2Status status = NativeMethods.sam2_encode_job_wait(handle, NativeMethods.SAM2_WAIT_FOREVER, out result);
                    if (status == Sam2Status.Cancelled)
                    {
                        // By this token, or by someone else (CancelAll, the cache disposed).
                        if (result != null)
                            result.Dispose();
                        completion.TrySetCanceled(cancellationToken.IsCancellationRequested ? cancellationToken : CancellationToken.None);
                    }
                    else
                    {
                        completion.TrySetResult(new Sam2Embedding(Sam2Error.CheckNew(status, result)));
                    }
                }
                catch (Exception e)
                {
                    completion.TrySetException(e);
                }
                finally
                {
                    registration.Dispose();
                    if (disposeWhenDone)
                        Dispose();
                }
            }, CancellationToken.None, TaskCreationOptions.LongRunning, TaskScheduler.Default);
            return completion.Task;
        }
    }
}
