//! `sam2_cache` and `sam2_encode_job`: embeddings kept within byte budgets, and encodes run in
//! the background, waited for with a timeout, polled, or cancelled.

use std::sync::Arc;
use std::time::Duration;

use super::c_enum::c_enum;
use super::embedding::sam2_embedding;
use super::encoder::{image_arg, sam2_encoder};
use super::{arg_out, guard, handle_ref, impl_options, read_options, sam2_status, Handle};
use sam2::cache::{CacheOptions, EmbeddingCache, Job, JobState, Priority, Source};
use sam2::Encoder;
use sam2::Error;
use sam2::ImageView;

/// `sam2_cache_encode` found the embedding kept in the cache.
pub const SAM2_CACHE_HIT: u32 = 0;
/// `sam2_cache_encode` waited for an encode of the same image already queued or running.
pub const SAM2_CACHE_JOINED: u32 = 1;
/// `sam2_cache_encode` ran the encoder.
pub const SAM2_CACHE_MISS: u32 = 2;

c_enum! {
    /// `SAM2_CACHE_*` ↔ [`Source`].
    pub(crate) CacheSourceCodes: u32 => Source {
        SAM2_CACHE_HIT => Source::Cache,
        SAM2_CACHE_JOINED => Source::Joined,
        SAM2_CACHE_MISS => Source::Encoded,
    }
}

/// `sam2_cache_encode_async` priority: pre-encoding (the back of the bounded queue).
pub const SAM2_PRIORITY_BACKGROUND: u32 = 0;
/// `sam2_cache_encode_async` priority: an image the user opened (ahead of background requests,
/// interrupting a background encode in flight, never refused for a full queue).
pub const SAM2_PRIORITY_FOREGROUND: u32 = 1;

c_enum! {
    /// `SAM2_PRIORITY_*` ↔ [`Priority`].
    pub(crate) PriorityCodes: u32 => Priority {
        SAM2_PRIORITY_BACKGROUND => Priority::Background,
        SAM2_PRIORITY_FOREGROUND => Priority::Foreground,
    }
}

/// Job state: waiting in the cache's queue.
pub const SAM2_JOB_QUEUED: u32 = 0;
/// Job state: being encoded.
pub const SAM2_JOB_RUNNING: u32 = 1;
/// Job state: the embedding is ready (`sam2_encode_job_wait` returns it at once).
pub const SAM2_JOB_DONE: u32 = 2;
/// Job state: the encode failed (`sam2_encode_job_wait` returns its status and message).
pub const SAM2_JOB_FAILED: u32 = 3;
/// Job state: cancelled before it finished.
pub const SAM2_JOB_CANCELLED: u32 = 4;

c_enum! {
    /// `SAM2_JOB_*` ↔ [`JobState`].
    pub(crate) JobStateCodes: u32 => JobState {
        SAM2_JOB_QUEUED => JobState::Queued,
        SAM2_JOB_RUNNING => JobState::Running,
        SAM2_JOB_DONE => JobState::Done,
        SAM2_JOB_FAILED => JobState::Failed,
        SAM2_JOB_CANCELLED => JobState::Cancelled,
    }
}

/// `timeout_ms` of `sam2_encode_job_wait` that waits as long as the encode takes.
pub const SAM2_WAIT_FOREVER: u32 = u32::MAX;

/// An embedding cache with a background encoder thread. Opaque; create with `sam2_cache_new`,
/// release with `sam2_cache_free`. Thread-safe: every function but `sam2_cache_free` may be
/// called from several threads at once. One cache may serve several encoders (and models); its
/// budgets are shared by all of them.
pub struct sam2_cache {
    _opaque: [u8; 0],
}
impl Handle for sam2_cache {
    type Inner = EmbeddingCache;
}

/// An encode requested by `sam2_cache_encode_async`. Opaque; release with
/// `sam2_encode_job_free` (which does not cancel the encode). Thread-safe: several threads may
/// wait for it, ask its state and cancel it at once.
pub struct sam2_encode_job {
    _opaque: [u8; 0],
}
impl Handle for sam2_encode_job {
    type Inner = Job;
}

/// Options of `sam2_cache_new`. Initialise with `sam2_cache_options_init`, then change fields.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct sam2_cache_options {
    /// `sizeof(sam2_cache_options)`; lets the struct grow without breaking older callers.
    pub struct_size: u32,
    /// Background requests that may wait in the queue (the one being encoded is not counted);
    /// beyond it `sam2_cache_encode_async` gives `SAM2_ERR_QUEUE_FULL`. Default 8; at most 65536.
    pub queue_limit: u32,
    /// Bytes of embeddings in host memory the cache may keep; 0 keeps none. Default 160 MiB
    /// (ten fp32 SAM2 embeddings).
    pub host_budget_bytes: u64,
    /// Bytes of embeddings in device memory (VRAM) the cache may keep; 0 keeps none. Default
    /// 64 MiB (four fp32 SAM2 embeddings).
    pub device_budget_bytes: u64,
}

// Earlier published versions of `sam2_cache_options`: none yet.
impl_options!(sam2_cache_options, earlier_sizes: []);

impl Default for sam2_cache_options {
    fn default() -> Self {
        let defaults = CacheOptions::default();
        sam2_cache_options {
            struct_size: std::mem::size_of::<Self>() as u32,
            queue_limit: defaults.queue_limit as u32,
            host_budget_bytes: defaults.host_budget as u64,
            device_budget_bytes: defaults.device_budget as u64,
        }
    }
}

/// Counters and occupancy of a cache, written by `sam2_cache_get_stats`.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
pub struct sam2_cache_stats {
    /// Set to `sizeof(sam2_cache_stats)` before calling `sam2_cache_get_stats`.
    pub struct_size: u32,
    /// Encodes running now (0 or 1).
    pub running: u32,
    /// Requests served from a kept embedding.
    pub hits: u64,
    /// Requests served by an encode of the same image already queued or running.
    pub joins: u64,
    /// Requests that started an encode.
    pub misses: u64,
    /// Embeddings dropped to stay within a budget.
    pub evictions: u64,
    /// Embeddings larger than their whole budget: handed over, not kept.
    pub rejected: u64,
    /// Encodes cancelled before they finished.
    pub cancelled: u64,
    /// Background encodes interrupted so a waited-for encode runs first (each runs again later).
    pub preempted: u64,
    /// Embeddings kept now.
    pub entries: u64,
    /// Bytes of kept embeddings in host memory.
    pub host_bytes: u64,
    /// Bytes of kept embeddings in device memory.
    pub device_bytes: u64,
    /// Encodes waiting in the queue.
    pub queued: u64,
}

/// The pixel arguments of the encode functions: `(pixels, pixels_len, width, height, stride,
/// pixel_format)`.
type PixelArgs = (*const u8, usize, u32, u32, usize, u32);

/// The arguments every request to a cache starts with, checked.
fn request<'a>(
    cache: *const sam2_cache,
    encoder: *const sam2_encoder,
    (pixels, pixels_len, width, height, stride, pixel_format): PixelArgs,
) -> Result<(&'a EmbeddingCache, &'a Arc<Encoder>, ImageView<'a>), Error> {
    let cache = handle_ref(cache, "cache")?;
    let encoder = handle_ref(encoder, "encoder")?;
    let image = image_arg(pixels, pixels_len, width, height, stride, pixel_format)?;
    Ok((cache, encoder, image))
}

/// Fills `options` with the defaults and sets its `struct_size` (pass `sizeof(sam2_cache_options)`).
#[no_mangle]
pub extern "C" fn sam2_cache_options_init(
    options: *mut sam2_cache_options,
    struct_size: usize,
) -> sam2_status {
    super::init_options(options, struct_size)
}

/// Creates a cache and starts its encoder thread.
///
/// `options`: NULL for the defaults. On success `*out` receives a new cache. Errors:
/// `SAM2_ERR_INVALID_ARGUMENT`, `SAM2_ERR_IO` (the thread could not be started).
///
/// The caller owns `*out` and frees it with `sam2_cache_free`. Out-parameters are untouched on
/// failure.
#[no_mangle]
pub extern "C" fn sam2_cache_new(
    options: *const sam2_cache_options,
    out: *mut *mut sam2_cache,
) -> sam2_status {
    guard(|| {
        let out = arg_out(out, "out")?;
        let options = read_options(options, "options")?;
        let cache = EmbeddingCache::new(CacheOptions {
            host_budget: usize::try_from(options.host_budget_bytes).unwrap_or(usize::MAX),
            device_budget: usize::try_from(options.device_budget_bytes).unwrap_or(usize::MAX),
            queue_limit: options.queue_limit as usize,
        })
        .map_err(super::option_names)?;
        out.set(super::publish::<sam2_cache>(cache));
        Ok(())
    })
}

/// Releases a cache: cancels its queued encodes, terminates the one in flight, drops the kept
/// embeddings and joins its thread (returning once ONNX Runtime honours the termination, between
/// two nodes of the model). Embeddings handed out stay valid; jobs stay valid and report
/// `SAM2_JOB_CANCELLED` unless they had finished. NULL is a no-op. Do not free it twice, nor while
/// it is in use.
#[no_mangle]
pub extern "C" fn sam2_cache_free(cache: *mut sam2_cache) {
    super::free_handle(cache, "cache");
}

/// The embedding of an image: the kept one (no encode), the result of an encode of the same image
/// already queued or running, or a new encode, which runs before any queued background work and
/// interrupts a background encode in flight (that one is encoded again afterwards). Blocks until
/// the embedding is there.
///
/// Pixel arguments as in `sam2_encode` (read during the call only). On success `*out` receives a
/// new embedding handle, and `*out_source` (if not NULL) `SAM2_CACHE_HIT`, `SAM2_CACHE_JOINED` or
/// `SAM2_CACHE_MISS`. The embedding is kept when it fits its budget (host or device memory),
/// dropping the least recently used ones. Errors: those of `sam2_encode`, and `SAM2_ERR_CANCELLED`
/// when the cache is being freed.
///
/// The caller owns `*out` and frees it with `sam2_embedding_free`. Out-parameters are untouched on
/// failure.
#[no_mangle]
pub extern "C" fn sam2_cache_encode(
    cache: *const sam2_cache,
    encoder: *const sam2_encoder,
    pixels: *const u8,
    pixels_len: usize,
    width: u32,
    height: u32,
    stride: usize,
    pixel_format: u32,
    out: *mut *mut sam2_embedding,
    out_source: *mut u32,
) -> sam2_status {
    guard(|| {
        let (cache, encoder, image) = request(
            cache,
            encoder,
            (pixels, pixels_len, width, height, stride, pixel_format),
        )?;
        let out = arg_out(out, "out")?;
        let (embedding, source) = cache.encode(encoder, &image)?;
        if !out_source.is_null() {
            // SAFETY: checked non-NULL; the caller promises it is writable.
            unsafe { *out_source = CacheSourceCodes::code(source) };
        }
        out.set(super::publish::<sam2_embedding>(embedding));
        Ok(())
    })
}

/// Requests the embedding of an image and returns at once with a job that hands it over: the
/// pixels are hashed and preprocessed during the call, so the buffer may be released afterwards.
/// A kept embedding gives a job that is already done; a request for an image already queued or
/// running joins that encode.
///
/// `priority`: `SAM2_PRIORITY_BACKGROUND` (pre-encoding the next images of a folder: the back of
/// the queue, `SAM2_ERR_QUEUE_FULL` when it holds `queue_limit` requests) or
/// `SAM2_PRIORITY_FOREGROUND` (an image the user opened, waited for without blocking a UI
/// thread: ahead of background requests, interrupting a background encode in flight, which runs
/// again afterwards; never refused for a full queue).
///
/// On success `*out` receives a new job; freeing it does not cancel the encode, whose result still
/// lands in the cache. Errors: those of `sam2_encode` about the arguments, `SAM2_ERR_QUEUE_FULL`,
/// `SAM2_ERR_CANCELLED` when the cache is being freed. Errors of the encode itself are reported by
/// `sam2_encode_job_wait`.
///
/// The caller owns `*out` and frees it with `sam2_encode_job_free`. Out-parameters are untouched on
/// failure.
#[no_mangle]
pub extern "C" fn sam2_cache_encode_async(
    cache: *const sam2_cache,
    encoder: *const sam2_encoder,
    pixels: *const u8,
    pixels_len: usize,
    width: u32,
    height: u32,
    stride: usize,
    pixel_format: u32,
    priority: u32,
    out: *mut *mut sam2_encode_job,
) -> sam2_status {
    guard(|| {
        let (cache, encoder, image) = request(
            cache,
            encoder,
            (pixels, pixels_len, width, height, stride, pixel_format),
        )?;
        let priority = PriorityCodes::parse(priority, "priority")?;
        let out = arg_out(out, "out")?;
        let job = cache.encode_async(encoder, &image, priority)?;
        out.set(super::publish::<sam2_encode_job>(job));
        Ok(())
    })
}

/// Keeps `embedding` (loaded from a file, say) as the embedding of an image for `encoder`, so
/// `sam2_cache_encode` finds it. It must have been made by the encoder's model
/// (`SAM2_ERR_MODEL_MISMATCH` otherwise) from an image of this size, and live where the encoder's
/// embeddings do, the same allocator and device (`SAM2_ERR_INVALID_ARGUMENT` naming both: copy it
/// there first, `sam2_embedding_to_host` for a host encoder).
/// The cache shares the embedding; the caller keeps its handle.
#[no_mangle]
pub extern "C" fn sam2_cache_put(
    cache: *const sam2_cache,
    encoder: *const sam2_encoder,
    pixels: *const u8,
    pixels_len: usize,
    width: u32,
    height: u32,
    stride: usize,
    pixel_format: u32,
    embedding: *const sam2_embedding,
) -> sam2_status {
    guard(|| {
        let (cache, encoder, image) = request(
            cache,
            encoder,
            (pixels, pixels_len, width, height, stride, pixel_format),
        )?;
        let embedding = handle_ref(embedding, "embedding")?;
        cache.put(encoder, &image, Arc::clone(&embedding.inner))
    })
}

/// Drops every kept embedding (embeddings handed out stay valid; encodes in flight go on).
#[no_mangle]
pub extern "C" fn sam2_cache_clear(cache: *const sam2_cache) -> sam2_status {
    guard(|| {
        handle_ref(cache, "cache")?.clear();
        Ok(())
    })
}

/// Cancels every background encode, queued or in flight, that no thread is waiting for in
/// `sam2_cache_encode` (closing a folder, say). The one in flight is stopped through ONNX
/// Runtime's run-termination flag. `*out_cancelled` (if not NULL) receives how many were cancelled.
#[no_mangle]
pub extern "C" fn sam2_cache_cancel_all(
    cache: *const sam2_cache,
    out_cancelled: *mut usize,
) -> sam2_status {
    guard(|| {
        let cancelled = handle_ref(cache, "cache")?.cancel_all();
        if !out_cancelled.is_null() {
            // SAFETY: checked non-NULL; the caller promises it is writable.
            unsafe { *out_cancelled = cancelled };
        }
        Ok(())
    })
}

/// Writes the cache's counters and occupancy. Set `out->struct_size` to
/// `sizeof(sam2_cache_stats)` first; that many bytes are written.
#[no_mangle]
pub extern "C" fn sam2_cache_get_stats(
    cache: *const sam2_cache,
    out: *mut sam2_cache_stats,
) -> sam2_status {
    guard(|| {
        let cache = handle_ref(cache, "cache")?;
        if out.is_null() {
            return Err(Error::NullArgument("out"));
        }
        // Only the leading `struct_size` is read before it is checked: a caller's struct may be
        // shorter than this version's (a reference over the whole struct would be unsound).
        // SAFETY: non-NULL; every version of the struct starts with its `uint32_t struct_size`.
        let given = unsafe { std::ptr::addr_of!((*out).struct_size).read_unaligned() };
        let full = std::mem::size_of::<sam2_cache_stats>();
        if given as usize != full {
            return Err(Error::invalid(
                "out.struct_size",
                format!("is {given}; set it to sizeof(sam2_cache_stats) ({full})"),
            ));
        }
        let out = arg_out(out, "out")?;
        let s = cache.stats();
        out.set(sam2_cache_stats {
            struct_size: full as u32,
            running: s.running as u32,
            hits: s.hits,
            joins: s.joins,
            misses: s.misses,
            evictions: s.evictions,
            rejected: s.rejected,
            cancelled: s.cancelled,
            preempted: s.preempted,
            entries: s.entries as u64,
            host_bytes: s.host_bytes as u64,
            device_bytes: s.device_bytes as u64,
            queued: s.queued as u64,
        });
        Ok(())
    })
}

/// Waits for a job's embedding at most `timeout_ms` milliseconds (`SAM2_WAIT_FOREVER`: as long as
/// it takes; 0: just look). On success `*out` receives a new embedding handle; a job may be waited
/// for again, each success giving a new handle of the same embedding. Errors: `SAM2_ERR_TIMEOUT`
/// (the encode goes on), `SAM2_ERR_CANCELLED`, or the status and message of the failed encode.
/// Thread-safe.
///
/// The caller owns `*out` and frees it with `sam2_embedding_free`. Out-parameters are untouched on
/// failure.
#[no_mangle]
pub extern "C" fn sam2_encode_job_wait(
    job: *const sam2_encode_job,
    timeout_ms: u32,
    out: *mut *mut sam2_embedding,
) -> sam2_status {
    guard(|| {
        let job = handle_ref(job, "job")?;
        let out = arg_out(out, "out")?;
        let timeout =
            (timeout_ms != SAM2_WAIT_FOREVER).then(|| Duration::from_millis(u64::from(timeout_ms)));
        let embedding = job.wait(timeout)?;
        out.set(super::publish::<sam2_embedding>(embedding));
        Ok(())
    })
}

/// Writes where a job is (`SAM2_JOB_*`) without waiting.
#[no_mangle]
pub extern "C" fn sam2_encode_job_state(
    job: *const sam2_encode_job,
    out_state: *mut u32,
) -> sam2_status {
    guard(|| {
        let job = handle_ref(job, "job")?;
        let out = arg_out(out_state, "out_state")?;
        out.set(JobStateCodes::code(job.state()));
        Ok(())
    })
}

/// Withdraws the job's request: the encode is dropped from the queue, or stopped in flight through
/// ONNX Runtime's run-termination flag, unless another request (another job, or a thread in
/// `sam2_cache_encode`) still wants that image. Afterwards the job reports `SAM2_JOB_CANCELLED` and
/// its wait gives `SAM2_ERR_CANCELLED`. Cancelling twice, or a finished job, is fine.
#[no_mangle]
pub extern "C" fn sam2_encode_job_cancel(job: *const sam2_encode_job) -> sam2_status {
    guard(|| {
        handle_ref(job, "job")?.cancel();
        Ok(())
    })
}

/// Releases a job handle; the encode goes on (cancel it first to stop it). NULL is a no-op. Do not
/// free it twice, nor while it is in use.
#[no_mangle]
pub extern "C" fn sam2_encode_job_free(job: *mut sam2_encode_job) {
    super::free_handle(job, "job");
}
