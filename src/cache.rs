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

use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use ort::session::RunOptions;
use ort::value::DynValue;
use xxhash_rust::xxh3::Xxh3Default;

use crate::embedding::Embedding;
use crate::encoder::Encoder;
use crate::error::{Error, Result};
use crate::fingerprint::Fingerprint;
use crate::image::ImageView;

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

/// Identity of an embedding: the pixels, the model, and the memory the encoder writes to.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
struct Key {
    pixels: u128,
    fingerprint: Fingerprint,
    allocator: String,
    device_id: i32,
}

impl Key {
    fn of(encoder: &Encoder, image: &ImageView<'_>) -> Key {
        let location = encoder.output_location();
        Key {
            pixels: pixel_hash(image),
            fingerprint: encoder.fingerprint(),
            allocator: location.allocator,
            device_id: location.device_id,
        }
    }
}

/// 128-bit XXH3 of an image's visible pixels (row padding excluded), its size and pixel format.
pub fn pixel_hash(image: &ImageView<'_>) -> u128 {
    let mut hasher = Xxh3Default::new();
    hasher.update(&(image.width as u64).to_le_bytes());
    hasher.update(&(image.height as u64).to_le_bytes());
    hasher.update(&[image.format as u8]);
    let row_bytes = image.width * image.format.channels();
    if image.stride == row_bytes {
        hasher.update(&image.data[..row_bytes * image.height]);
    } else {
        for row in 0..image.height {
            let start = row * image.stride;
            hasher.update(&image.data[start..start + row_bytes]);
        }
    }
    hasher.digest128()
}

#[derive(Debug)]
enum Outcome {
    Queued,
    Running,
    Done(Arc<Embedding>),
    Failed(Error),
    Cancelled,
}

/// One encode, shared by every request for the same image.
struct Task {
    key: Key,
    encoder: Arc<Encoder>,
    /// The prepared input; dropped when the task ends.
    input: Mutex<Option<DynValue>>,
    width: u32,
    height: u32,
    run_options: RunOptions,
    outcome: Mutex<Outcome>,
    done: Condvar,
    // Changed only under the cache's state lock (atomics only to share them).
    /// Requests that still want the result (jobs not cancelled, threads waiting).
    interest: AtomicUsize,
    /// Threads blocked in `encode` on this task.
    foreground: AtomicUsize,
    /// Set with the termination flag when a waited-for encode interrupts this one.
    preempted: AtomicBool,
    /// Set with the termination flag when every request cancelled it.
    cancelled: AtomicBool,
}

impl Task {
    fn new(
        key: Key,
        encoder: Arc<Encoder>,
        input: DynValue,
        image: &ImageView<'_>,
    ) -> Result<Task> {
        Ok(Task {
            key,
            encoder,
            input: Mutex::new(Some(input)),
            width: image.width as u32,
            height: image.height as u32,
            run_options: RunOptions::new()?,
            outcome: Mutex::new(Outcome::Queued),
            done: Condvar::new(),
            interest: AtomicUsize::new(0),
            foreground: AtomicUsize::new(0),
            preempted: AtomicBool::new(false),
            cancelled: AtomicBool::new(false),
        })
    }

    fn outcome(&self) -> MutexGuard<'_, Outcome> {
        self.outcome.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn set_outcome(&self, outcome: Outcome) {
        let ends = !matches!(outcome, Outcome::Queued | Outcome::Running);
        *self.outcome() = outcome;
        if ends {
            *self.input.lock().unwrap_or_else(|p| p.into_inner()) = None;
            self.done.notify_all();
        }
    }

    fn state(&self) -> JobState {
        match &*self.outcome() {
            Outcome::Queued => JobState::Queued,
            Outcome::Running => JobState::Running,
            Outcome::Done(_) => JobState::Done,
            Outcome::Failed(_) => JobState::Failed,
            Outcome::Cancelled => JobState::Cancelled,
        }
    }

    /// Waits for the task to end, at most `timeout` (None: as long as it takes), or until
    /// `withdrawn` (a job's own cancellation, signalled through `done`) is set.
    fn wait(
        &self,
        timeout: Option<Duration>,
        withdrawn: Option<&AtomicBool>,
    ) -> Result<Arc<Embedding>> {
        let deadline = timeout.map(|t| Instant::now() + t);
        let mut outcome = self.outcome();
        loop {
            if withdrawn.is_some_and(|w| w.load(Ordering::Relaxed)) {
                return Err(Error::Cancelled);
            }
            match &*outcome {
                Outcome::Done(embedding) => return Ok(Arc::clone(embedding)),
                Outcome::Failed(error) => return Err(error.clone()),
                Outcome::Cancelled => return Err(Error::Cancelled),
                Outcome::Queued | Outcome::Running => {}
            }
            outcome = match deadline {
                None => self.done.wait(outcome).unwrap_or_else(|p| p.into_inner()),
                Some(deadline) => {
                    let now = Instant::now();
                    if now >= deadline {
                        return Err(Error::Timeout {
                            waited_ms: timeout.unwrap_or_default().as_millis() as u64,
                        });
                    }
                    self.done
                        .wait_timeout(outcome, deadline - now)
                        .unwrap_or_else(|p| p.into_inner())
                        .0
                }
            };
        }
    }
}

struct Entry {
    embedding: Arc<Embedding>,
    bytes: usize,
    device: bool,
    last_used: u64,
}

#[derive(Default)]
struct State {
    entries: HashMap<Key, Entry>,
    clock: u64,
    host_bytes: usize,
    device_bytes: usize,
    queue: VecDeque<Arc<Task>>,
    in_flight: HashMap<Key, Arc<Task>>,
    running: Option<Arc<Task>>,
    stats: CacheStats,
    shutdown: bool,
}

impl State {
    fn lookup(&mut self, key: &Key) -> Option<Arc<Embedding>> {
        self.clock += 1;
        let clock = self.clock;
        self.entries.get_mut(key).map(|entry| {
            entry.last_used = clock;
            Arc::clone(&entry.embedding)
        })
    }

    fn used(&mut self, device: bool) -> &mut usize {
        if device {
            &mut self.device_bytes
        } else {
            &mut self.host_bytes
        }
    }

    /// Keeps an embedding, dropping the least recently used ones of its memory to fit the budget.
    fn insert(&mut self, key: Key, embedding: Arc<Embedding>, options: &CacheOptions) {
        if let Some(old) = self.entries.remove(&key) {
            *self.used(old.device) -= old.bytes;
        }
        let bytes: usize = embedding.tensors().iter().map(|t| t.byte_len()).sum();
        let device = !embedding.is_serializable();
        let budget = if device {
            options.device_budget
        } else {
            options.host_budget
        };
        if bytes > budget {
            self.stats.rejected += 1;
            return;
        }
        while *self.used(device) + bytes > budget {
            let oldest = self
                .entries
                .iter()
                .filter(|(_, e)| e.device == device)
                .min_by_key(|(_, e)| e.last_used)
                .map(|(k, _)| k.clone());
            let Some(oldest) = oldest else { break };
            let entry = self.entries.remove(&oldest).expect("key just found");
            *self.used(device) -= entry.bytes;
            self.stats.evictions += 1;
        }
        self.clock += 1;
        *self.used(device) += bytes;
        self.entries.insert(
            key,
            Entry {
                embedding,
                bytes,
                device,
                last_used: self.clock,
            },
        );
    }

    /// Forgets `task` as the encode under way for its image, unless a newer task took its place.
    fn forget(&mut self, task: &Arc<Task>) {
        if self
            .in_flight
            .get(&task.key)
            .is_some_and(|t| Arc::ptr_eq(t, task))
        {
            self.in_flight.remove(&task.key);
        }
    }

    /// Ends a task that will not run to completion: drops it from the queue, or terminates its run.
    /// Either way it stops being findable at once, so a later request for the same image starts a
    /// fresh encode instead of joining one that is doomed to end `Cancelled`.
    fn cancel(&mut self, task: &Arc<Task>) {
        let queued = matches!(*task.outcome(), Outcome::Queued);
        if queued {
            self.queue.retain(|t| !Arc::ptr_eq(t, task));
            self.forget(task);
            self.stats.cancelled += 1;
            task.set_outcome(Outcome::Cancelled);
        } else if self.running.as_ref().is_some_and(|r| Arc::ptr_eq(r, task)) {
            task.cancelled.store(true, Ordering::Relaxed);
            let _ = task.run_options.terminate();
            self.forget(task);
        }
    }

    /// Position after the waited-for tasks at the front of the queue.
    fn foreground_end(&self) -> usize {
        self.queue
            .iter()
            .take_while(|t| t.foreground.load(Ordering::Relaxed) > 0)
            .count()
    }

    /// Moves a task a thread now waits for to the front (after earlier waited-for tasks), and
    /// interrupts a background encode in flight so it runs next.
    fn promote(&mut self, task: &Arc<Task>) {
        if let Some(at) = self.queue.iter().position(|t| Arc::ptr_eq(t, task)) {
            let task = self.queue.remove(at).expect("position just found");
            let to = self.foreground_end();
            self.queue.insert(to, task);
        }
        if let Some(running) = &self.running {
            if !Arc::ptr_eq(running, task)
                && running.foreground.load(Ordering::Relaxed) == 0
                && !running.preempted.swap(true, Ordering::Relaxed)
            {
                let _ = running.run_options.terminate();
                self.stats.preempted += 1;
            }
        }
    }
}

struct Shared {
    options: CacheOptions,
    state: Mutex<State>,
    work: Condvar,
}

impl Shared {
    fn state(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// An embedding cache with its background encoder thread. Thread-safe; dropping it cancels the
/// work in flight and waits for the worker (at most until ONNX Runtime honours the termination).
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
    /// `encoder`. It must come from the encoder's model and be of the image's size.
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
        let key = Key::of(encoder, image);
        let options = self.shared.options;
        self.shared.state().insert(key, embedding, &options);
        Ok(())
    }

    /// True when an embedding of `image` for `encoder` is kept (does not count as a hit).
    pub fn contains(&self, encoder: &Encoder, image: &ImageView<'_>) -> bool {
        let key = Key::of(encoder, image);
        self.shared.state().entries.contains_key(&key)
    }

    /// Drops every kept embedding (work in flight goes on).
    pub fn clear(&self) {
        let mut state = self.shared.state();
        state.entries.clear();
        state.host_bytes = 0;
        state.device_bytes = 0;
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
        CacheStats {
            entries: state.entries.len(),
            host_bytes: state.host_bytes,
            device_bytes: state.device_bytes,
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
        if let Some(embedding) = state.lookup(key) {
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
            state.entries.clear();
            state.host_bytes = 0;
            state.device_bytes = 0;
            self.shared.work.notify_all();
        }
        if let Some(worker) = self.worker.take() {
            let _ = worker.join();
        }
    }
}

/// The worker: runs queued tasks one at a time until the cache is dropped.
fn work(shared: &Shared) {
    let mut state = shared.state();
    loop {
        if state.shutdown {
            return;
        }
        let Some(task) = state.queue.pop_front() else {
            state = shared.work.wait(state).unwrap_or_else(|p| p.into_inner());
            continue;
        };
        state.running = Some(Arc::clone(&task));
        task.set_outcome(Outcome::Running);
        drop(state);

        let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            let input = task.input.lock().unwrap_or_else(|p| p.into_inner());
            match input.as_ref() {
                Some(input) => task.encoder.encode_prepared_with(
                    input,
                    task.width,
                    task.height,
                    Some(&task.run_options),
                ),
                None => Err(Error::Panic("a queued encode lost its input".into())),
            }
        }))
        .unwrap_or_else(|_| {
            Err(Error::Panic(
                "the encoder panicked in the background".into(),
            ))
        });

        state = shared.state();
        state.running = None;
        match result {
            Ok(embedding) => {
                let embedding = Arc::new(embedding);
                state.forget(&task);
                if !state.shutdown {
                    let options = shared.options;
                    state.insert(task.key.clone(), Arc::clone(&embedding), &options);
                }
                task.set_outcome(Outcome::Done(embedding));
            }
            Err(_) if task.cancelled.load(Ordering::Relaxed) || state.shutdown => {
                state.forget(&task);
                state.stats.cancelled += 1;
                task.set_outcome(Outcome::Cancelled);
            }
            Err(_) if task.preempted.swap(false, Ordering::Relaxed) => {
                // Interrupted for a waited-for encode: run it again right after that one.
                let _ = task.run_options.unterminate();
                task.set_outcome(Outcome::Queued);
                let at = state.foreground_end();
                state.queue.insert(at, task);
            }
            Err(error) => {
                state.forget(&task);
                task.set_outcome(Outcome::Failed(error));
            }
        }
    }
}

/// An encode requested by [`EmbeddingCache::encode_async`]. Dropping the job does not cancel the
/// encode (its result still lands in the cache); [`Job::cancel`] does.
pub struct Job {
    shared: Arc<Shared>,
    request: Request,
    priority: Priority,
    source: Source,
    cancelled: AtomicBool,
}

/// What a job hands over: an embedding the cache kept, or the result of an encode (shared by
/// every request for its image).
enum Request {
    Kept(Arc<Embedding>),
    Encode(Arc<Task>),
}

impl std::fmt::Debug for Job {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Job").field("state", &self.state()).finish()
    }
}

impl Job {
    /// Whether the request found a kept embedding, joined an encode, or started one.
    pub fn source(&self) -> Source {
        self.source
    }

    /// Where the encode is; `Cancelled` once this job was cancelled.
    pub fn state(&self) -> JobState {
        if self.cancelled.load(Ordering::Relaxed) {
            return JobState::Cancelled;
        }
        match &self.request {
            Request::Kept(_) => JobState::Done,
            Request::Encode(task) => task.state(),
        }
    }

    /// Waits for the embedding at most `timeout` (None: as long as it takes). Fails with
    /// [`Error::Timeout`] (the encode goes on; wait again), [`Error::Cancelled`], or the error of
    /// the encode itself.
    pub fn wait(&self, timeout: Option<Duration>) -> Result<Arc<Embedding>> {
        match &self.request {
            Request::Kept(_) if self.cancelled.load(Ordering::Relaxed) => Err(Error::Cancelled),
            Request::Kept(embedding) => Ok(Arc::clone(embedding)),
            Request::Encode(task) => task.wait(timeout, Some(&self.cancelled)),
        }
    }

    /// Withdraws this job's request. The encode stops (dropped from the queue, or terminated in
    /// flight) when no other request wants it. Idempotent; a finished encode stays finished.
    pub fn cancel(&self) {
        if self.cancelled.swap(true, Ordering::Relaxed) {
            return;
        }
        // A job for a kept embedding counted nothing and has nobody to wake.
        let Request::Encode(task) = &self.request else {
            return;
        };
        let mut state = self.shared.state();
        if self.priority == Priority::Foreground {
            task.foreground.fetch_sub(1, Ordering::Relaxed);
        }
        if task.interest.fetch_sub(1, Ordering::Relaxed) == 1 {
            state.cancel(task);
        }
        drop(state);
        // Wake this job's waiters even when the encode goes on for another request. Taking the
        // lock orders this after a waiter's check of the flag.
        let _outcome = task.outcome();
        task.done.notify_all();
    }
}
