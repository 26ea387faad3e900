//! The main benchmark: the library against the peer pipeline (samexporter / X-AnyLabeling
//! in Python: OpenCV + numpy + ONNX Runtime Python) and against floors (memory bandwidth, ONNX
//! Runtime alone, plain file I/O), in one run on the bench models and a deterministic 1920×1080
//! photo-like image (written to out/bench_image.ppm, so both sides use the same bytes). Prints a
//! table and writes it as JSON (out/bench.json) and as a PNG chart (out/bench.png, drawn by
//! tools/bench/bench_chart.py).
//!
//!     scripts/bench.sh [--quick]            # the documented command (set-up, build, run)
//!     cargo run --release -p sam2-bench --bin bench [-- --quick] [-- --out DIR]
//!                                           # the same, with a Rust-side allocation counter only
//!
//! Every figure is the median of repeated runs after warm-up, with min and max. The library, the
//! peer and the floor run interleaved, round by round (the order rotated every round), so that
//! load from other processes hits all of them alike, and ratios are computed pair by pair in the
//! same run. The peer is a Python co-process (tools/bench/bench_peer.py) driven one command per
//! line; it times its own pipeline code. Each timed call is preceded by a pause (40 ms where ONNX
//! Runtime sessions run: their intra-op threads spin after a run and would otherwise steal the
//! next contestant's cores). The CPU used by other processes during each section is printed.
//!
//! Zero copies of the embedding per predict are shown, not assumed: bytes requested from the heap
//! during one predict are counted by a counting #[global_allocator] (Rust side) and, when
//! scripts/bench.sh preloads tools/bench/bench_alloc_count.c, by a process-wide malloc counter that
//! also sees ONNX Runtime's C++ allocations; a control (an explicit copy of the embedding through
//! ONNX Runtime, `Embedding::copy_to_host`) shows that the counter does see a 16 MiB copy when
//! one is made.
//!
//! Resident memory of 1/2/4/8 encoder sessions (shared weights, copied weights, naive ONNX
//! Runtime sessions) is measured in child processes of this binary (`--memory-child`), one per
//! configuration, so that the figures do not contaminate each other.
//!
//! `main` runs the sections in order, one function each: the pipeline's stages (`stages`), what a
//! predict allocates (`counting`), saving and loading (`embedding_file`), resident memory
//! (`memory`); then the report (`report`).

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::RefCell;
use std::hint::black_box;
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use ort::session::builder::GraphOptimizationLevel;
use ort::session::Session;
use ort::value::{DynValue, Tensor};
use serde_json::{json, Value};

use sam2::device::Optimization;
use sam2::device::WeightSharing;
use sam2::{
    Embedding, Encoder, EncoderOptions, ImageView, PixelFormat, Point, PredictOptions, Prediction,
    Predictor, PredictorOptions, Prompt,
};

mod counting;
mod embedding_file;
mod inputs;
mod memory;
mod peer;
mod report;
mod stages;
mod table;

use counting::*;
use inputs::*;
use memory::memory_child;
use peer::*;
use sam2_bench::stats::*;
use sam2_bench::{bandwidth_floor, tensor_of};
use table::*;

type Res<T> = Result<T, Box<dyn std::error::Error>>;

const W: usize = 1920;
const H: usize = 1080;
const SIZE: usize = 1024;
const LOW_RES: usize = 256;
/// The click: the centre of the large ellipse drawn by `make_image`.
const CLICK: (f32, f32) = (1250.0, 620.0);

// ------------------------------------------------------------------------------------------------
// The run
// ------------------------------------------------------------------------------------------------

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

impl Plan {
    /// How many runs each section makes: fewer with `--quick`.
    fn new(quick: bool) -> Plan {
        if quick {
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
        }
    }
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

/// What the sections share: the plan, the models, the image, the peer, the allocation counter,
/// and the JSON's extra figures, which the sections add to.
struct Run<'a> {
    plan: Plan,
    quick: bool,
    started: Instant,
    load_start: String,
    /// ONNX Runtime's version.
    onnxruntime: String,
    threads: usize,
    out_dir: PathBuf,
    encoder_path: PathBuf,
    decoder_path: PathBuf,
    /// The image's RGB pixels, the view the library reads, and the file the peer reads.
    rgb: &'a [u8],
    view: ImageView<'a>,
    image_path: PathBuf,
    python: String,
    pc: Option<ProcessCounter>,
    /// The peer, until the sections that run it are done.
    peer: RefCell<Option<Peer>>,
    has_peer: bool,
    extra: serde_json::Map<String, Value>,
}

impl Run<'_> {
    /// The peer's time for `cmd` (NaN without a peer).
    fn peer_ms(&self, cmd: &str) -> f64 {
        self.peer
            .borrow_mut()
            .as_mut()
            .map_or(f64::NAN, |p| p.ms(cmd))
    }

    /// The peer's answer to `cmd` (None without a peer).
    fn peer_call(&self, cmd: &str) -> Option<Value> {
        self.peer.borrow_mut().as_mut().and_then(|p| p.call(cmd))
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
    let plan = Plan::new(quick);
    let started = Instant::now();
    let (enc_path, dec_path) = bench_models();
    println!("models: {} and {}", enc_path.display(), dec_path.display());
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
    let load_start = load_average();
    let pc = process_counter();
    let python = std::env::var("SAM2_PYTHON").unwrap_or_else(|_| ".venv/bin/python".into());
    let info = sam2::runtime::init(None)?;
    print_header(&info, threads, &load_start, quick, pc.is_some());

    // The image, written for the peer so that both sides read the same bytes, and the peer.
    let rgb = make_image(W, H);
    let image_path = out_dir.join("bench_image.ppm");
    write_ppm(&image_path, &rgb, W, H)?;
    let view = ImageView::packed(&rgb, W, H, PixelFormat::Rgb)?;
    let peer = Peer::start(&python, &image_path, &enc_path, &dec_path);
    let mut sections = Sections {
        peer_pid: peer.as_ref().map(Peer::pid),
        current: None,
        done: Vec::new(),
    };
    let mut run = Run {
        plan,
        quick,
        started,
        load_start,
        onnxruntime: info.version,
        threads,
        out_dir,
        encoder_path: enc_path,
        decoder_path: dec_path,
        rgb: &rgb,
        view,
        image_path,
        python,
        pc,
        has_peer: peer.is_some(),
        peer: RefCell::new(peer),
        extra: serde_json::Map::new(),
    };

    sections.start("preprocess");
    let pre = stages::preprocess(&mut run)?;

    sections.start("encode");
    let stages::Encoded {
        stats: encode,
        encoder,
        embedding,
        embedding_bytes,
        prepared,
        peer_ok,
    } = stages::encode(&mut run, &pre.out)?;

    sections.start("predict");
    let stages::Predicted {
        stats: predict,
        predictor,
        plain,
        feed,
        prompts,
        prediction,
        logits,
        logits_path,
    } = stages::predict(&mut run, &encoder, &embedding, peer_ok)?;

    sections.start("postprocess");
    let post = stages::postprocess(&run, &logits, &logits_path)?;
    // The peer's part ends here.
    let peer_info = run.peer_call("info");
    if let Some(p) = run.peer.borrow_mut().take() {
        p.quit();
    }
    sections.peer_pid = None;

    sections.start("allocations per predict");
    let allocations = counting::allocations_per_predict(
        &mut run,
        &predictor,
        &embedding,
        &prompts,
        &feed,
        plain,
        embedding_bytes,
    );

    sections.start("predict throughput");
    let throughput = stages::predict_throughput(&run, &encoder, &embedding, &prompts, &feed)?;

    sections.start("save/load");
    let files = embedding_file::save_and_load(&run, &encoder, &embedding, embedding_bytes)?;
    drop(predictor);
    drop(encoder);

    sections.start("Optimization::Basic");
    let basic = stages::optimization_basic(&run, &embedding, &prompts, &feed, &prepared)?;
    drop(prepared);

    sections.start("resident memory (child processes)");
    let memory = memory::resident_memory(&run)?;
    sections.finish();

    let figures = report::Figures {
        pre,
        encode,
        predict,
        post,
        allocations,
        throughput,
        files,
        basic,
        memory,
        embedding_bytes,
        prediction,
        peer_info: peer_info.unwrap_or(Value::Null),
    };
    let rows = report::rows(&run, &figures);
    report::print_and_write(&run, &rows, &figures, &sections)
}

/// The lines that head the output: the runtime, the machine, how figures are taken, and which
/// allocation counter runs.
fn print_header(
    info: &sam2::runtime::RuntimeInfo,
    threads: usize,
    load_start: &str,
    quick: bool,
    process_wide: bool,
) {
    println!(
        "sam2 bench — ONNX Runtime {} ({}), {threads} cores, load average {load_start} at start{}",
        info.version,
        info.path.display(),
        if quick { ", --quick" } else { "" }
    );
    println!(
        "CPU: {} (ratios are read against the machine they came from)",
        cpu_description()
    );
    println!(
        "each figure: median [min–max] of repeated runs after warm-up; library, peer and floor runs interleaved round by round, each call preceded by a {} ms pause where ONNX Runtime sessions run (their threads spin after a run) and {} ms elsewhere",
        SETTLE_ORT.as_millis(),
        SETTLE.as_millis()
    );
    println!(
        "allocation counter: {}",
        if process_wide {
            "process-wide (tools/bench/bench_alloc_count.c preloaded) + Rust global allocator"
        } else {
            "Rust global allocator only (run scripts/bench.sh to preload the process-wide counter)"
        }
    );
}
