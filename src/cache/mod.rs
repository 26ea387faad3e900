//! An embedding cache with byte budgets, and a background worker that encodes ahead of the host.
//!
//! Annotators move through folders and click within a second of an image opening, while the
//! encoder takes about a second on a CPU. A host hides that by keeping the last embeddings and by
//! encoding the next images before they are opened. [`EmbeddingCache`] does both:
//!
//! - Embeddings are keyed by a 128-bit content hash of the pixels (the rows as the host holds them,
//!   with the width, height and pixel format), the encoder's model fingerprint and the memory the
//!   encoder writes to, so the same image opened twice is encoded once.
//! - Host memory and device memory have separate byte budgets (VRAM is the scarce one); when an
//!   insertion would pass its budget, the least recently used embeddings of that memory are
//!   dropped. An embedding larger than its whole budget is handed over but not kept.
//! - One worker thread runs every encode: the sessions already use every core, so a second worker
//!   would only queue on the session. Background requests ([`EmbeddingCache::encode_async`]) join
//!   the back of a bounded queue; a request a thread waits for ([`EmbeddingCache::encode`]) goes
//!   to the front and interrupts a background encode in flight (which is put back in the queue),
//!   so opening an image that was not pre-encoded never waits behind the images after it.
//! - A request for an image that is already queued or running joins that encode, unless that
//!   encode was cancelled: a cancelled encode is never joined, a new one is queued instead.
//! - Cancelling sets ONNX Runtime's run-termination flag of an encode in flight, which stops it
//!   between two nodes instead of finishing a second of wasted work.
//!
//! Memory: the budgets bound what the cache keeps. Beyond them, the worker holds at most one
//! embedding in flight, and each queued request holds its prepared input tensor (3 × S² floats
//! for an S×S model input: 12 MiB at 1024²), made on the submitting thread so the host's pixels
//! are not needed after the call. Embeddings handed to the host stay alive as long as the host
//! keeps them, whether or not the cache still does.
//!
//! Files: this one holds the options, the statistics and [`EmbeddingCache`] itself; `store.rs`
//! what is kept (keys, least-recently-used eviction within the budgets); `queue.rs` the encodes
//! (tasks, the queue and the worker thread); `job.rs` the handle a request returns.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::thread::JoinHandle;

use crate::embedding::Embedding;
use crate::encoder::Encoder;
use crate::error::{Error, Result};
use crate::image::ImageView;

mod job;
mod queue;
mod store;

pub use job::Job;
use job::Request;
use queue::{work, Shared, State, Task};
pub(crate) use store::pixel_hash;
use store::Key;

const MIB: usize = 1 << 20;

/// Budgets and limits of a cache.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CacheOptions {
    /// Bytes of embeddings in host memory the cache may keep. 0 keeps none.
    pub host_budget: usize,
    /// Bytes of embeddings in device memory (VRAM) the cache may keep. 0 keeps none.
    pub device_budget: usize,
    /// Background requests that may wait in the queue (the one running is not counted).
    pub queue_limit: usize,
}

/// Most background requests a cache's queue may be allowed to hold.
pub const MAX_QUEUE_LIMIT: usize = 65536;

impl CacheOptions {
    /// Refuses a queue longer than [`MAX_QUEUE_LIMIT`], naming the field (any budget is fine).
    pub fn validate(&self) -> Result<()> {
        if self.queue_limit > MAX_QUEUE_LIMIT {
            return Err(Error::invalid(
                "queue_limit",
                format!(
                    "must be at most {MAX_QUEUE_LIMIT}, got {}",
                    self.queue_limit
                ),
            ));
        }
        Ok(())
    }
}

impl Default for CacheOptions {
    /// Ten SAM2 embeddings (16 MiB each in fp32) on the host, four on a device, eight queued.
    fn default() -> Self {
        CacheOptions {
            host_budget: 160 * MIB,
            device_budget: 64 * MIB,
            queue_limit: 8,
        }
    }
}

/// Counters and occupancy of a cache.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CacheStats {
    /// Requests served from a kept embedding.
    pub hits: u64,
    /// Requests served by an encode that was already queued or running.
    pub joins: u64,
    /// Requests that started a new encode.
    pub misses: u64,
    /// Embeddings dropped to stay within a budget.
    pub evictions: u64,
    /// Encoded embeddings too large for their budget, handed over but not kept.
    pub rejected: u64,
    /// Encodes cancelled before they finished (queued or in flight).
    pub cancelled: u64,
    /// Background encodes interrupted to run a waited-for one first (each is run again later).
    pub preempted: u64,
    /// Embeddings kept now.
    pub entries: usize,
    /// Bytes of kept embeddings in host memory.
    pub host_bytes: usize,
    /// Bytes of kept embeddings in device memory.
    pub device_bytes: usize,
    /// Encodes waiting in the queue.
    pub queued: usize,
    /// Encodes running (0 or 1).
    pub running: usize,
}

/// What a cache lookup found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Source {
    /// A kept embedding.
    Cache,
    /// An encode that was already queued or running.
    Joined,
    /// A new encode.
    Encoded,
}

/// How urgent a request is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Priority {
    /// Pre-encoding: the back of the bounded queue.
    #[default]
    Background,
    /// An image the user opened: ahead of background work, interrupting it, never refused for a
    /// full queue.
    Foreground,
}

/// Where a background encode is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum JobState {
    Queued,
    Running,
    Done,
    Failed,
    Cancelled,
}

pub struct EmbeddingCache {
    shared: Arc<Shared>,
    worker: Option<JoinHandle<()>>,
}

impl std::fmt::Debug for EmbeddingCache {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EmbeddingCache")
            .field("options", &self.shared.options)
            .field("stats", &self.stats())
            .finish()
    }
}

impl EmbeddingCache {
    pub fn new(options: CacheOptions) -> Result<Self> {
        options.validate()?;
        let shared = Arc::new(Shared {
            options,
            state: Mutex::new(State::default()),
            work: Condvar::new(),
        });
        let worker_shared = Arc::clone(&shared);
        let worker = std::thread::Builder::new()
            .name("sam2-encode".into())
            .spawn(move || work(&worker_shared))
            .map_err(|e| Error::io("starting the cache's encoder thread", e))?;
        Ok(EmbeddingCache {
            shared,
            worker: Some(worker),
        })
    }

    pub fn options(&self) -> CacheOptions {
        self.shared.options
    }

    /// The embedding of `image`: kept, joined from an encode under way, or encoded now ahead of
    /// the background queue. Blocks until it is there.
    pub fn encode(
        &self,
        encoder: &Arc<Encoder>,
        image: &ImageView<'_>,
    ) -> Result<(Arc<Embedding>, Source)> {
        let job = self.encode_async(encoder, image, Priority::Foreground)?;
        let embedding = job.wait(None)?;
        Ok((embedding, job.source))
    }

    /// Requests the embedding of `image` and returns at once with a job that hands it over. The
    /// pixels are read (hashed and preprocessed) during the call only. A kept embedding gives a
    /// job that is already done; a request for an image already queued or running joins that
    /// encode. The result lands in the cache.
    ///
    /// [`Priority::Background`] requests join the back of the queue and fail with
    /// [`Error::QueueFull`] when it holds `queue_limit` requests. [`Priority::Foreground`]
    /// requests (an image the user opened) are not limited, go ahead of background ones, and
    /// interrupt a background encode in flight, which runs again after them.
    pub fn encode_async(
        &self,
        encoder: &Arc<Encoder>,
        image: &ImageView<'_>,
        priority: Priority,
    ) -> Result<Job> {
        let key = Key::of(encoder, image);
        let mut input = None;
        loop {
            match self.find(&key)? {
                Found::Kept(embedding) => {
                    return Ok(Job {
                        shared: Arc::clone(&self.shared),
                        request: Request::Kept(embedding),
                        priority,
                        source: Source::Cache,
                        cancelled: AtomicBool::new(false),
                    })
                }
                Found::InFlight(task, mut state) => {
                    state.stats.joins += 1;
                    return Ok(self.job(task, state, priority, Source::Joined));
                }
                Found::Nothing(mut state) => {
                    let limit = self.shared.options.queue_limit;
                    if priority == Priority::Background && state.queue.len() >= limit {
                        return Err(Error::QueueFull { limit });
                    }
                    let Some(input) = input.take() else {
                        // Preprocess without holding the lock, then look again.
                        drop(state);
                        input = Some(encoder.prepare_input(image)?);
                        continue;
                    };
                    let task = Arc::new(Task::new(key, Arc::clone(encoder), input, image)?);
                    state.stats.misses += 1;
                    state.in_flight.insert(task.key.clone(), Arc::clone(&task));
                    state.queue.push_back(Arc::clone(&task));
                    return Ok(self.job(task, state, priority, Source::Encoded));
                }
            }
        }
    }

    /// Keeps an embedding made elsewhere (loaded from a file, say) as the one of `image` for
    /// `encoder`. It must come from the encoder's model, be of the image's size, and live where
    /// the encoder's embeddings do (the same allocator and device).
    pub fn put(
        &self,
        encoder: &Arc<Encoder>,
        image: &ImageView<'_>,
        embedding: Arc<Embedding>,
    ) -> Result<()> {
        if embedding.fingerprint() != encoder.fingerprint() {
            return Err(Error::ModelMismatch(format!(
                "the embedding was made by model {}, the encoder is model {}",
                embedding.fingerprint(),
                encoder.fingerprint()
            )));
        }
        let size = (image.width as u32, image.height as u32);
        if embedding.image_size() != size {
            return Err(Error::invalid(
                "embedding",
                format!(
                    "was made from a {}×{} image, the image is {}×{}",
                    embedding.image_size().0,
                    embedding.image_size().1,
                    size.0,
                    size.1
                ),
            ));
        }
        // Filed where the encoder's own embeddings go: one that lives elsewhere (a device
        // embedding for a CPU encoder, or the reverse) would be handed out as if the encoder had
        // written it.
        let (here, there) = (
            encoder.output_location(),
            (embedding.allocator_name(), embedding.device_id()),
        );
        if (here.allocator.as_str(), here.device_id) != (there.0, there.1) {
            return Err(Error::invalid(
                "embedding",
                format!(
                    "lives in {} memory (device {}), but this encoder's embeddings live in {} \
                     memory (device {}): copy it there first (to_host, or copy_to)",
                    there.0, there.1, here.allocator, here.device_id
                ),
            ));
        }
        let key = Key::of(encoder, image);
        let options = self.shared.options;
        let mut state = self.shared.state();
        let State { store, stats, .. } = &mut *state;
        store.insert(key, embedding, &options, stats);
        Ok(())
    }

    /// True when an embedding of `image` for `encoder` is kept (does not count as a hit).
    pub fn contains(&self, encoder: &Encoder, image: &ImageView<'_>) -> bool {
        let key = Key::of(encoder, image);
        self.shared.state().store.contains(&key)
    }

    /// Drops every kept embedding (work in flight goes on).
    pub fn clear(&self) {
        self.shared.state().store.clear();
    }

    /// Cancels every background encode, queued or in flight, that no thread is waiting for.
    /// Returns how many were cancelled.
    pub fn cancel_all(&self) -> usize {
        let mut state = self.shared.state();
        let mut victims: Vec<Arc<Task>> = state
            .queue
            .iter()
            .filter(|t| t.foreground.load(Ordering::Relaxed) == 0)
            .cloned()
            .collect();
        if let Some(running) = &state.running {
            if running.foreground.load(Ordering::Relaxed) == 0 {
                victims.push(Arc::clone(running));
            }
        }
        for task in &victims {
            state.cancel(task);
        }
        victims.len()
    }

    pub fn stats(&self) -> CacheStats {
        let state = self.shared.state();
        let (host_bytes, device_bytes) = state.store.bytes();
        CacheStats {
            entries: state.store.len(),
            host_bytes,
            device_bytes,
            queued: state.queue.len(),
            running: state.running.is_some() as usize,
            ..state.stats
        }
    }

    fn find(&self, key: &Key) -> Result<Found<'_>> {
        let mut state = self.shared.state();
        if state.shutdown {
            return Err(Error::Cancelled);
        }
        if let Some(embedding) = state.store.lookup(key) {
            state.stats.hits += 1;
            return Ok(Found::Kept(embedding));
        }
        match state.in_flight.get(key).cloned() {
            Some(task) => Ok(Found::InFlight(task, state)),
            None => Ok(Found::Nothing(state)),
        }
    }

    /// A job's request for `task`: counted as interest, and for a foreground request, moved first.
    fn job(
        &self,
        task: Arc<Task>,
        mut state: MutexGuard<'_, State>,
        priority: Priority,
        source: Source,
    ) -> Job {
        task.interest.fetch_add(1, Ordering::Relaxed);
        if priority == Priority::Foreground {
            task.foreground.fetch_add(1, Ordering::Relaxed);
            state.promote(&task);
        }
        self.shared.work.notify_one();
        Job {
            shared: Arc::clone(&self.shared),
            request: Request::Encode(task),
            priority,
            source,
            cancelled: AtomicBool::new(false),
        }
    }
}

enum Found<'a> {
    Kept(Arc<Embedding>),
    InFlight(Arc<Task>, MutexGuard<'a, State>),
    Nothing(MutexGuard<'a, State>),
}

impl Drop for EmbeddingCache {
    fn drop(&mut self) {
        {
            let mut state = self.shared.state();
            state.shutdown = true;
            let queued: Vec<Arc<Task>> = state.queue.iter().cloned().collect();
            for task in &queued {
                state.cancel(task);
            }
            if let Some(running) = state.running.clone() {
                state.cancel(&running);
            }
            state.store.clear();
            self.shared.work.notify_all();
        }
        if let Some(worker) = self.worker.take() {
            let _ = worker.join();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn queue_limit_is_bounded() {
        let options = |queue_limit: usize| CacheOptions {
            queue_limit,
            ..Default::default()
        };
        for ok in [0, 1, MAX_QUEUE_LIMIT] {
            assert!(options(ok).validate().is_ok(), "{ok}");
        }
        for bad in [MAX_QUEUE_LIMIT + 1, usize::MAX] {
            let e = options(bad).validate().unwrap_err().to_string();
            assert!(
                e.contains("`queue_limit`") && e.contains(&format!("got {bad}")),
                "{e}"
            );
            let Err(e) = EmbeddingCache::new(options(bad)) else {
                panic!("a queue of {bad} was accepted");
            };
            assert!(e.to_string().contains("`queue_limit`"), "{e}");
        }
        // Budgets have no bound: 0 keeps nothing, usize::MAX keeps everything.
        for budget in [0, usize::MAX] {
            let o = CacheOptions {
                host_budget: budget,
                device_budget: budget,
                ..Default::default()
            };
            assert!(o.validate().is_ok());
        }
    }
}
