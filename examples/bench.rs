//! The benchmark of issue 9: the library against the peer pipeline (samexporter / X-AnyLabeling
//! in Python: OpenCV + numpy + ONNX Runtime Python) and against floors (memory bandwidth, ONNX
//! Runtime alone, plain file I/O), in one run on the bench models and a deterministic 1920×1080
//! photo-like image (written to out/bench_image.ppm, so both sides use the same bytes). Prints a
//! table and writes it as JSON (out/bench.json) and as a PNG chart (out/bench.png, drawn by
//! tools/bench_chart.py).
//!
//!     scripts/bench.sh [--quick]            # the documented command (set-up, build, run)
//!     cargo run --release --example bench [-- --quick] [-- --out DIR]
//!                                           # the same, with a Rust-side allocation counter only
//!
//! Every figure is the median of repeated runs after warm-up, with min and max. The library, the
//! peer and the floor run interleaved, round by round (the order rotated every round), so that
//! load from other processes hits all of them alike, and ratios are computed pair by pair in the
//! same run. The peer is a Python co-process (tools/bench_peer.py) driven one command per line;
//! it times its own pipeline code. Each timed call is preceded by a pause (40 ms where ONNX
//! Runtime sessions run: their intra-op threads spin after a run and would otherwise steal the
//! next contestant's cores). The CPU used by other processes during each section is printed.
//!
//! Zero copies of the embedding per predict are shown, not assumed: bytes requested from the heap
//! during one predict are counted by a counting #[global_allocator] (Rust side) and, when
//! scripts/bench.sh preloads tools/bench_alloc_count.c, by a process-wide malloc counter that
//! also sees ONNX Runtime's C++ allocations; a control (an explicit copy of the embedding through
//! ONNX Runtime, `Embedding::copy_to_host`) shows that the counter does see a 16 MiB copy when
//! one is made.
//!
//! Resident memory of 1/2/4/8 encoder sessions (shared weights, copied weights, naive ONNX
//! Runtime sessions) is measured in child processes of this binary (`--memory-child`), one per
//! configuration, so that the figures do not contaminate each other.

use std::alloc::{GlobalAlloc, Layout, System};
use std::hint::black_box;
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, Barrier, Mutex};
use std::time::{Duration, Instant};

use ort::session::builder::GraphOptimizationLevel;
use ort::session::Session;
use ort::value::{DynValue, Tensor};
use serde_json::{json, Value};

use sam2::device::Optimization;
use sam2::device::WeightSharing;
use sam2::embedding::EmbeddingTensor;
use sam2::{
    Embedding, Encoder, EncoderOptions, ImageView, PixelFormat, Point, PredictOptions, Predictor,
    PredictorOptions, Prompt,
};

type Res<T> = Result<T, Box<dyn std::error::Error>>;

const W: usize = 1920;
const H: usize = 1080;
const SIZE: usize = 1024;
const LOW_RES: usize = 256;
/// The click: the centre of the large ellipse drawn by `make_image`.
const CLICK: (f32, f32) = (1250.0, 620.0);

// ------------------------------------------------------------------------------------------------
// Allocation counting
// ------------------------------------------------------------------------------------------------

struct CountingAlloc;
static RUST_BYTES: AtomicU64 = AtomicU64::new(0);
static RUST_CALLS: AtomicU64 = AtomicU64::new(0);

// SAFETY: forwards every call to the system allocator unchanged; only counts.
unsafe impl GlobalAlloc for CountingAlloc {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        RUST_BYTES.fetch_add(layout.size() as u64, Relaxed);
        RUST_CALLS.fetch_add(1, Relaxed);
        System.alloc(layout)
    }
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        RUST_BYTES.fetch_add(layout.size() as u64, Relaxed);
        RUST_CALLS.fetch_add(1, Relaxed);
        System.alloc_zeroed(layout)
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        System.dealloc(ptr, layout)
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        RUST_BYTES.fetch_add(new_size as u64, Relaxed);
        RUST_CALLS.fetch_add(1, Relaxed);
        System.realloc(ptr, layout, new_size)
    }
}

#[global_allocator]
static GLOBAL: CountingAlloc = CountingAlloc;

/// The process-wide counter of tools/bench_alloc_count.c, when it is preloaded.
struct ProcessCounter {
    bytes: unsafe extern "C" fn() -> u64,
    calls: unsafe extern "C" fn() -> u64,
}

fn process_counter() -> Option<ProcessCounter> {
    // SAFETY: dlsym on the global scope; the symbols, when present, have exactly these signatures.
    unsafe {
        let b = libc::dlsym(libc::RTLD_DEFAULT, c"bench_alloc_bytes".as_ptr());
        let c = libc::dlsym(libc::RTLD_DEFAULT, c"bench_alloc_calls".as_ptr());
        if b.is_null() || c.is_null() {
            return None;
        }
        Some(ProcessCounter {
            bytes: std::mem::transmute::<*mut libc::c_void, unsafe extern "C" fn() -> u64>(b),
            calls: std::mem::transmute::<*mut libc::c_void, unsafe extern "C" fn() -> u64>(c),
        })
    }
}

#[derive(Clone, Copy, Default)]
struct Counts {
    rust_bytes: u64,
    rust_calls: u64,
    proc_bytes: u64,
    proc_calls: u64,
    minflt: u64,
}

fn minor_faults() -> u64 {
    let mut usage = std::mem::MaybeUninit::<libc::rusage>::zeroed();
    // SAFETY: getrusage fills the struct.
    unsafe {
        libc::getrusage(libc::RUSAGE_SELF, usage.as_mut_ptr());
        usage.assume_init().ru_minflt as u64
    }
}

fn counts(pc: &Option<ProcessCounter>) -> Counts {
    let (proc_bytes, proc_calls) = match pc {
        // SAFETY: plain reads of the shim's counters.
        Some(p) => unsafe { ((p.bytes)(), (p.calls)()) },
        None => (0, 0),
    };
    Counts {
        rust_bytes: RUST_BYTES.load(Relaxed),
        rust_calls: RUST_CALLS.load(Relaxed),
        proc_bytes,
        proc_calls,
        minflt: minor_faults(),
    }
}

fn delta(a: Counts, b: Counts) -> Counts {
    Counts {
        rust_bytes: b.rust_bytes - a.rust_bytes,
        rust_calls: b.rust_calls - a.rust_calls,
        proc_bytes: b.proc_bytes - a.proc_bytes,
        proc_calls: b.proc_calls - a.proc_calls,
        minflt: b.minflt - a.minflt,
    }
}

/// Median of each counter over `runs` calls of `f` (after one warm-up call).
fn count_per_call(pc: &Option<ProcessCounter>, runs: usize, mut f: impl FnMut()) -> Counts {
    f();
    let mut all = Vec::new();
    for _ in 0..runs {
        let a = counts(pc);
        f();
        all.push(delta(a, counts(pc)));
    }
    let med = |sel: fn(&Counts) -> u64| {
        let mut v: Vec<u64> = all.iter().map(sel).collect();
        v.sort_unstable();
        v[v.len() / 2]
    };
    Counts {
        rust_bytes: med(|c| c.rust_bytes),
        rust_calls: med(|c| c.rust_calls),
        proc_bytes: med(|c| c.proc_bytes),
        proc_calls: med(|c| c.proc_calls),
        minflt: med(|c| c.minflt),
    }
}

// ------------------------------------------------------------------------------------------------
// Statistics and timing
// ------------------------------------------------------------------------------------------------

#[derive(Clone, Debug)]
struct Stat {
    median: f64,
    min: f64,
    max: f64,
    n: usize,
}

fn stat(mut v: Vec<f64>) -> Stat {
    v.sort_by(f64::total_cmp);
    let n = v.len();
    let median = if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    };
    Stat {
        median,
        min: v[0],
        max: v[n - 1],
        n,
    }
}

fn stat_json(s: &Option<Stat>) -> Value {
    match s {
        Some(s) => json!({"median": s.median, "min": s.min, "max": s.max, "n": s.n}),
        None => Value::Null,
    }
}

/// Times one call, in ms.
fn timed(f: impl FnOnce()) -> f64 {
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
const SETTLE_ORT: Duration = Duration::from_millis(40);
/// Pause before every timed call of the other sections.
const SETTLE: Duration = Duration::from_millis(2);
/// Pause before every timed call of the sections where the peer's OpenCV runs: its worker threads
/// spin after a call too, and would otherwise steal the library's cores in the next call.
const SETTLE_CV: Duration = Duration::from_millis(40);

/// Runs every closure `warmup` times, then `runs` rounds in which each runs once (the order
/// rotated every round). Each closure times itself (in ms) and returns the time, so the peer's
/// time is measured inside the peer. Returns the statistics per closure (None if a call failed).
fn interleaved(
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
fn throughput(threads: usize, window: Duration, f: &(dyn Fn(usize) + Sync)) -> f64 {
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

// ------------------------------------------------------------------------------------------------
// Inputs
// ------------------------------------------------------------------------------------------------

/// A deterministic photo-like RGB image: sky and ground gradients with a wavy horizon, shaded
/// shapes, and per-pixel noise.
fn make_image(w: usize, h: usize) -> Vec<u8> {
    let mut state = 0x9E37_79B9_7F4A_7C15u64;
    let mut rand = move || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        state
    };
    // (kind, cx, cy, rx, ry, rgb): 0 = ellipse, 1 = rectangle.
    let shapes: [(u8, f32, f32, f32, f32, [f32; 3]); 7] = [
        (0, 1250.0, 620.0, 230.0, 160.0, [225.0, 120.0, 40.0]),
        (1, 300.0, 700.0, 180.0, 240.0, [60.0, 70.0, 160.0]),
        (0, 700.0, 250.0, 110.0, 110.0, [250.0, 240.0, 190.0]),
        (1, 1650.0, 850.0, 200.0, 120.0, [150.0, 40.0, 60.0]),
        (0, 850.0, 820.0, 140.0, 90.0, [40.0, 150.0, 140.0]),
        (1, 1500.0, 300.0, 90.0, 160.0, [120.0, 120.0, 125.0]),
        (0, 1000.0, 580.0, 60.0, 60.0, [240.0, 60.0, 180.0]),
    ];
    let mut px = vec![0u8; w * h * 3];
    for y in 0..h {
        let fy = y as f32 / h as f32;
        for x in 0..w {
            let fx = x as f32 / w as f32;
            let horizon = 0.42 + 0.04 * (fx * 9.0).sin() + 0.02 * (fx * 23.0).cos();
            let mut c = if fy < horizon {
                [70.0 + 120.0 * fy, 130.0 + 90.0 * fy, 235.0 - 30.0 * fy]
            } else {
                let t = (fx * 31.0 + fy * 11.0).sin() * 0.5 + 0.5;
                [
                    90.0 + 50.0 * t + 40.0 * fy,
                    120.0 + 40.0 * (1.0 - t),
                    50.0 + 20.0 * t,
                ]
            };
            for &(kind, cx, cy, rx, ry, rgb) in &shapes {
                let (dx, dy) = ((x as f32 - cx) / rx, (y as f32 - cy) / ry);
                let d = if kind == 0 {
                    (dx * dx + dy * dy).sqrt()
                } else {
                    dx.abs().max(dy.abs())
                };
                if d <= 1.0 {
                    let shade = 0.75 + 0.25 * (1.0 - d) - 0.1 * dy;
                    c = [rgb[0] * shade, rgb[1] * shade, rgb[2] * shade];
                }
            }
            let i = (y * w + x) * 3;
            for k in 0..3 {
                let noise = (rand() % 21) as f32 - 10.0;
                px[i + k] = (c[k] + noise).clamp(0.0, 255.0) as u8;
            }
        }
    }
    px
}

fn write_ppm(path: &Path, rgb: &[u8], w: usize, h: usize) -> Res<()> {
    let mut f = std::fs::File::create(path)?;
    write!(f, "P6\n{w} {h}\n255\n")?;
    f.write_all(rgb)?;
    Ok(())
}

fn write_f32(path: &Path, v: &[f32]) -> Res<()> {
    let bytes: Vec<u8> = v.iter().flat_map(|x| x.to_le_bytes()).collect();
    std::fs::write(path, bytes)?;
    Ok(())
}

/// The pair to measure: `SAM2_BENCH_ENCODER`/`SAM2_BENCH_DECODER` when set, else the real SAM2.1
/// hiera-tiny export by samexporter (tools/setup-real.sh), else the generated bench pair.
fn bench_models() -> (PathBuf, PathBuf) {
    if let (Ok(e), Ok(d)) = (
        std::env::var("SAM2_BENCH_ENCODER"),
        std::env::var("SAM2_BENCH_DECODER"),
    ) {
        return (e.into(), d.into());
    }
    if let Ok(real) = std::env::var("SAM2_REAL_MODELS") {
        let real = PathBuf::from(real);
        return (
            real.join("sam2.1_hiera_tiny.encoder.onnx"),
            real.join("sam2.1_hiera_tiny.decoder.onnx"),
        );
    }
    let models = PathBuf::from(std::env::var("SAM2_MODELS").unwrap_or_else(|_| "models".into()));
    (
        models.join("bench_a_encoder.onnx"),
        models.join("bench_a_decoder.onnx"),
    )
}

fn plain_session(path: &Path, level: Optimization, intra: Option<usize>) -> Res<Session> {
    let env = sam2::runtime::environment()?;
    let mut builder = Session::builder(env)?
        .with_optimization_level(match level {
            Optimization::None => GraphOptimizationLevel::Disable,
            Optimization::Basic => GraphOptimizationLevel::Level1,
            Optimization::All => GraphOptimizationLevel::All,
        })
        .map_err(ort::Error::<()>::from)?;
    if let Some(n) = intra {
        builder = builder
            .with_intra_threads(n)
            .map_err(ort::Error::<()>::from)?;
    }
    Ok(builder.commit_from_file(path)?)
}

fn tensor_of(t: &EmbeddingTensor) -> Res<DynValue> {
    let bytes = t.host_bytes()?;
    let data: Vec<f32> = bytes
        .chunks_exact(4)
        .map(|c| f32::from_ne_bytes([c[0], c[1], c[2], c[3]]))
        .collect();
    Ok(Tensor::from_array((t.shape().to_vec(), data))?.into_dyn())
}

/// Ready decoder inputs for ONNX Runtime alone: the embedding (owned copies made once) and the
/// prompt of one click, in the 1024 frame.
struct DecoderFeed {
    values: Vec<(String, DynValue)>,
}

impl DecoderFeed {
    fn new(embedding: &Embedding) -> Res<Self> {
        let mut values = Vec::new();
        for (name, t) in embedding
            .family()
            .tensor_names()
            .iter()
            .zip(embedding.tensors())
        {
            values.push((name.to_string(), tensor_of(t)?));
        }
        let (x, y) = (
            CLICK.0 / W as f32 * SIZE as f32,
            CLICK.1 / H as f32 * SIZE as f32,
        );
        values.push((
            "point_coords".into(),
            Tensor::from_array(([1usize, 1, 2], vec![x, y]))?.into_dyn(),
        ));
        values.push((
            "point_labels".into(),
            Tensor::from_array(([1usize, 1], vec![1.0f32]))?.into_dyn(),
        ));
        values.push((
            "mask_input".into(),
            Tensor::from_array((
                [1usize, 1, LOW_RES, LOW_RES],
                vec![0.0f32; LOW_RES * LOW_RES],
            ))?
            .into_dyn(),
        ));
        values.push((
            "has_mask_input".into(),
            Tensor::from_array(([1usize], vec![0.0f32]))?.into_dyn(),
        ));
        Ok(DecoderFeed { values })
    }

    fn run(&self, session: &mut Session) {
        let inputs: Vec<(
            std::borrow::Cow<'_, str>,
            ort::session::SessionInputValue<'_>,
        )> = self
            .values
            .iter()
            .map(|(n, v)| (std::borrow::Cow::from(n.as_str()), v.into()))
            .collect();
        let out = session.run(inputs).expect("decoder run");
        black_box(&out);
    }

    /// A run followed by the library's own post-processing functions: best mask by IoU,
    /// `upsample_threshold` to the image size, `box_and_area`. The equal-work floor of a predict.
    fn run_post(&self, session: &mut Session, mask: &mut [u8]) {
        let inputs: Vec<(
            std::borrow::Cow<'_, str>,
            ort::session::SessionInputValue<'_>,
        )> = self
            .values
            .iter()
            .map(|(n, v)| (std::borrow::Cow::from(n.as_str()), v.into()))
            .collect();
        let out = session.run(inputs).expect("decoder run");
        let (_, iou) = out["iou_predictions"]
            .try_extract_tensor::<f32>()
            .expect("iou");
        let best = (0..iou.len()).fold(0, |b, i| if iou[i] > iou[b] { i } else { b });
        let (_, masks) = out["masks"].try_extract_tensor::<f32>().expect("masks");
        let n = LOW_RES * LOW_RES;
        sam2::test_support::upsample_threshold(
            &masks[best * n..(best + 1) * n],
            LOW_RES,
            LOW_RES,
            W,
            H,
            mask,
        );
        black_box(sam2::test_support::box_and_area(mask, W));
    }
}

fn click_prompt() -> Vec<Prompt> {
    vec![Prompt {
        points: vec![Point {
            x: CLICK.0,
            y: CLICK.1,
            positive: true,
        }],
        ..Default::default()
    }]
}

/// The memory-bandwidth floor of preprocessing: one read of the input and one write of the
/// output, split over `threads` threads.
fn bandwidth_floor(input: &[u8], out: &mut [f32], threads: usize) {
    let run = |inp: &[u8], o: &mut [f32]| {
        let mut acc = 0u64;
        for c in inp.chunks_exact(8) {
            acc = acc.wrapping_add(u64::from_ne_bytes(c.try_into().unwrap()));
        }
        black_box(acc);
        o.fill(black_box(0.5));
        black_box(&o[0]);
    };
    if threads <= 1 {
        run(input, out);
        return;
    }
    let ic = input.len().div_ceil(threads).next_multiple_of(8);
    let oc = out.len().div_ceil(threads);
    std::thread::scope(|s| {
        for (i, o) in input.chunks(ic).zip(out.chunks_mut(oc)) {
            s.spawn(move || run(i, o));
        }
    });
}

fn rss_anon_mib() -> f64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find(|l| l.starts_with("RssAnon:"))
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|v| v.parse::<f64>().ok())
        .map_or(f64::NAN, |kb| kb / 1024.0)
}

fn load_average() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|s| s.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_else(|_| "?".into())
}

/// Child process: resident anonymous memory added by creating `n` encoder sessions.
fn memory_child(mode: &str, n: usize, model: &str) -> Res<()> {
    sam2::runtime::init(None)?;
    let _env = sam2::runtime::environment()?;
    let base = rss_anon_mib();
    let t = Instant::now();
    let mut keep_enc = Vec::new();
    let mut keep_plain = Vec::new();
    for _ in 0..n {
        match mode {
            "naive" => keep_plain.push(plain_session(Path::new(model), Optimization::All, None)?),
            _ => {
                let mut options = EncoderOptions::default();
                options.session.weights = if mode == "copy" {
                    WeightSharing::Copy
                } else {
                    WeightSharing::Shared
                };
                keep_enc.push(Encoder::new(model, &options)?);
            }
        }
    }
    let secs = t.elapsed().as_secs_f64();
    // Live memory, not what the C allocator keeps of what was freed (the library's one-off graph
    // optimisation frees a model's worth of transient buffers): give that back first, on both
    // sides.
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: malloc_trim only returns free memory to the system.
    unsafe {
        libc::malloc_trim(0);
    }
    println!("RESULT {:.1} {:.2}", rss_anon_mib() - base, secs);
    Ok(())
}

// ------------------------------------------------------------------------------------------------
// The peer co-process (tools/bench_peer.py) and the load of other processes
// ------------------------------------------------------------------------------------------------

struct Peer {
    child: std::process::Child,
    stdin: std::process::ChildStdin,
    stdout: std::io::BufReader<std::process::ChildStdout>,
    error: Option<String>,
}

impl Peer {
    fn start(python: &str, image: &Path, encoder: &Path, decoder: &Path) -> Option<Peer> {
        let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tools/bench_peer.py");
        let child = Command::new(python)
            .arg(&script)
            .arg("--image")
            .arg(image)
            .arg("--encoder")
            .arg(encoder)
            .arg("--decoder")
            .arg(decoder)
            .args(["--click", &format!("{},{}", CLICK.0, CLICK.1)])
            .env_remove("LD_PRELOAD")
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .spawn();
        let mut child = match child {
            Ok(c) => c,
            Err(e) => {
                eprintln!(
                    "[bench] cannot start the peer ({python} {}): {e}; its cells stay empty",
                    script.display()
                );
                return None;
            }
        };
        let stdin = child.stdin.take()?;
        let stdout = std::io::BufReader::new(child.stdout.take()?);
        let mut peer = Peer {
            child,
            stdin,
            stdout,
            error: None,
        };
        match peer.read() {
            Some(v) if v.get("ready").is_some() => Some(peer),
            _ => {
                eprintln!("[bench] the peer did not start; its cells stay empty");
                let _ = peer.child.kill();
                let _ = peer.child.wait();
                None
            }
        }
    }

    fn read(&mut self) -> Option<Value> {
        use std::io::BufRead;
        let mut line = String::new();
        match self.stdout.read_line(&mut line) {
            Ok(n) if n > 0 => serde_json::from_str(&line).ok(),
            _ => None,
        }
    }

    /// Sends one command; None (and the error kept) when the peer failed.
    fn call(&mut self, cmd: &str) -> Option<Value> {
        if self.error.is_some() {
            return None;
        }
        if writeln!(self.stdin, "{cmd}")
            .and_then(|_| self.stdin.flush())
            .is_err()
        {
            self.error = Some(format!("`{cmd}`: the peer is gone"));
            return None;
        }
        match self.read() {
            Some(v) if v.get("error").is_none() => Some(v),
            Some(v) => {
                self.error = Some(format!("`{cmd}`: {}", v["error"]));
                eprintln!("[bench] peer: {}", self.error.as_ref().unwrap());
                None
            }
            None => {
                self.error = Some(format!("`{cmd}`: no reply"));
                eprintln!("[bench] peer: {}", self.error.as_ref().unwrap());
                None
            }
        }
    }

    /// Runs a timed command; its time in ms as the peer measured it (NaN on failure).
    fn ms(&mut self, cmd: &str) -> f64 {
        self.call(cmd)
            .and_then(|v| v.get("ms").and_then(Value::as_f64))
            .unwrap_or(f64::NAN)
    }

    fn pid(&self) -> u32 {
        self.child.id()
    }

    fn quit(mut self) {
        let _ = writeln!(self.stdin, "quit");
        let _ = self.stdin.flush();
        let _ = self.child.wait();
    }
}

/// CPU time (ticks) of this process, its reaped children, and the peer, and of the whole machine.
#[derive(Clone, Copy)]
struct CpuSnap {
    at: Instant,
    machine_busy: u64,
    own: u64,
}

fn proc_ticks(stat_path: &str, with_children: bool) -> u64 {
    let Ok(text) = std::fs::read_to_string(stat_path) else {
        return 0;
    };
    let Some(rest) = text.rfind(')').map(|i| &text[i + 1..]) else {
        return 0;
    };
    let f: Vec<u64> = rest
        .split_whitespace()
        .map(|v| v.parse().unwrap_or(0))
        .collect();
    // After the command: state ppid pgrp session tty tpgid flags minflt cminflt majflt cmajflt
    // utime(11) stime(12) cutime(13) cstime(14).
    if f.len() < 15 {
        return 0;
    }
    f[11] + f[12] + if with_children { f[13] + f[14] } else { 0 }
}

fn cpu_snap(peer_pid: Option<u32>) -> CpuSnap {
    let machine_busy = std::fs::read_to_string("/proc/stat")
        .ok()
        .and_then(|t| {
            let v: Vec<u64> = t
                .lines()
                .next()?
                .split_whitespace()
                .skip(1)
                .map(|x| x.parse().unwrap_or(0))
                .collect();
            // user nice system idle iowait irq softirq steal
            Some(
                v.iter().take(8).sum::<u64>()
                    - v.get(3).copied().unwrap_or(0)
                    - v.get(4).copied().unwrap_or(0),
            )
        })
        .unwrap_or(0);
    let own = proc_ticks("/proc/self/stat", true)
        + peer_pid.map_or(0, |p| proc_ticks(&format!("/proc/{p}/stat"), true));
    CpuSnap {
        at: Instant::now(),
        machine_busy,
        own,
    }
}

/// Cores' worth of CPU used by other processes between two snapshots.
fn other_cores(a: CpuSnap, b: CpuSnap) -> f64 {
    // SAFETY: sysconf has no preconditions.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) }.max(1) as f64;
    let secs = b.at.duration_since(a.at).as_secs_f64().max(1e-3);
    let other =
        b.machine_busy.saturating_sub(a.machine_busy) as f64 - b.own.saturating_sub(a.own) as f64;
    (other / hz / secs).max(0.0)
}

// ------------------------------------------------------------------------------------------------
// Rows of the table
// ------------------------------------------------------------------------------------------------

#[derive(Clone)]
struct Row {
    id: &'static str,
    name: String,
    unit: &'static str,
    library: Option<Stat>,
    peer: Option<Stat>,
    floor: Option<Stat>,
    goal: String,
    met: Option<bool>,
    note: String,
}

impl Row {
    fn new(id: &'static str, name: impl Into<String>, unit: &'static str) -> Self {
        Row {
            id,
            name: name.into(),
            unit,
            library: None,
            peer: None,
            floor: None,
            goal: String::new(),
            met: None,
            note: String::new(),
        }
    }
    fn lib_over_floor(&self) -> Option<f64> {
        Some(self.library.as_ref()?.median / self.floor.as_ref()?.median)
    }
    fn peer_over_lib(&self) -> Option<f64> {
        Some(self.peer.as_ref()?.median / self.library.as_ref()?.median)
    }
    fn to_json(&self) -> Value {
        json!({
            "id": self.id,
            "measurement": self.name,
            "unit": self.unit,
            "library": stat_json(&self.library),
            "peer": stat_json(&self.peer),
            "floor": stat_json(&self.floor),
            "library_over_floor": self.lib_over_floor(),
            "peer_over_library": self.peer_over_lib(),
            "goal": self.goal,
            "met": self.met,
            "note": self.note,
        })
    }
}

fn fmt_num(v: f64) -> String {
    let a = v.abs();
    if a >= 1000.0 {
        format!("{v:.0}")
    } else if a >= 100.0 {
        format!("{v:.1}")
    } else if a >= 10.0 {
        format!("{v:.2}")
    } else if a >= 1.0 {
        format!("{v:.3}")
    } else {
        format!("{v:.4}")
    }
}

fn fmt_cell(s: &Option<Stat>) -> String {
    match s {
        None => "—".into(),
        Some(s) if s.n <= 1 || (s.min == s.max) => fmt_num(s.median),
        Some(s) => format!(
            "{} [{}–{}]",
            fmt_num(s.median),
            fmt_num(s.min),
            fmt_num(s.max)
        ),
    }
}

fn fmt_ratio(r: Option<f64>) -> String {
    r.map_or("—".into(), |r| format!("{r:.3}×"))
}

fn print_table(rows: &[Row]) {
    let headers = [
        "measurement",
        "unit",
        "library",
        "peer",
        "floor",
        "lib/floor",
        "peer/lib",
        "goal",
        "met?",
    ];
    let cells: Vec<[String; 9]> = rows
        .iter()
        .map(|r| {
            [
                r.name.clone(),
                r.unit.to_string(),
                fmt_cell(&r.library),
                fmt_cell(&r.peer),
                fmt_cell(&r.floor),
                fmt_ratio(r.lib_over_floor()),
                fmt_ratio(r.peer_over_lib()),
                if r.goal.is_empty() {
                    "—".into()
                } else {
                    r.goal.clone()
                },
                match r.met {
                    Some(true) => "met".into(),
                    Some(false) => "NOT MET".into(),
                    None => "—".into(),
                },
            ]
        })
        .collect();
    let mut width = headers.map(|h| h.chars().count());
    for c in &cells {
        for (w, s) in width.iter_mut().zip(c.iter()) {
            *w = (*w).max(s.chars().count());
        }
    }
    let line = |c: &[String]| {
        let mut s = String::new();
        for (i, (cell, w)) in c.iter().zip(width.iter()).enumerate() {
            let pad = w - cell.chars().count();
            if i == 0 || i == 1 || i == 7 {
                s.push_str(cell);
                s.push_str(&" ".repeat(pad));
            } else {
                s.push_str(&" ".repeat(pad));
                s.push_str(cell);
            }
            s.push_str("  ");
        }
        println!("{}", s.trim_end());
    };
    line(&headers.map(String::from));
    println!(
        "{}",
        "-".repeat(width.iter().sum::<usize>() + 2 * width.len())
    );
    for c in &cells {
        line(c);
    }
}

// ------------------------------------------------------------------------------------------------
// The run
// ------------------------------------------------------------------------------------------------

/// Per mode (shared, copied, naive): RssAnon added (MiB) and seconds to create the sessions.
type MemoryRow = [Option<(f64, f64)>; 3];

struct Plan {
    pre_runs: usize,
    post_runs: usize,
    enc_runs: usize,
    enc_all_runs: usize,
    pred_runs: usize,
    io_runs: usize,
    tput_windows: usize,
    tput_window: Duration,
    counts: usize,
}

/// Load of other processes per section, for the record.
struct Sections {
    peer_pid: Option<u32>,
    current: Option<(&'static str, CpuSnap)>,
    done: Vec<(&'static str, f64, f64)>,
}

impl Sections {
    fn start(&mut self, name: &'static str) {
        self.finish();
        eprintln!("[bench] {name}");
        self.current = Some((name, cpu_snap(self.peer_pid)));
    }
    fn finish(&mut self) {
        if let Some((name, a)) = self.current.take() {
            let b = cpu_snap(self.peer_pid);
            self.done.push((
                name,
                other_cores(a, b),
                b.at.duration_since(a.at).as_secs_f64(),
            ));
        }
    }
}

fn main() -> Res<()> {
    let args: Vec<String> = std::env::args().collect();
    if args.get(1).map(String::as_str) == Some("--memory-child") {
        return memory_child(&args[2], args[3].parse()?, &args[4]);
    }
    let quick = args.iter().any(|a| a == "--quick");
    let out_dir = args
        .iter()
        .position(|a| a == "--out")
        .and_then(|i| args.get(i + 1))
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("out"));
    std::fs::create_dir_all(&out_dir)?;
    let plan = if quick {
        Plan {
            pre_runs: 8,
            post_runs: 15,
            enc_runs: 2,
            enc_all_runs: 1,
            pred_runs: 8,
            io_runs: 4,
            tput_windows: 2,
            tput_window: Duration::from_millis(700),
            counts: 5,
        }
    } else {
        Plan {
            pre_runs: 25,
            post_runs: 50,
            enc_runs: 4,
            enc_all_runs: 3,
            pred_runs: 40,
            io_runs: 10,
            tput_windows: 3,
            tput_window: Duration::from_millis(1500),
            counts: 15,
        }
    };
    let started = Instant::now();
    let (enc_path, dec_path) = bench_models();
    println!("models: {} and {}", enc_path.display(), dec_path.display());
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
    let load_start = load_average();
    let pc = process_counter();
    let python = std::env::var("SAM2_PYTHON").unwrap_or_else(|_| ".venv/bin/python".into());

    let info = sam2::runtime::init(None)?;
    println!(
        "sam2 bench — ONNX Runtime {} ({}), {threads} cores, load average {load_start} at start{}",
        info.version,
        info.path.display(),
        if quick { ", --quick" } else { "" }
    );
    println!(
        "each figure: median [min–max] of repeated runs after warm-up; library, peer and floor runs interleaved round by round, each call preceded by a {} ms pause where ONNX Runtime sessions run (their threads spin after a run) and {} ms elsewhere",
        SETTLE_ORT.as_millis(),
        SETTLE.as_millis()
    );
    println!(
        "allocation counter: {}",
        if pc.is_some() {
            "process-wide (tools/bench_alloc_count.c preloaded) + Rust global allocator"
        } else {
            "Rust global allocator only (run scripts/bench.sh to preload the process-wide counter)"
        }
    );

    // --- the image and the peer ---------------------------------------------------------------
    let rgb = make_image(W, H);
    let image_path = out_dir.join("bench_image.ppm");
    write_ppm(&image_path, &rgb, W, H)?;
    let view = ImageView::packed(&rgb, W, H, PixelFormat::Rgb)?;
    let mut extra = serde_json::Map::new();
    let peer = std::cell::RefCell::new(Peer::start(&python, &image_path, &enc_path, &dec_path));
    let has_peer = peer.borrow().is_some();
    let peer_ms = |cmd: &str| -> f64 { peer.borrow_mut().as_mut().map_or(f64::NAN, |p| p.ms(cmd)) };
    let peer_call =
        |cmd: &str| -> Option<Value> { peer.borrow_mut().as_mut().and_then(|p| p.call(cmd)) };
    let mut sections = Sections {
        peer_pid: peer.borrow().as_ref().map(Peer::pid),
        current: None,
        done: Vec::new(),
    };

    // --- preprocess ---------------------------------------------------------------------------
    sections.start("preprocess");
    let mut pre_out = vec![0.0f32; 3 * SIZE * SIZE];
    let mut floor_out = vec![0.0f32; 3 * SIZE * SIZE];
    let pre = {
        let mut lib = || timed(|| sam2::test_support::preprocess_into(&view, SIZE, &mut pre_out));
        let mut floor_out2 = floor_out.clone();
        let mut floor1 = || timed(|| bandwidth_floor(&rgb, &mut floor_out, 1));
        let mut floor_n = || timed(|| bandwidth_floor(&rgb, &mut floor_out2, threads));
        let mut p_rgb = || peer_ms("pre");
        let mut p_bgr = || peer_ms("pre_bgr");
        let mut fs: Vec<&mut dyn FnMut() -> f64> = vec![&mut lib, &mut floor1, &mut floor_n];
        if has_peer {
            fs.push(&mut p_rgb);
            fs.push(&mut p_bgr);
        }
        let mut st = interleaved(SETTLE_CV, 3, plan.pre_runs, &mut fs);
        st.resize(5, None);
        st
    };
    // The floor is the faster of one thread and all threads.
    let (floor_pre, floor_threads) = match (&pre[1], &pre[2]) {
        (Some(a), Some(b)) if b.median < a.median => (pre[2].clone(), threads),
        _ => (pre[1].clone(), 1),
    };
    sam2::test_support::preprocess_into(&view, SIZE, &mut pre_out);
    let pre_path = out_dir.join("bench_pre_lib.f32");
    write_f32(&pre_path, &pre_out)?;
    let pre_diff = peer_call(&format!("check_pre {}", pre_path.display()))
        .and_then(|v| v.get("max_abs_diff").and_then(Value::as_f64));
    extra.insert(
        "preprocess_floor".into(),
        json!({"threads_used": floor_threads, "one_thread": stat_json(&pre[1]),
               "all_threads": stat_json(&pre[2]),
               "bytes_read": rgb.len(), "bytes_written": pre_out.len() * 4}),
    );
    drop(floor_out);

    // --- encode -------------------------------------------------------------------------------
    sections.start("encode");
    let t = Instant::now();
    let encoder = Encoder::new(&enc_path, &EncoderOptions::default())?;
    let enc_create_ms = t.elapsed().as_secs_f64() * 1e3;
    let t = Instant::now();
    let mut enc_plain = plain_session(&enc_path, Optimization::All, None)?;
    let enc_plain_create_ms = t.elapsed().as_secs_f64() * 1e3;
    let prepared = Tensor::from_array(([1usize, 3, SIZE, SIZE], pre_out.clone()))?.into_dyn();
    let peer_enc_ok = has_peer && peer_call("init_encoder").is_some();
    eprintln!(
        "[bench]   library e2e, library on a prepared tensor, ONNX Runtime alone{} ({} + 1 warm-up each)",
        if peer_enc_ok { ", peer" } else { "" },
        plan.enc_runs
    );
    let enc = {
        let mut lib = || timed(|| drop(black_box(encoder.encode(&view).expect("encode"))));
        let mut lib_prep = || {
            timed(|| {
                drop(black_box(
                    encoder
                        .encode_prepared(&prepared, W as u32, H as u32)
                        .expect("encode"),
                ))
            })
        };
        let mut floor = || {
            timed(|| {
                let out = enc_plain
                    .run(ort::inputs!["image" => &prepared])
                    .expect("encoder run");
                black_box(&out);
            })
        };
        let mut p = || peer_ms("encode");
        let mut fs: Vec<&mut dyn FnMut() -> f64> = vec![&mut lib, &mut lib_prep, &mut floor];
        if peer_enc_ok {
            fs.push(&mut p);
        }
        let mut st = interleaved(SETTLE_ORT, 1, plan.enc_runs, &mut fs);
        st.resize(4, None);
        st
    };
    let embedding = Arc::new(encoder.encode(&view)?);
    let emb_bytes: usize = embedding.tensors().iter().map(|t| t.byte_len()).sum();
    extra.insert(
        "session_create_ms".into(),
        json!({"library_encoder": enc_create_ms, "plain_encoder": enc_plain_create_ms}),
    );
    drop(enc_plain);

    // --- predict ------------------------------------------------------------------------------
    sections.start("predict");
    // Default options: a pool of one session per core, the first on every core.
    let predictor = Predictor::new(
        &dec_path,
        &PredictorOptions {
            encoder_fingerprint: Some(encoder.fingerprint()),
            ..Default::default()
        },
    )?;
    let dec_plain = std::cell::RefCell::new(plain_session(&dec_path, Optimization::All, None)?);
    let feed = DecoderFeed::new(&embedding)?;
    let prompts = click_prompt();
    let peer_dec_ok = peer_enc_ok && peer_call("init_decoder").is_some();
    let pred = {
        let mut lib = || {
            timed(|| {
                black_box(
                    predictor
                        .predict(&embedding, &prompts, PredictOptions::default())
                        .expect("predict"),
                );
            })
        };
        let mut floor = || timed(|| feed.run(&mut dec_plain.borrow_mut()));
        let mut post_mask = vec![0u8; W * H];
        let mut floor_post =
            || timed(|| feed.run_post(&mut dec_plain.borrow_mut(), &mut post_mask));
        let mut p = || peer_ms("predict");
        let mut fs: Vec<&mut dyn FnMut() -> f64> = vec![&mut lib, &mut floor, &mut floor_post];
        if peer_dec_ok {
            fs.push(&mut p);
        }
        let mut st = interleaved(SETTLE_ORT, 3, plan.pred_runs, &mut fs);
        st.resize(4, None);
        st
    };
    let prediction = predictor.predict(&embedding, &prompts, PredictOptions::default())?;
    extra.insert(
        "library_prediction".into(),
        json!({"score": prediction.scores[0], "box": prediction.boxes[0], "area": prediction.areas[0],
               "candidate": prediction.candidate_index[0]}),
    );
    let logits = prediction.low_res_logits(0).to_vec();
    let logits_path = out_dir.join("bench_logits.f32");
    write_f32(&logits_path, &logits)?;

    // --- postprocess --------------------------------------------------------------------------
    sections.start("postprocess");
    let mut mask = vec![0u8; W * H];
    sam2::test_support::upsample_threshold(&logits, LOW_RES, LOW_RES, W, H, &mut mask);
    let mask_path = out_dir.join("bench_mask_lib.u8");
    std::fs::write(&mask_path, &mask)?;
    let post_diff = peer_call(&format!(
        "load_post {} {}",
        logits_path.display(),
        mask_path.display()
    ))
    .and_then(|v| v.get("differing").and_then(Value::as_u64));
    let mut mask_floor = vec![0u8; W * H];
    let mask_box = mask.clone();
    let post = {
        let mut lib = || {
            timed(|| {
                sam2::test_support::upsample_threshold(&logits, LOW_RES, LOW_RES, W, H, &mut mask);
                black_box(&mask);
            })
        };
        let mut floor = || {
            timed(|| {
                mask_floor.fill(black_box(1));
                black_box(&mask_floor);
            })
        };
        let mut boxes = || {
            timed(|| {
                black_box(sam2::test_support::box_and_area(&mask_box, W));
            })
        };
        let mut scan = || {
            timed(|| {
                let mut acc = 0u64;
                for c in mask_box.chunks_exact(8) {
                    acc = acc.wrapping_add(u64::from_ne_bytes(c.try_into().unwrap()));
                }
                black_box(acc);
            })
        };
        let mut p = || peer_ms("post");
        let mut fs: Vec<&mut dyn FnMut() -> f64> =
            vec![&mut lib, &mut floor, &mut boxes, &mut scan];
        if post_diff.is_some() {
            fs.push(&mut p);
        }
        let mut st = interleaved(SETTLE_CV, 5, plan.post_runs, &mut fs);
        st.resize(5, None);
        st
    };
    let peer_info = peer_call("info");
    if let Some(p) = peer.borrow_mut().take() {
        p.quit();
    }
    sections.peer_pid = None;

    // --- zero copies of the embedding per predict ---------------------------------------------
    sections.start("allocations per predict");
    let per_predict = count_per_call(&pc, plan.counts, || {
        black_box(
            predictor
                .predict(&embedding, &prompts, PredictOptions::default())
                .expect("predict"),
        );
    });
    let per_plain = count_per_call(&pc, plan.counts, || feed.run(&mut dec_plain.borrow_mut()));
    let per_copy = count_per_call(&pc, 3.min(plan.counts), || {
        black_box(embedding.copy_to_host().expect("copy"));
    });
    let counts_json = |c: &Counts| {
        json!({"rust_bytes": c.rust_bytes, "rust_calls": c.rust_calls,
               "process_bytes": if pc.is_some() { json!(c.proc_bytes) } else { Value::Null },
               "process_calls": if pc.is_some() { json!(c.proc_calls) } else { Value::Null },
               "minor_page_faults": c.minflt})
    };
    extra.insert(
        "allocations".into(),
        json!({"embedding_bytes": emb_bytes, "process_wide_counter": pc.is_some(),
               "library_predict": counts_json(&per_predict),
               "ort_alone_decoder_run": counts_json(&per_plain),
               "control_copy_to_host": counts_json(&per_copy)}),
    );
    drop(dec_plain);

    // --- predict throughput: 1 and 2 threads on one predictor (pool 2) and one embedding -----
    sections.start("predict throughput");
    let pool2 = Predictor::new(
        &dec_path,
        &PredictorOptions {
            encoder_fingerprint: Some(encoder.fingerprint()),
            pool_size: Some(2),
            ..Default::default()
        },
    )?;
    let plain_pool: Vec<Mutex<Session>> = (0..2)
        .map(|_| plain_session(&dec_path, Optimization::All, Some(1)).map(Mutex::new))
        .collect::<Res<_>>()?;
    let lib_call = |_: usize| {
        black_box(
            pool2
                .predict(&embedding, &prompts, PredictOptions::default())
                .expect("predict"),
        );
    };
    let plain_call = |t: usize| {
        let mut s = plain_pool[t].lock().unwrap();
        feed.run(&mut s);
    };
    let mut tput = Vec::new();
    for n in [1usize, 2] {
        // Alternate library and floor windows so that both see the same load.
        let (mut lib, mut floor) = (Vec::new(), Vec::new());
        for _ in 0..plan.tput_windows {
            lib.push(throughput(n, plan.tput_window, &lib_call));
            floor.push(throughput(n, plan.tput_window, &plain_call));
        }
        tput.push((n, stat(lib), stat(floor)));
    }
    drop(plain_pool);
    drop(pool2);

    // --- save / load --------------------------------------------------------------------------
    sections.start("save/load");
    let emb_path = out_dir.join("bench_embedding.safetensors");
    let floor_path = out_dir.join("bench_floor_write.bin");
    let write_floor = |staging: &mut Vec<u8>, sync: bool| {
        let mut off = 0;
        for t in embedding.tensors() {
            let b = t.host_bytes().expect("host");
            staging[off..off + b.len()].copy_from_slice(b);
            off += b.len();
        }
        let mut f = std::fs::File::create(&floor_path).expect("create");
        f.write_all(staging).expect("write");
        if sync {
            f.sync_all().expect("fsync");
        }
    };
    let save = {
        let mut staging = vec![0u8; emb_bytes];
        let mut staging2 = vec![0u8; emb_bytes];
        let mut lib = || timed(|| sam2::embedding_file::save(&embedding, &emb_path).expect("save"));
        let mut floor_sync = || timed(|| write_floor(&mut staging, true));
        let mut floor_nosync = || timed(|| write_floor(&mut staging2, false));
        interleaved(
            SETTLE,
            2,
            plan.io_runs,
            &mut [&mut lib, &mut floor_sync, &mut floor_nosync],
        )
    };
    let file_len = std::fs::metadata(&emb_path)?.len() as usize;
    let load = {
        let mut read_buf = vec![0u8; file_len];
        let fp = encoder.fingerprint();
        let mut lib = || {
            timed(|| {
                black_box(sam2::embedding_file::load(&emb_path, Some(fp)).expect("load"));
            })
        };
        let mut floor = || {
            timed(|| {
                let mut f = std::fs::File::open(&emb_path).expect("open");
                f.read_exact(&mut read_buf).expect("read");
                black_box(&read_buf);
            })
        };
        // A load needs new memory for what it reads: the same read into a fresh allocation.
        let mut floor_fresh = || {
            timed(|| {
                let mut fresh = vec![0u8; file_len];
                let mut f = std::fs::File::open(&emb_path).expect("open");
                f.read_exact(&mut fresh).expect("read");
                black_box(&fresh);
            })
        };
        interleaved(
            SETTLE,
            2,
            plan.io_runs,
            &mut [&mut lib, &mut floor, &mut floor_fresh],
        )
    };
    let _ = std::fs::remove_file(&floor_path);
    drop(predictor);
    drop(encoder);

    // --- Optimization::All: the library against a plain session at All -----------------------
    sections.start("Optimization::Basic");
    let (enc_all, pred_all) = {
        let mut options = EncoderOptions::default();
        options.session.optimization = Optimization::Basic;
        let encoder_all = Encoder::new(&enc_path, &options)?;
        let mut plain_all = plain_session(&enc_path, Optimization::Basic, None)?;
        let enc_all = {
            let mut lib = || timed(|| drop(black_box(encoder_all.encode(&view).expect("encode"))));
            let mut floor = || {
                timed(|| {
                    let out = plain_all
                        .run(ort::inputs!["image" => &prepared])
                        .expect("encoder run");
                    black_box(&out);
                })
            };
            interleaved(
                SETTLE_ORT,
                1,
                plan.enc_all_runs,
                &mut [&mut lib, &mut floor],
            )
        };
        drop(plain_all);
        let mut popts = PredictorOptions {
            encoder_fingerprint: Some(encoder_all.fingerprint()),
            ..Default::default()
        };
        popts.session.optimization = Optimization::Basic;
        let predictor_all = Predictor::new(&dec_path, &popts)?;
        let mut dec_all = plain_session(&dec_path, Optimization::Basic, None)?;
        let pred_all = {
            let mut lib = || {
                timed(|| {
                    black_box(
                        predictor_all
                            .predict(&embedding, &prompts, PredictOptions::default())
                            .expect("predict"),
                    );
                })
            };
            let mut floor = || timed(|| feed.run(&mut dec_all));
            interleaved(SETTLE_ORT, 3, plan.pred_runs, &mut [&mut lib, &mut floor])
        };
        (enc_all, pred_all)
    };
    drop(prepared);

    // --- resident memory of N sessions: shared, copied, naive ---------------------------------
    sections.start("resident memory (child processes)");
    let exe = std::env::current_exe()?;
    let weights_mib = std::fs::metadata(&enc_path)?.len() as f64 / 1048576.0;
    let mut memory: Vec<(usize, MemoryRow)> = Vec::new();
    for n in [1usize, 2, 4, 8] {
        let mut per_mode = [None, None, None];
        for (i, mode) in ["shared", "copy", "naive"].iter().enumerate() {
            let out = Command::new(&exe)
                .args(["--memory-child", mode, &n.to_string()])
                .arg(&enc_path)
                .env_remove("LD_PRELOAD")
                .output()?;
            let text = String::from_utf8_lossy(&out.stdout);
            match text.lines().find_map(|l| l.strip_prefix("RESULT ")) {
                Some(r) => {
                    let f: Vec<f64> = r
                        .split_whitespace()
                        .filter_map(|v| v.parse().ok())
                        .collect();
                    per_mode[i] = Some((f[0], f[1]));
                }
                None => eprintln!(
                    "[bench] memory child {mode} {n} failed: {}",
                    String::from_utf8_lossy(&out.stderr)
                ),
            }
        }
        memory.push((n, per_mode));
    }
    sections.finish();

    // --- assemble the table -------------------------------------------------------------------
    let peer_info = peer_info.unwrap_or(Value::Null);
    let mut rows: Vec<Row> = Vec::new();
    let mut r = Row::new(
        "preprocess",
        "Preprocess (1920×1080 RGB → 1024² NCHW f32)",
        "ms",
    );
    r.library = pre[0].clone();
    r.floor = floor_pre;
    r.peer = pre[3].clone();
    r.goal = "≥5× faster than peer; ≤4× floor".into();
    r.met = match (r.peer_over_lib(), r.lib_over_floor()) {
        (Some(po), Some(lf)) => Some(po >= 5.0 && lf <= 4.0),
        (None, Some(lf)) if lf > 4.0 => Some(false),
        _ => None,
    };
    r.note = format!(
        "floor = one read of the {:.1} MB input + one write of the {:.1} MB output ({} thread{}); peer = cv2.resize + numpy on RGB input; samexporter exactly (cvtColor from BGR first): {} ms; max |peer − library| = {} (cv2 rounds the resized image to uint8 and does not antialias)",
        rgb.len() as f64 / 1e6,
        pre_out.len() as f64 * 4.0 / 1e6,
        floor_threads,
        if floor_threads == 1 { "" } else { "s" },
        fmt_cell(&pre[4]),
        pre_diff.map_or("?".into(), |d| format!("{d:.4}"))
    );
    rows.push(r);

    let mut r = Row::new(
        "postprocess",
        "Post-process (256² logits → 1920×1080 mask)",
        "ms",
    );
    r.library = post[0].clone();
    r.floor = post[1].clone();
    r.peer = post[4].clone();
    r.goal = "no slower than cv2.resize+threshold".into();
    r.met = r.peer_over_lib().map(|po| po >= 1.0);
    r.note = format!(
        "the same logits on both sides; floor = one write of the 2 MB mask; pixels differing from cv2's mask: {}",
        post_diff.map_or("?".into(), |d| d.to_string())
    );
    rows.push(r);

    let mut r = Row::new("box_area", "  Box and area of the mask", "ms");
    r.library = post[2].clone();
    r.floor = post[3].clone();
    r.note = "box_and_area on the 1920×1080 mask (part of every predict; the peer computes neither); floor = one read of the mask".into();
    rows.push(r);

    let mut r = Row::new("encode", "Encode e2e (pixels → embedding)", "ms");
    r.library = enc[0].clone();
    r.floor = enc[2].clone();
    r.peer = enc[3].clone();
    r.goal = "≤1.02× ORT alone; faster than peer".into();
    r.met = match (r.lib_over_floor(), r.peer_over_lib()) {
        (Some(lf), Some(po)) => Some(lf <= 1.02 && po > 1.0),
        (Some(lf), None) => Some(lf <= 1.02),
        _ => None,
    };
    r.note = "library: default options (ALL); floor = plain ort Session at ORT's best level (All) run on a ready tensor, no preprocessing; peer = samexporter's client arithmetic in Python (cv2 + numpy float64 + InferenceSession, default options)".into();
    rows.push(r);

    let mut r = Row::new(
        "encode_prepared",
        "  Encode, library on a prepared tensor",
        "ms",
    );
    r.library = enc[1].clone();
    r.floor = enc[2].clone();
    r.note =
        "encode_prepared (no preprocess) against the same floor: the library's own overhead".into();
    rows.push(r);

    let mut r = Row::new("encode_basic", "Encode e2e, Optimization::Basic", "ms");
    r.library = enc_all[0].clone();
    r.floor = enc_all[1].clone();
    r.goal = "≤1.05× ORT alone (Basic)".into();
    r.met = r.lib_over_floor().map(|x| x <= 1.05);
    r.note = "library with session.optimization = Basic against a plain session at Level1".into();
    rows.push(r);

    let mut r = Row::new(
        "predict",
        "Predict e2e (click → 1920×1080 mask, score, box)",
        "ms",
    );
    r.library = pred[0].clone();
    r.floor = pred[1].clone();
    r.peer = pred[3].clone();
    r.goal = "≤1.05× ORT alone; no slower than peer".into();
    r.met = match (r.lib_over_floor(), r.peer_over_lib()) {
        (Some(lf), Some(po)) => Some(lf <= 1.05 && po >= 1.0),
        (Some(lf), None) => Some(lf <= 1.05),
        _ => None,
    };
    r.note = "library: default options (a pool of one session per core; a lone click gets the first, on every core); floor = plain ort Session (All, every core) run on ready tensors, no post-processing; peer = ORT Python (ORT_ENABLE_ALL) + argmax + cv2.resize + threshold".into();
    rows.push(r);

    let mut r = Row::new(
        "predict_equal_work",
        "  Predict, against ORT alone + the library's post-processing",
        "ms",
    );
    r.library = pred[0].clone();
    r.floor = pred[2].clone();
    r.note = "floor = the same plain run, then best mask by IoU, sam2::test_support::upsample_threshold and box_and_area: what remains is the library's own overhead (prompt tensors, binding, checks, result)".into();
    rows.push(r);

    let mut r = Row::new("predict_basic", "Predict e2e, Optimization::Basic", "ms");
    r.library = pred_all[0].clone();
    r.floor = pred_all[1].clone();
    r.goal = "≤1.05× ORT alone (Basic)".into();
    r.met = r.lib_over_floor().map(|x| x <= 1.05);
    rows.push(r);

    let mib = |b: u64| b as f64 / 1048576.0;
    let mut r = Row::new(
        "alloc_per_predict",
        if pc.is_some() {
            "Heap bytes allocated per predict (process-wide)"
        } else {
            "Heap bytes allocated per predict (Rust side only)"
        },
        "MiB",
    );
    let (lib_b, plain_b, copy_b) = if pc.is_some() {
        (
            per_predict.proc_bytes,
            per_plain.proc_bytes,
            per_copy.proc_bytes,
        )
    } else {
        (
            per_predict.rust_bytes,
            per_plain.rust_bytes,
            per_copy.rust_bytes,
        )
    };
    r.library = Some(stat(vec![mib(lib_b)]));
    r.floor = Some(stat(vec![mib(plain_b)]));
    r.goal = format!("< {:.0} MiB embedding: no copy", mib(emb_bytes as u64));
    // Met when a predict allocates less than one embedding while the control copy (which the
    // counter must see) allocates at least one.
    let control_seen = copy_b as usize >= emb_bytes;
    r.met = Some((lib_b as usize) < emb_bytes && control_seen);
    r.note = format!(
        "median of {} predicts; of which Rust side {:.2} MiB in {} allocations (the {:.2} MiB mask it returns among them); minor page faults {}; control, copy_to_host: {:.2} MiB ({}); floor = one ORT-alone decoder run",
        plan.counts,
        mib(per_predict.rust_bytes),
        per_predict.rust_calls,
        mib((W * H) as u64),
        per_predict.minflt,
        mib(copy_b),
        if control_seen { "the counter sees a copy" } else { "NOT seen: this counter cannot show copies" }
    );
    rows.push(r);

    for (n, lib, floor) in &tput {
        let mut r = Row::new(
            if *n == 1 {
                "throughput_1"
            } else {
                "throughput_2"
            },
            format!(
                "Predict throughput, {n} thread{} (pool 2)",
                if *n == 1 { "" } else { "s" }
            ),
            "pred/s",
        );
        r.library = Some(lib.clone());
        r.floor = Some(floor.clone());
        r.note = format!(
            "higher is better; library: one predictor, pool_size 2 (two one-thread sessions for predicts that run at once, and one on every core for a predict alone), one embedding; floor = {n} plain session{} (All) with 1 intra thread, one per thread",
            if *n == 1 { "" } else { "s" }
        );
        rows.push(r);
    }
    if tput.len() == 2 {
        let scale = tput[1].1.median / tput[0].1.median;
        rows.last_mut().unwrap().note += &format!("; library 2 threads / 1 thread = {scale:.2}×");
    }

    let mut r = Row::new(
        "save",
        format!("Save embedding ({:.1} MiB, fsync)", mib(file_len as u64)),
        "ms",
    );
    r.library = save[0].clone();
    r.floor = save[1].clone();
    r.goal = "≤1.5× memcpy+write (same durability)".into();
    r.met = r.lib_over_floor().map(|x| x <= 1.5);
    r.note = format!(
        "floor = memcpy + write + fsync; library = temporary file, CRC-32, write, fsync, rename, fsync of the directory; library {:.0} MB/s",
        save[0].as_ref().map_or(f64::NAN, |s| file_len as f64 / 1e6 / (s.median / 1e3))
    );
    rows.push(r);
    let mut r = Row::new("save_nosync", "  Save, against a write without fsync", "ms");
    r.library = save[0].clone();
    r.floor = save[2].clone();
    r.goal = "≤1.5× memcpy+write".into();
    r.met = r.lib_over_floor().map(|x| x <= 1.5);
    r.note = "floor = memcpy + write, no fsync (what durability costs)".into();
    rows.push(r);
    let mut r = Row::new("load", "Load embedding (page cache)", "ms");
    r.library = load[0].clone();
    r.floor = load[2].clone();
    r.goal = "≤1.2× read".into();
    r.met = r.lib_over_floor().map(|x| x <= 1.2);
    r.note = format!(
        "floor = read into a fresh allocation (a load needs new memory); library = header checks, new tensors, CRC-32; library {:.0} MB/s",
        load[0].as_ref().map_or(f64::NAN, |s| file_len as f64 / 1e6 / (s.median / 1e3))
    );
    rows.push(r);
    let mut r = Row::new(
        "load_reuse",
        "  Load, against a read into a reused buffer",
        "ms",
    );
    r.library = load[0].clone();
    r.floor = load[1].clone();
    r.goal = "≤1.2× read".into();
    r.met = r.lib_over_floor().map(|x| x <= 1.2);
    r.note = "floor = read into a buffer allocated (and faulted in) beforehand".into();
    rows.push(r);

    let one = |i: usize| memory.first().and_then(|(_, m)| m[i]).map(|v| v.0);
    for (n, m) in &memory {
        let id = match n {
            1 => "rss_1",
            2 => "rss_2",
            4 => "rss_4",
            _ => "rss_8",
        };
        let mut r = Row::new(
            id,
            format!(
                "Resident memory, {n} encoder session{}",
                if *n == 1 { "" } else { "s" }
            ),
            "MiB",
        );
        r.library = m[0].map(|v| stat(vec![v.0]));
        r.peer = m[2].map(|v| stat(vec![v.0]));
        r.floor = Some(stat(vec![weights_mib]));
        if *n > 1 {
            r.goal = "≤ 5% of the weights per extra session".into();
            r.met = match (m[0], one(0)) {
                (Some(v), Some(o)) => Some((v.0 - o) / (*n - 1) as f64 <= 0.05 * weights_mib),
                _ => None,
            };
        }
        let per_extra = |i: usize| -> String {
            match (m[i], one(i)) {
                (Some(v), Some(o)) if *n > 1 => format!("{:.1}", (v.0 - o) / (*n - 1) as f64),
                _ => "—".into(),
            }
        };
        r.note = format!(
            "library = shared weights (default); copied on request: {} MiB; peer = naive ORT sessions; floor = one copy of the weights; MiB per extra session shared/copied/naive: {}/{}/{}",
            m[1].map_or("—".into(), |v| format!("{:.1}", v.0)),
            per_extra(0),
            per_extra(1),
            per_extra(2)
        );
        rows.push(r);
    }

    // --- print, JSON, chart -------------------------------------------------------------------
    let load_end = load_average();
    println!();
    print_table(&rows);
    println!();
    println!("notes:");
    for r in &rows {
        if !r.note.is_empty() {
            println!("  {}: {}", r.name.trim(), r.note);
        }
    }
    if !peer_info.is_null() {
        println!(
            "  peer: OpenCV {}, numpy {}, onnxruntime {} (Python {}); its own embedding gives score {}, mask area {} px (library: score {:.4}, area {} px)",
            peer_info["versions"]["opencv"].as_str().unwrap_or("?"),
            peer_info["versions"]["numpy"].as_str().unwrap_or("?"),
            peer_info["versions"]["onnxruntime"].as_str().unwrap_or("?"),
            peer_info["versions"]["python"].as_str().unwrap_or("?"),
            peer_info.get("predict_score").map_or("?".into(), |v| format!("{:.4}", v.as_f64().unwrap_or(f64::NAN))),
            peer_info.get("predict_mask_area").map_or("?".into(), |v| v.to_string()),
            prediction.scores[0],
            prediction.areas[0],
        );
    } else {
        println!("  peer: not available; its cells are empty");
    }
    println!(
        "  CPU used by other processes (cores, of {threads}) during: {}",
        sections
            .done
            .iter()
            .map(|(n, c, s)| format!("{n} {c:.2} ({s:.0} s)"))
            .collect::<Vec<_>>()
            .join(", ")
    );
    println!();
    println!("goals:");
    for r in rows.iter().filter(|r| r.met.is_some()) {
        let detail = match (r.lib_over_floor(), r.peer_over_lib()) {
            (Some(lf), Some(po)) => format!("library/floor {lf:.3}×, peer/library {po:.3}×"),
            (Some(lf), None) => format!("library/floor {lf:.3}×"),
            (None, Some(po)) => format!("peer/library {po:.3}×"),
            _ => String::new(),
        };
        println!(
            "  [{}] {} — {} ({}; library {} {})",
            if r.met == Some(true) {
                "met"
            } else {
                "NOT MET"
            },
            r.name.trim(),
            r.goal,
            detail,
            fmt_cell(&r.library),
            r.unit
        );
    }
    let elapsed = started.elapsed().as_secs_f64();
    println!();
    println!(
        "load average {load_start} at start, {load_end} at end; {threads} cores; {elapsed:.0} s"
    );

    let json_path = out_dir.join("bench.json");
    let doc = json!({
        "machine": {"cores": threads, "load_average_start": load_start, "load_average_end": load_end,
                    "onnxruntime": info.version, "sam2": sam2::VERSION, "quick": quick,
                    "seconds": elapsed,
                    "other_processes_cores": sections.done.iter().map(|(n, c, s)| json!({"section": n, "cores": c, "seconds": s})).collect::<Vec<_>>()},
        "image": {"width": W, "height": H, "path": image_path, "click": [CLICK.0, CLICK.1]},
        "rows": rows.iter().map(Row::to_json).collect::<Vec<_>>(),
        "memory": {"weights_mib": weights_mib, "rows": memory.iter().map(|(n, m)| json!({
            "sessions": n,
            "shared_mib": m[0].map(|v| v.0), "copy_mib": m[1].map(|v| v.0), "naive_mib": m[2].map(|v| v.0),
            "shared_create_s": m[0].map(|v| v.1), "copy_create_s": m[1].map(|v| v.1), "naive_create_s": m[2].map(|v| v.1),
        })).collect::<Vec<_>>()},
        "extra": Value::Object(extra),
        "peer": peer_info,
    });
    std::fs::write(&json_path, serde_json::to_string_pretty(&doc)? + "\n")?;
    println!("wrote {}", json_path.display());
    let png_path = out_dir.join("bench.png");
    let chart = Path::new(env!("CARGO_MANIFEST_DIR")).join("tools/bench_chart.py");
    match Command::new(&python)
        .arg(&chart)
        .arg(&json_path)
        .arg(&png_path)
        .env_remove("LD_PRELOAD")
        .status()
    {
        Ok(s) if s.success() => println!("wrote {}", png_path.display()),
        Ok(s) => eprintln!("[bench] the chart failed ({s})"),
        Err(e) => eprintln!("[bench] cannot run {python} for the chart: {e}"),
    }
    Ok(())
}
