//! The pool of sessions a predictor runs on: which session serves a predict, held for its run,
//! and the sessions built when a predict first needs them.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{MutexGuard, TryLockError};

use ort::session::Session;

use super::Predictor;
use crate::session;

impl Predictor {
    /// A session for one predict: the one on every core when no other predict runs, else a free
    /// one-thread session (built now if it is the first time the pool needs it), else, all busy,
    /// the next built one in turn. The caller holds the returned guard for the whole run.
    pub(super) fn session(&self) -> PoolGuard<'_> {
        let running = self.in_flight.fetch_add(1, Ordering::AcqRel);
        let counted = InFlight(&self.in_flight);
        // Alone: from the session on every core; beside others: from the one-thread sessions,
        // that one last.
        let first = usize::from(self.lone_session && running > 0);
        let n = self.sessions.len();
        for i in (first..n).chain(0..first) {
            if let Ok(mut slot) = self.sessions[i].try_lock() {
                if slot.is_some() || self.grow(&mut slot) {
                    return PoolGuard {
                        session: slot,
                        _counted: counted,
                    };
                }
            }
        }
        // Every built session is busy (or the pool could not grow): wait for one, in turn. The
        // first session is always built and the turn passes every slot, so this ends.
        let start = self.next.fetch_add(1, Ordering::Relaxed);
        for k in 0..n {
            let i = (start % n + k) % n;
            let slot = self.sessions[i].lock().unwrap_or_else(|p| p.into_inner());
            if slot.is_some() {
                return PoolGuard {
                    session: slot,
                    _counted: counted,
                };
            }
        }
        unreachable!("the predictor's first session is built with it")
    }

    /// Builds the session of an empty slot on the shared weights. A failure (memory, most
    /// likely) is not the predict's: the pool stops growing and the predict takes a session
    /// already built.
    fn grow(&self, slot: &mut Option<Session>) -> bool {
        if self.pool_full.load(Ordering::Relaxed) {
            return false;
        }
        match session::build(
            &self.weights,
            &self.path,
            &self.pool_options,
            "predictor",
            session::Idle::Spin,
        ) {
            Ok((built, _)) => {
                *slot = Some(built);
                true
            }
            Err(e) => {
                self.pool_full.store(true, Ordering::Relaxed);
                let path = self.path.display();
                let message = format!(
                    "{path}: the predictor's pool stays at the sessions it has: another could \
                     not be built ({e})"
                );
                crate::log::emit(crate::log::LogLevel::Warning, &message);
                false
            }
        }
    }

    /// `test_support::fail_pool_growth`: the sessions built on demand from now on are asked
    /// for on a provider this system lacks, with no fallback, so that their build fails.
    #[cfg(feature = "test-support")]
    pub(crate) fn fail_pool_growth(&mut self) {
        use crate::device::{DeviceOptions, MismatchPolicy, Provider, ProviderRequest};
        self.pool_options.device = DeviceOptions {
            providers: vec![ProviderRequest {
                provider: Provider::DirectMl,
                ..ProviderRequest::cpu()
            }],
            on_mismatch: MismatchPolicy::Fail,
        };
    }

    /// Sessions of the pool built so far (the first is built with the predictor, the others
    /// when predicts first run at once).
    pub fn sessions_built(&self) -> usize {
        self.sessions
            .iter()
            .filter(|s| match s.try_lock() {
                Ok(slot) => slot.is_some(),
                // In use: built, or being built for the predict that holds it.
                Err(TryLockError::WouldBlock) => true,
                Err(TryLockError::Poisoned(p)) => p.into_inner().is_some(),
            })
            .count()
    }
}

/// Counts a predict as running until dropped.
struct InFlight<'a>(&'a AtomicUsize);

/// A built session of the pool, held for one predict.
pub(super) struct PoolGuard<'a> {
    session: MutexGuard<'a, Option<Session>>,
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
        self.session
            .as_ref()
            .expect("a pool guard holds a built session")
    }
}

impl std::ops::DerefMut for PoolGuard<'_> {
    fn deref_mut(&mut self) -> &mut Session {
        self.session
            .as_mut()
            .expect("a pool guard holds a built session")
    }
}
