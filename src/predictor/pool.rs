//! The pool of sessions a predictor runs on: which session serves a predict, held for its run.

use std::sync::atomic::{AtomicUsize, Ordering};

use ort::session::Session;

use super::Predictor;

impl Predictor {
    /// A session for one predict: the one on every core when no other predict runs, else a free
    /// one-thread session (any free one when all of those are busy), else, all busy, the next
    /// one in turn. The caller holds the returned guard for the whole run.
    pub(super) fn session(&self) -> PoolGuard<'_> {
        let running = self.in_flight.fetch_add(1, Ordering::AcqRel);
        let counted = InFlight(&self.in_flight);
        // Alone: from the session on every core; beside others: from the one-thread sessions,
        // that one last.
        let first = usize::from(self.lone_session && running > 0);
        for i in (first..self.sessions.len()).chain(0..first) {
            if let Ok(guard) = self.sessions[i].try_lock() {
                return PoolGuard {
                    session: guard,
                    _counted: counted,
                };
            }
        }
        let start = self.next.fetch_add(1, Ordering::Relaxed);
        let n = self.sessions.len();
        PoolGuard {
            session: self.sessions[start % n]
                .lock()
                .unwrap_or_else(|p| p.into_inner()),
            _counted: counted,
        }
    }
}

/// Counts a predict as running until dropped.
struct InFlight<'a>(&'a AtomicUsize);

/// A session of the pool, held for one predict.
pub(super) struct PoolGuard<'a> {
    session: std::sync::MutexGuard<'a, Session>,
    _counted: InFlight<'a>,
}

impl Drop for InFlight<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::AcqRel);
    }
}

impl std::ops::Deref for PoolGuard<'_> {
    type Target = Session;
    fn deref(&self) -> &Session {
        &self.session
    }
}

impl std::ops::DerefMut for PoolGuard<'_> {
    fn deref_mut(&mut self) -> &mut Session {
        &mut self.session
    }
}
