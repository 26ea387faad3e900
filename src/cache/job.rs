//! A request's handle: [`Job`] hands over the embedding, waits for it, or withdraws the request.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use super::queue::{Shared, Task};
use super::{JobState, Priority, Source};
use crate::embedding::Embedding;
use crate::error::{Error, Result};

/// An encode requested by [`EmbeddingCache::encode_async`]. Dropping the job does not cancel the
/// encode (its result still lands in the cache); [`Job::cancel`] does.
pub struct Job {
    pub(super) shared: Arc<Shared>,
    pub(super) request: Request,
    pub(super) priority: Priority,
    pub(super) source: Source,
    pub(super) cancelled: AtomicBool,
}

/// What a job hands over: an embedding the cache kept, or the result of an encode (shared by
/// every request for its image).
pub(super) enum Request {
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
