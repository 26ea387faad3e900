//! The threads that resample bands of an image beside the calling thread (and of very large masks,
//! `postprocess`): a pool of its own, so the library knows its threads and can tell the kernel
//! where to run them.
//!
//! Why not rayon's global pool: on virtual machines (measured on 2-vCPU KVM guests) a thread
//! woken after an idle spell is placed on the waker's own vCPU, every time. Linux counts a CPU as
//! idle only when it is not marked preempted, and an idle vCPU the host has descheduled is marked
//! so; the woken helper then shares the caller's vCPU, and after a pause (a user opening an image)
//! the work ran on one thread. Before each call the helpers are allowed every CPU the caller may
//! use except the one it runs on, so the kernel wakes them elsewhere: a probe measured the woken
//! thread running on the other vCPU 0.06–0.09 ms after the wake, against sharing the caller's
//! vCPU without it. Where the caller may use only one CPU, or the kernel refuses, nothing is
//! changed and the helpers run where the kernel puts them, as before.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex, OnceLock};

use super::worker_threads;

struct Helpers {
    pool: rayon::ThreadPool,
    /// Each helper's kernel thread id (where the OS has one: Linux), recorded as it starts.
    tids: Arc<Mutex<Vec<i32>>>,
}

static HELPERS: OnceLock<Option<Helpers>> = OnceLock::new();

/// The pool, built on first use with one thread fewer than [`worker_threads`] (the caller is
/// the other); `None` where one thread is all there is or the threads cannot be started.
fn helpers() -> Option<&'static Helpers> {
    HELPERS
        .get_or_init(|| {
            let n = worker_threads().saturating_sub(1);
            if n == 0 {
                return None;
            }
            let tids = Arc::new(Mutex::new(Vec::with_capacity(n)));
            let recorded = tids.clone();
            let pool = rayon::ThreadPoolBuilder::new()
                .num_threads(n)
                .thread_name(|i| format!("sam2-resize-{i}"))
                .start_handler(move |_| {
                    if let Some(tid) = crate::platform::kernel_thread_id() {
                        recorded.lock().unwrap_or_else(|e| e.into_inner()).push(tid);
                    }
                })
                .build()
                .ok()?;
            Some(Helpers { pool, tids })
        })
        .as_ref()
}

/// Runs `each(i, band, scratch)` once for every band `i`, on the calling thread and on up to
/// `helpers_wanted` helpers, which take the bands in turn until none is left ([`run_beside`]).
/// A thread makes its `scratch` with `make` when it takes its first band and keeps it for the
/// next ones.
pub(crate) fn take_in_turn<T, S, M, F>(bands: Vec<T>, helpers_wanted: usize, make: M, each: F)
where
    T: Send,
    M: Fn() -> S + Sync,
    F: Fn(usize, T, &mut S) + Sync,
{
    let helpers_wanted = helpers_wanted.min(bands.len().saturating_sub(1));
    let bands: Vec<Mutex<Option<T>>> = bands.into_iter().map(|b| Mutex::new(Some(b))).collect();
    let next = AtomicUsize::new(0);
    run_beside(helpers_wanted, || {
        let mut scratch = None;
        loop {
            let i = next.fetch_add(1, Ordering::Relaxed);
            let Some(band) = bands.get(i) else { break };
            let band = band
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .take()
                .expect("each band is taken once");
            each(i, band, scratch.get_or_insert_with(&make));
        }
    });
}

/// Runs `work` on the calling thread and on up to `helpers_wanted` helpers, and returns once the
/// caller's call has returned and so has every helper's call that had started by then. `work`
/// must take what is left to do and return when nothing is: the caller's call alone finishes
/// the job, and a helper that has not started when it returns never runs `work` at all.
///
/// That last rule is why this is not a rayon scope, which waits for every spawned job to run: a
/// helper steered onto a CPU that another process's thread (or ONNX Runtime's spinning workers,
/// right after a session run) keeps busy may not be scheduled for milliseconds, and the caller
/// would wait for it with nothing left to do. A panic in a helper's call is raised again on the
/// caller's thread.
pub(super) fn run_beside<F: Fn() + Sync>(helpers_wanted: usize, work: F) {
    let Some(h) = helpers().filter(|_| helpers_wanted > 0) else {
        work();
        return;
    };
    let _ = steer_away_from_caller(&h.tids);
    let shared = Arc::new(Shared {
        state: AtomicUsize::new(0),
        work: {
            let work: &(dyn Fn() + Sync) = &work;
            // SAFETY: the pointer is dereferenced only by a helper that registered itself in
            // `state` before CLOSED was set, and this function does not return (so `work` lives)
            // until every registered helper has deregistered (see `Shared`).
            unsafe { std::mem::transmute::<&(dyn Fn() + Sync), *const (dyn Fn() + Sync)>(work) }
        },
        finished: (Mutex::new(()), Condvar::new()),
        panic: Mutex::new(None),
    });
    for _ in 0..helpers_wanted.min(h.pool.current_num_threads()) {
        let shared = shared.clone();
        h.pool.spawn(move || shared.help());
    }
    // The caller's own call; a panic here still closes the job before it unwinds further, so no
    // helper starts on a `work` that is going away.
    let mine = std::panic::catch_unwind(std::panic::AssertUnwindSafe(&work));
    shared.state.fetch_or(CLOSED, Ordering::SeqCst);
    let (lock, finished) = &shared.finished;
    let mut guard = lock.lock().unwrap_or_else(|e| e.into_inner());
    while shared.state.load(Ordering::SeqCst) != CLOSED {
        guard = finished.wait(guard).unwrap_or_else(|e| e.into_inner());
    }
    drop(guard);
    if let Err(payload) = mine {
        std::panic::resume_unwind(payload);
    }
    let theirs = shared
        .panic
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .take();
    if let Some(payload) = theirs {
        std::panic::resume_unwind(payload);
    }
}

/// Set in [`Shared::state`] once the caller's call has returned: helpers that start later leave.
const CLOSED: usize = 1;
/// One running helper in [`Shared::state`].
const RUNNING: usize = 2;

/// One [`run_beside`] call, as its helper jobs hold it: `state` counts the helpers running
/// `work` (in units of [`RUNNING`]) and holds [`CLOSED`]. A helper registers only while the job
/// is open and dereferences `work` only while registered; the caller, after closing the job,
/// waits until no helper is registered, so `work` outlives every use of the pointer. The last
/// helper to leave a closed job signals `finished` under its lock, so the caller cannot miss it.
struct Shared {
    state: AtomicUsize,
    work: *const (dyn Fn() + Sync),
    finished: (Mutex<()>, Condvar),
    panic: Mutex<Option<Box<dyn std::any::Any + Send>>>,
}

// SAFETY: `work` points to a `Sync` closure, used from other threads only under the protocol
// above; the other fields are Send and Sync.
unsafe impl Send for Shared {}
unsafe impl Sync for Shared {}

impl Shared {
    /// A helper's part: register unless the job is closed, run `work`, deregister.
    fn help(&self) {
        let mut state = self.state.load(Ordering::SeqCst);
        loop {
            if state & CLOSED != 0 {
                return;
            }
            match self.state.compare_exchange_weak(
                state,
                state + RUNNING,
                Ordering::SeqCst,
                Ordering::SeqCst,
            ) {
                Ok(_) => break,
                Err(now) => state = now,
            }
        }
        // SAFETY: registered while open, so the caller is still inside `run_beside` and waits
        // for this helper before `work` goes away.
        let work = unsafe { &*self.work };
        if let Err(payload) = std::panic::catch_unwind(std::panic::AssertUnwindSafe(work)) {
            *self.panic.lock().unwrap_or_else(|e| e.into_inner()) = Some(payload);
        }
        if self.state.fetch_sub(RUNNING, Ordering::SeqCst) - RUNNING == CLOSED {
            let _guard = self.finished.0.lock().unwrap_or_else(|e| e.into_inner());
            self.finished.1.notify_all();
        }
    }
}

/// Allows the helpers every CPU the calling thread may use except the one it is on now; returns
/// that CPU, or `None` where nothing was changed.
fn steer_away_from_caller(tids: &Mutex<Vec<i32>>) -> Option<usize> {
    crate::platform::keep_off_this_cpu(&tids.lock().unwrap_or_else(|e| e.into_inner()))
}

#[cfg(all(test, target_os = "linux"))]
mod tests {
    use super::*;

    /// The calling thread's CPUs, as a list.
    fn allowed() -> Vec<usize> {
        // SAFETY: a zeroed cpu_set_t of the size passed.
        unsafe {
            let mut set: libc::cpu_set_t = std::mem::zeroed();
            assert_eq!(
                libc::sched_getaffinity(0, std::mem::size_of_val(&set), &mut set),
                0
            );
            (0..libc::CPU_SETSIZE as usize)
                .filter(|&c| libc::CPU_ISSET(c, &set))
                .collect()
        }
    }

    #[test]
    fn helpers_run_on_the_callers_cpus_except_its_own() {
        let Some(h) = helpers() else {
            eprintln!("one CPU: no helpers to steer");
            return;
        };
        let mine = allowed();
        // The helpers record their ids as they start; wait until every one has.
        let threads = h.pool.current_num_threads();
        while h.tids.lock().unwrap().len() < threads {
            std::thread::yield_now();
        }
        let excluded = steer_away_from_caller(&h.tids).expect("two or more CPUs to choose from");
        let seen = Mutex::new(Vec::new());
        h.pool.in_place_scope(|s| {
            for _ in 0..threads {
                s.spawn(|_| {
                    if rayon::current_thread_index().is_some() {
                        seen.lock().unwrap().push(allowed());
                    }
                });
            }
        });
        // Other tests preprocess at the same time and steer the helpers from their own CPU, so a
        // helper's CPUs are the test process's less one of them: the one `excluded` names unless
        // another caller steered in between.
        assert!(mine.contains(&excluded));
        let seen = seen.into_inner().unwrap();
        assert!(!seen.is_empty());
        for helper in seen {
            let missing: Vec<usize> = mine
                .iter()
                .copied()
                .filter(|c| !helper.contains(c))
                .collect();
            assert!(
                helper.iter().all(|c| mine.contains(c)),
                "{helper:?} within {mine:?}"
            );
            assert_eq!(
                missing.len(),
                1,
                "a helper may run on every CPU but its caller's"
            );
        }
    }

    #[test]
    fn the_caller_finishes_the_job_and_a_helpers_panic_reaches_it() {
        if helpers().is_none() {
            eprintln!("one CPU: no helpers");
            return;
        }
        // Units taken in turn, as bands are: each done exactly once, whoever takes it.
        let units: Vec<AtomicUsize> = (0..200).map(|_| AtomicUsize::new(0)).collect();
        let next = AtomicUsize::new(0);
        run_beside(4, || {
            while let Some(unit) = units.get(next.fetch_add(1, Ordering::Relaxed)) {
                unit.fetch_add(1, Ordering::Relaxed);
                std::thread::sleep(std::time::Duration::from_micros(50));
            }
        });
        assert!(units.iter().all(|u| u.load(Ordering::Relaxed) == 1));
        // A helper's panic, once a helper has started (the caller waits for one, up to 10 s).
        let started = std::sync::atomic::AtomicBool::new(false);
        let caught = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            run_beside(1, || {
                if rayon::current_thread_index().is_some() {
                    started.store(true, Ordering::SeqCst);
                    panic!("a helper's panic");
                }
                let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
                while !started.load(Ordering::SeqCst) && std::time::Instant::now() < deadline {
                    std::thread::yield_now();
                }
            })
        }));
        let payload = caught.expect_err("the helper's panic is raised on the caller");
        assert_eq!(crate::panics::message(payload.as_ref()), "a helper's panic");
        // And the pool still serves calls after it.
        let calls = AtomicUsize::new(0);
        run_beside(1, || {
            calls.fetch_add(1, Ordering::Relaxed);
        });
        assert!(calls.into_inner() >= 1);
    }
}
