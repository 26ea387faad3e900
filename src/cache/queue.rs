//! The work: one encode per image ([`Task`], shared by every request for it), the queue they
//! wait in, and the worker thread that runs them one at a time.

use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use ort::session::RunOptions;
use ort::value::DynValue;

use super::store::{Key, Store};
use super::{CacheOptions, CacheStats, JobState};
use crate::embedding::Embedding;
use crate::encoder::Encoder;
use crate::error::{Error, Result};
use crate::image::ImageView;

#[derive(Debug)]
pub(super) enum Outcome {
    Queued,
    Running,
    Done(Arc<Embedding>),
    Failed(Error),
    Cancelled,
}

/// One encode, shared by every request for the same image.
pub(super) struct Task {
    pub(super) key: Key,
    pub(super) encoder: Arc<Encoder>,
    /// The prepared input; dropped when the task ends.
    pub(super) input: Mutex<Option<DynValue>>,
    pub(super) width: u32,
    pub(super) height: u32,
    pub(super) run_options: RunOptions,
    pub(super) outcome: Mutex<Outcome>,
    pub(super) done: Condvar,
    // Changed only under the cache's state lock (atomics only to share them).
    /// Requests that still want the result (jobs not cancelled, threads waiting).
    pub(super) interest: AtomicUsize,
    /// Threads blocked in `encode` on this task.
    pub(super) foreground: AtomicUsize,
    /// Set with the termination flag when a waited-for encode interrupts this one.
    pub(super) preempted: AtomicBool,
    /// Set with the termination flag when every request cancelled it.
    pub(super) cancelled: AtomicBool,
}

impl Task {
    pub(super) fn new(
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

    pub(super) fn outcome(&self) -> MutexGuard<'_, Outcome> {
        self.outcome.lock().unwrap_or_else(|p| p.into_inner())
    }

    pub(super) fn set_outcome(&self, outcome: Outcome) {
        let ends = !matches!(outcome, Outcome::Queued | Outcome::Running);
        *self.outcome() = outcome;
        if ends {
            *self.input.lock().unwrap_or_else(|p| p.into_inner()) = None;
            self.done.notify_all();
        }
    }

    pub(super) fn state(&self) -> JobState {
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
    pub(super) fn wait(
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

#[derive(Default)]
pub(super) struct State {
    pub(super) store: Store,
    pub(super) queue: VecDeque<Arc<Task>>,
    pub(super) in_flight: HashMap<Key, Arc<Task>>,
    pub(super) running: Option<Arc<Task>>,
    pub(super) stats: CacheStats,
    pub(super) shutdown: bool,
}

impl State {
    /// Forgets `task` as the encode under way for its image, unless a newer task took its place.
    pub(super) fn forget(&mut self, task: &Arc<Task>) {
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
    pub(super) fn cancel(&mut self, task: &Arc<Task>) {
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
    pub(super) fn foreground_end(&self) -> usize {
        self.queue
            .iter()
            .take_while(|t| t.foreground.load(Ordering::Relaxed) > 0)
            .count()
    }

    /// Moves a task a thread now waits for to the front (after earlier waited-for tasks), and
    /// interrupts a background encode in flight so it runs next.
    pub(super) fn promote(&mut self, task: &Arc<Task>) {
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

pub(super) struct Shared {
    pub(super) options: CacheOptions,
    pub(super) state: Mutex<State>,
    pub(super) work: Condvar,
}

impl Shared {
    pub(super) fn state(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// The worker: runs queued tasks one at a time until the cache is dropped.
pub(super) fn work(shared: &Shared) {
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

        let result = crate::panics::catch(|| {
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
        })
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
                    let State { store, stats, .. } = &mut *state;
                    store.insert(task.key.clone(), Arc::clone(&embedding), &options, stats);
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
