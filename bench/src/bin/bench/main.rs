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

use std::alloc::{GlobalAlloc, Layout, System};
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
    Embedding, Encoder, EncoderOptions, ImageView, PixelFormat, Point, PredictOptions, Predictor,
    PredictorOptions, Prompt,
};

mod counting;
mod inputs;
mod peer;
mod table;

use counting::*;
use inputs::*;
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
        if pc.is_some() {
            "process-wide (tools/bench/bench_alloc_count.c preloaded) + Rust global allocator"
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
    // The int8 variant of the same encoder (tools/models/make_variant.py, made by
    // tools/setup/setup-real.sh), against ONNX Runtime alone on the float32 file.
    let int8_encoder = match int8_variant(&enc_path) {
        Some(path) => Some(Encoder::new(&path, &EncoderOptions::default())?),
        None => None,
    };
    // EdgeTAM's image encoder (tools/models/export_edgetam.py, made by
    // tools/setup/setup-edgetam.sh) on the same image, against SAM2.1 tiny's in the library.
    let edgetam_encoder = match edgetam_encoder() {
        Some(path) => Some(Encoder::new(&path, &EncoderOptions::default())?),
        None => None,
    };
    let peer_enc_ok = has_peer && peer_call("init_encoder").is_some();
    eprintln!(
        "[bench]   library e2e, library on a prepared tensor, ONNX Runtime alone{}{}{} ({} + 1 warm-up each)",
        if int8_encoder.is_some() { ", the int8 variant" } else { "" },
        if edgetam_encoder.is_some() { ", EdgeTAM" } else { "" },
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
        let mut int8 = || {
            let encoder = int8_encoder.as_ref().expect("an int8 variant");
            timed(|| drop(black_box(encoder.encode(&view).expect("encode int8"))))
        };
        let mut edgetam = || {
            let encoder = edgetam_encoder.as_ref().expect("EdgeTAM's encoder");
            timed(|| drop(black_box(encoder.encode(&view).expect("encode EdgeTAM"))))
        };
        let mut fs: Vec<&mut dyn FnMut() -> f64> = vec![&mut lib, &mut lib_prep, &mut floor];
        if int8_encoder.is_some() {
            fs.push(&mut int8);
        }
        if edgetam_encoder.is_some() {
            fs.push(&mut edgetam);
        }
        if peer_enc_ok {
            fs.push(&mut p);
        }
        let mut st = interleaved(SETTLE_ORT, 1, plan.enc_runs, &mut fs);
        // [library, prepared, ONNX Runtime alone, peer, int8 variant, EdgeTAM]
        let int8_stat = if int8_encoder.is_some() {
            st.remove(3)
        } else {
            None
        };
        let edgetam_stat = if edgetam_encoder.is_some() {
            st.remove(3)
        } else {
            None
        };
        st.resize(4, None);
        st.push(int8_stat);
        st.push(edgetam_stat);
        st
    };
    drop(int8_encoder);
    drop(edgetam_encoder);
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
    // The pool builds its one-thread sessions when predicts first run at once: a short window of
    // two threads first, so that the measured windows see the pool as a host does after its first
    // concurrent clicks.
    black_box(throughput(2, Duration::from_millis(100), &lib_call));
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

    if enc[4].is_some() {
        let mut r = Row::new("encode_int8", "  Encode e2e, the int8 variant", "ms");
        r.library = enc[4].clone();
        r.floor = enc[2].clone();
        r.goal = "≤0.6× ORT alone on the fp32 file".into();
        r.met = r.lib_over_floor().map(|x| x <= 0.6);
        r.note = format!(
            "the library on tools/models/make_variant.py's int8 encoder (weights int8 per channel, 7-bit range; activations per run) against the same floor, ONNX Runtime alone on the float32 file; CPU: {}",
            cpu_description()
        );
        rows.push(r);
    }

    if enc[5].is_some() {
        let mut r = Row::new("encode_edgetam", "  Encode e2e, EdgeTAM", "ms");
        r.library = enc[5].clone();
        r.floor = enc[0].clone();
        r.goal = "≤0.25× SAM2.1 tiny's encode in the library".into();
        r.met = r.lib_over_floor().map(|x| x <= 0.25);
        r.note = "the library on EdgeTAM's image encoder (tools/models/export_edgetam.py: RepViT-M1, random weights) on the same image; floor = SAM2.1 tiny's encode e2e in the library (the row above), not ONNX Runtime alone".into();
        rows.push(r);
    }

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
    let chart = sam2_bench::root().join("tools/bench/bench_chart.py");
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
