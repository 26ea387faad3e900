//! Statistics and timing, the one copy every benchmark uses: medians with min and max,
//! percentiles, interleaved rounds, throughput windows.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};
use std::sync::Barrier;
use std::time::{Duration, Instant};

use serde_json::{json, Value};

#[derive(Clone, Debug)]
pub struct Stat {
    pub median: f64,
    pub min: f64,
    pub max: f64,
    pub n: usize,
}

/// The median, min and max of `v` (not empty).
pub fn stat(mut v: Vec<f64>) -> Stat {
    v.sort_by(f64::total_cmp);
    let n = v.len();
    Stat {
        median: median_of_sorted(&v),
        min: v[0],
        max: v[n - 1],
        n,
    }
}

/// The median of `v`: its middle value, or the mean of the two middle ones; NaN if `v` is empty.
pub fn median(v: &[f64]) -> f64 {
    let mut v = v.to_vec();
    v.sort_by(f64::total_cmp);
    median_of_sorted(&v)
}

fn median_of_sorted(v: &[f64]) -> f64 {
    let n = v.len();
    match n {
        0 => f64::NAN,
        _ if n % 2 == 1 => v[n / 2],
        _ => (v[n / 2 - 1] + v[n / 2]) / 2.0,
    }
}

/// The `p` quantile of `v` (not empty), `p` in [0, 1]: the value at the nearest rank.
pub fn percentile(v: &[f64], p: f64) -> f64 {
    let mut v = v.to_vec();
    v.sort_by(f64::total_cmp);
    v[((v.len() - 1) as f64 * p).round() as usize]
}

pub fn stat_json(s: &Option<Stat>) -> Value {
    match s {
        Some(s) => json!({"median": s.median, "min": s.min, "max": s.max, "n": s.n}),
        None => Value::Null,
    }
}

/// Times one call, in ms.
pub fn timed(f: impl FnOnce()) -> f64 {
    let t = Instant::now();
    f();
    t.elapsed().as_secs_f64() * 1e3
}

/// Pause before every timed call of a section that runs ONNX Runtime sessions. After a run, a
/// session's intra-op threads spin (ONNX Runtime's default) for some 10–30 ms here; without the
/// pause one contestant's spinning threads steal the cores of the next one (measured: a plain
/// decoder run interleaved with the library's went from 20 ms alone to 33–37 ms with pauses of
/// 0–10 ms, and back to 20 ms with 30 ms). Spinning that hits the library's own work inside one
/// call (its post-processing right after its decoder run) is not hidden: it is in the figure.
pub const SETTLE_ORT: Duration = Duration::from_millis(40);
/// Pause before every timed call of the other sections.
pub const SETTLE: Duration = Duration::from_millis(2);
/// Pause before every timed call of the sections where the peer's OpenCV runs: its worker threads
/// spin after a call too, and would otherwise steal the library's cores in the next call.
pub const SETTLE_CV: Duration = Duration::from_millis(40);

/// Runs every closure `warmup` times, then `runs` rounds in which each runs once (the order
/// rotated every round). Each closure times itself (in ms) and returns the time, so the peer's
/// time is measured inside the peer. Returns the statistics per closure (None if a call failed).
pub fn interleaved(
    settle: Duration,
    warmup: usize,
    runs: usize,
    fs: &mut [&mut dyn FnMut() -> f64],
) -> Vec<Option<Stat>> {
    for _ in 0..warmup {
        for f in fs.iter_mut() {
            std::thread::sleep(settle);
            f();
        }
    }
    let k = fs.len();
    let mut times = vec![Vec::with_capacity(runs); k];
    for round in 0..runs {
        for j in 0..k {
            let i = (j + round) % k;
            std::thread::sleep(settle);
            times[i].push((fs[i])());
        }
    }
    times
        .into_iter()
        .map(|v| {
            if v.iter().any(|x| !x.is_finite()) {
                None
            } else {
                Some(stat(v))
            }
        })
        .collect()
}

/// Calls per second of `threads` threads calling `f(thread index)` back to back for `window`,
/// after a warm-up call per thread.
pub fn throughput(threads: usize, window: Duration, f: &(dyn Fn(usize) + Sync)) -> f64 {
    std::thread::sleep(SETTLE_ORT);
    let count = AtomicU64::new(0);
    let stop = AtomicBool::new(false);
    let barrier = Barrier::new(threads + 1);
    let start = std::thread::scope(|s| {
        for t in 0..threads {
            let (count, stop, barrier) = (&count, &stop, &barrier);
            s.spawn(move || {
                f(t);
                barrier.wait();
                while !stop.load(Relaxed) {
                    f(t);
                    count.fetch_add(1, Relaxed);
                }
            });
        }
        barrier.wait();
        let start = Instant::now();
        std::thread::sleep(window);
        stop.store(true, Relaxed);
        start
    });
    // Calls in flight when the window closed finish after it: they count, and so does their time.
    count.load(Relaxed) as f64 / start.elapsed().as_secs_f64()
}
