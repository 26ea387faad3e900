//! Video tracking, side by side in one run: the per-frame cost of the library's
//! [`Tracker`] at steady state against ONNX Runtime alone running the same four modules, and
//! against Meta's PyTorch `SAM2VideoPredictor` on the same checkpoint and CPU.
//!
//! Steady state is one object, prompted with one click on frame 0 and tracked forwards until it
//! attends to 7 memory frames (its conditioning frame and the 6 before the current one) and 16
//! object pointers (its conditioning frame's and the 15 before); the timed frames come after.
//!
//! - the library: one `Tracker::track` call per frame, from the frame's RGB pixels to the
//!   object's mask at the frame's size: preprocessing (resize to 1024², normalisation), the image
//!   encoder, the memory bank's selection, assembling the memories, their position encodings and
//!   the pointers, memory attention, the decoder, the memory encoder, the mask upsampled to the
//!   frame, bookkeeping;
//! - ONNX Runtime alone: four plain sessions (`ort`, ONNX Runtime's default options) run one
//!   after the other, each output fed to the next as is: encoder → attention → decoder → memory
//!   encoder. Its inputs are those the tracker has at steady state: the frame resized and
//!   normalised, the 7 memories concatenated ([7, 64, 64, 64]), their position encodings with the
//!   temporal codes added, the 16 pointers ([16, 256]) and their offsets, all from the outputs of
//!   its own earlier frames. Two figures: the four modules alone, and the four modules with the
//!   input work any caller of them repeats every frame, timed just before them: resizing and
//!   normalising the frame (with the library's own code, `preprocess_video_frame_into`, into a
//!   buffer kept between frames) and concatenating the memories and the pointers (new on every
//!   frame). What a caller can do once is not timed on either side: composing the position
//!   encodings (the same at steady state) and the constant inputs.
//!
//! Before the tracker, two modules of the real export alone: memory attention at
//! steady state (the same input shapes) and the image encoder, each run by the library's session
//! (its graph optimised once, attention fused into ONNX Runtime's `MultiHeadAttention`) and by a
//! plain ONNX Runtime session of the same file on the same inputs, interleaved, with the largest
//! difference between their outputs (`--attention-runs N`, 3 by default, 0 to skip;
//! `--attention-only` stops after them).
//!
//! The two are interleaved frame by frame (the machine's other load hits both alike); the
//! figures are medians. Two model sets: the generated four-module tracker (models/track/, on
//! 320×240 frames) and, when SAM2_VIDEO_MODELS names them, the real SAM2.1 hiera-tiny export
//! (sam2-export-video) on 1280×720 frames, with Meta's PyTorch predictor beside it
//! (tools/bench/bench_video_torch.py, when SAM2_REAL_PYTHON names the torch venv's Python); and,
//! when SAM2_EDGETAM_MODELS names them, EdgeTAM's four modules (sam2-export-edgetam) on
//! the same frames, against ONNX Runtime alone and against SAM2.1 tiny's frame in the library.
//!
//!     cargo run --release -p sam2-bench --bin bench_video -- [--out DIR] [--frames N]
//!         [--real-frames N] [--torch-frames N] [--attention-runs N] [--attention-only]
//!
//! Writes out/bench_video.json.
//!
//! `main` runs the two modules alone (`alone`), then each model set (`compare`, with ONNX Runtime
//! alone's four sessions in `plain`) and the PyTorch predictors, prints the table and writes the
//! JSON.

use std::borrow::Cow;
use std::collections::VecDeque;
use std::hint::black_box;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

use ort::session::{Session, SessionInputValue};
use ort::value::{DynValue, Tensor};
use sam2::video::{Direction, Tracker, TrackerOptions, VideoModelPaths};
use sam2::{ImageView, PixelFormat, Point, Prompt};
use sam2_bench::stats::median;
use sam2_bench::track_clip;

mod alone;
mod compare;
mod plain;

use alone::modules_alone;
use compare::{compare, Summary};
use plain::{model_input, new_image, Plain};

type Res<T> = Result<T, Box<dyn std::error::Error>>;

/// SAM2.1's `num_maskmem` and `max_obj_ptrs_in_encoder`.
const NUM_MASKMEM: usize = 7;
const MAX_POINTERS: usize = 16;
/// Frames tracked before timing: from frame 16 on, a frame attends to 7 memories and 16 pointers.
const WARM_FRAMES: u32 = 17;
const SIDE: usize = 1024;

fn f32_tensor(shape: Vec<i64>, data: Vec<f32>) -> Res<DynValue> {
    Ok(Tensor::from_array((shape, data))?.into_dyn())
}

fn values(v: &DynValue) -> Res<(Vec<i64>, Vec<f32>)> {
    let (shape, data) = v.try_extract_tensor::<f32>()?;
    Ok((shape.to_vec(), data.to_vec()))
}

type Inputs<'a> = Vec<(Cow<'a, str>, SessionInputValue<'a>)>;

/// What the model sets and the PyTorch predictors measured: the table's rows and the JSON's.
struct Results {
    generated: Summary,
    real: Option<Summary>,
    edgetam: Option<Summary>,
    /// Meta's and EdgeTAM's PyTorch predictors: the median seconds a frame, and their threads.
    torch: Option<(f64, u64)>,
    edgetam_torch: Option<(f64, u64)>,
}

fn main() -> Res<()> {
    let args: Vec<String> = std::env::args().collect();
    let arg = |name: &str| {
        args.iter()
            .position(|a| a == name)
            .and_then(|i| args.get(i + 1).cloned())
    };
    let frames: u32 = arg("--frames").map_or(Ok(30), |v| v.parse())?;
    let real_frames: u32 = arg("--real-frames").map_or(Ok(5), |v| v.parse())?;
    let torch_frames: u32 = arg("--torch-frames").map_or(Ok(3), |v| v.parse())?;
    let attention_runs: u32 = arg("--attention-runs").map_or(Ok(3), |v| v.parse())?;
    let out_dir = PathBuf::from(arg("--out").unwrap_or_else(|| "out".into()));
    let root = sam2_bench::root();
    let models = PathBuf::from(std::env::var("SAM2_MODELS").map_err(|_| {
        "SAM2_MODELS is not set: source tools/setup/setup.sh (scripts/bench.sh does)"
    })?);
    let info = sam2::runtime::init(None)?;
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    let load_average = || {
        std::fs::read_to_string("/proc/loadavg")
            .unwrap_or_default()
            .split_whitespace()
            .take(3)
            .collect::<Vec<_>>()
            .join(" ")
    };
    let load = load_average();
    println!(
        "video tracking, one object at steady state (7 memory frames, 16 pointers); ONNX Runtime \
         {}, {cores} cores, load average {load}; medians of frames tracked interleaved",
        info.version
    );

    // Memory attention and the image encoder alone first: the largest shares of a real frame,
    // and what the fusion of attention is for.
    let real_dir = std::env::var_os("SAM2_VIDEO_MODELS").map(PathBuf::from);
    // Its int8 variant (tools/setup/setup-video.sh makes it) as a third side.
    let int8 = std::env::var_os("SAM2_VIDEO_INT8")
        .map(|d| VideoModelPaths::find(PathBuf::from(d)))
        .transpose()?;
    let attention = match &real_dir {
        Some(dir) if attention_runs > 0 => Some(modules_alone(
            &VideoModelPaths::in_dir(dir, ""),
            int8.as_ref(),
            attention_runs,
        )?),
        _ => None,
    };

    if args.iter().any(|a| a == "--attention-only") {
        std::fs::create_dir_all(&out_dir)?;
        let json = serde_json::json!({ "modules_alone": attention });
        std::fs::write(
            out_dir.join("bench_video_modules.json"),
            serde_json::to_string_pretty(&json)?,
        )?;
        return Ok(());
    }

    let gen_size = (320, 240);
    let gen = compare(
        &VideoModelPaths::in_dir(models.join("track"), ""),
        None,
        gen_size,
        frames,
    )?;
    let gen = gen.summary();

    let real_size = (1280, 720);
    let real = match &real_dir {
        Some(dir) => Some(
            compare(
                &VideoModelPaths::in_dir(dir, ""),
                int8.as_ref(),
                real_size,
                real_frames,
            )?
            .summary(),
        ),
        None => None,
    };
    // EdgeTAM: its four modules (sam2-export-edgetam) on the same frames.
    let edgetam = match std::env::var_os("SAM2_EDGETAM_MODELS").map(PathBuf::from) {
        Some(dir) => {
            // Its int8 variant (tools/setup/setup-edgetam.sh makes it) as a third side.
            let int8 = std::env::var_os("SAM2_EDGETAM_INT8")
                .map(|d| VideoModelPaths::find(PathBuf::from(d)))
                .transpose()?;
            let paths = VideoModelPaths::find(&dir)?;
            Some(compare(&paths, int8.as_ref(), real_size, real_frames)?.summary())
        }
        None => None,
    };
    let torch = match (&real_dir, std::env::var_os("SAM2_REAL_PYTHON")) {
        (Some(dir), Some(python)) => torch_frame(&root, &python, dir, torch_frames)?,
        _ => None,
    };
    // EdgeTAM's own predictor in its venv, on the same checkpoint as the export.
    let edgetam_torch = match (
        std::env::var_os("SAM2_EDGETAM_MODELS"),
        std::env::var_os("SAM2_EDGETAM_PYTHON"),
    ) {
        (Some(dir), Some(python)) => torch_frame(&root, &python, Path::new(&dir), torch_frames)?,
        _ => None,
    };

    let results = Results {
        generated: gen,
        real,
        edgetam,
        torch,
        edgetam_torch,
    };
    print_table(&results);
    let load_end = load_average();
    println!("load average at the end {load_end}");
    std::fs::create_dir_all(&out_dir)?;
    let json = serde_json::json!({
        "cores": cores, "load_average": load, "load_average_end": load_end,
        "onnxruntime": info.version.to_string(),
        "memory_frames": NUM_MASKMEM, "pointers": MAX_POINTERS, "objects": 1,
        "warm_frames": WARM_FRAMES,
        "generated": results.generated.json(serde_json::json!({
            "frame": [gen_size.0, gen_size.1], "frames": frames,
        })),
        "real": results.real.map(|r| r.json(serde_json::json!({
            "model": "sam2.1_hiera_tiny (sam2-export-video)",
            "frame": [real_size.0, real_size.1], "frames": real_frames,
        }))),
        "edgetam": results.edgetam.map(|e| e.json(serde_json::json!({
            "model": "edgetam (sam2-export-edgetam)",
            "frame": [real_size.0, real_size.1], "frames": real_frames,
            "vs_sam2_1_tiny_library": results.real.map(|r| e.library / r.library),
        }))),
        "modules_alone": attention,
        "pytorch": results.torch.map(|(secs, threads)| serde_json::json!({
            "frames": torch_frames, "seconds": secs, "fps": 1.0 / secs, "threads": threads,
        })),
        "edgetam_pytorch": results.edgetam_torch.map(|(secs, threads)| serde_json::json!({
            "frames": torch_frames, "seconds": secs, "fps": 1.0 / secs, "threads": threads,
        })),
    });
    std::fs::write(
        out_dir.join("bench_video.json"),
        serde_json::to_string_pretty(&json)?,
    )?;
    Ok(())
}

/// The table: per model set, the library, its int8 variant where run, ONNX Runtime alone with and
/// without its input work, then the PyTorch predictors.
fn print_table(r: &Results) {
    let ms = |s: f64| format!("{:.1} ms", s * 1000.0);
    let fps = |s: f64| format!("{:.2}", 1.0 / s);
    println!("| model, frames | side | per frame | frames/s | ratio |");
    println!("|---|---|---|---|---|");
    r.generated.print("generated tracker, 320×240", "", "");
    // Where the CPU cannot take int8 scores the library keeps the float kernel: say so.
    let scores_note = match sam2::models::int8_scores_available() {
        Ok(()) => String::new(),
        Err(why) => format!(" as asked, but kept float here: {why}"),
    };
    match r.real {
        Some(real) => real.print(
            "SAM2.1 hiera-tiny, 1280×720",
            "",
            &format!(
                "the image encoder's weights, the feed-forward layers' and memory attention's \
                 scores int8{scores_note}"
            ),
        ),
        None => println!("| SAM2.1 hiera-tiny | not run (SAM2_VIDEO_MODELS unset) | | | |"),
    }
    match r.edgetam {
        Some(e) => {
            let vs_sam2 = r.real.map_or(String::new(), |real| {
                format!(
                    "; {:.3}× SAM2.1 tiny's frame in the library ({:.1}× faster)",
                    e.library / real.library,
                    real.library / e.library
                )
            });
            e.print(
                "EdgeTAM, 1280×720",
                &vs_sam2,
                &format!(
                    "the feed-forward layers' weights and memory attention's scores \
                     int8{scores_note}; its RepViT encoder has no MatMul to quantise"
                ),
            );
        }
        None => println!(
            "| EdgeTAM | not run (SAM2_EDGETAM_MODELS unset: tools/setup/setup-edgetam.sh) | | | |"
        ),
    }
    match (r.torch, r.real) {
        (Some((secs, threads)), Some(real)) => println!(
            "| SAM2.1 hiera-tiny, 1280×720 | Meta's SAM2VideoPredictor, PyTorch ({threads} threads) | {} | {} | {:.2}× the library |",
            ms(secs),
            fps(secs),
            secs / real.library
        ),
        _ => println!(
            "| SAM2.1 hiera-tiny | Meta's SAM2VideoPredictor: not run (SAM2_VIDEO_MODELS or SAM2_REAL_PYTHON unset, or it failed) | | | |"
        ),
    }
    match (r.edgetam_torch, r.edgetam) {
        (Some((secs, threads)), Some(e)) => println!(
            "| EdgeTAM, 1280×720 | EdgeTAM's SAM2VideoPredictor, PyTorch ({threads} threads) | {} | {} | {:.2}× the library |",
            ms(secs),
            fps(secs),
            secs / e.library
        ),
        _ => println!(
            "| EdgeTAM | EdgeTAM's SAM2VideoPredictor: not run (SAM2_EDGETAM_MODELS or SAM2_EDGETAM_PYTHON unset, or it failed) | | | |"
        ),
    }
}

/// The median seconds a frame of the PyTorch video predictor of the export in `models` takes
/// (tools/bench/bench_video_torch.py, run by `python`: Meta's for SAM2.1 tiny, EdgeTAM's for
/// EdgeTAM), and its threads; `None` when the script fails (its error is printed).
fn torch_frame(
    root: &Path,
    python: &std::ffi::OsStr,
    models: &Path,
    frames: u32,
) -> Result<Option<(f64, u64)>, Box<dyn std::error::Error>> {
    if frames == 0 {
        // `--torch-frames 0`: not run (its row says so), rather than a median of nothing.
        return Ok(None);
    }
    let out = Command::new(python)
        .arg(root.join("tools/bench/bench_video_torch.py"))
        .arg("--models")
        .arg(models)
        .args(["--width", "1280", "--height", "720", "--timed"])
        .arg(frames.to_string())
        .output()?;
    if !out.status.success() {
        eprintln!(
            "[bench_video] PyTorch run on {} failed: {}",
            models.display(),
            String::from_utf8_lossy(&out.stderr)
        );
        return Ok(None);
    }
    let v: serde_json::Value = serde_json::from_str(
        String::from_utf8_lossy(&out.stdout)
            .lines()
            .last()
            .unwrap_or(""),
    )?;
    let secs: Vec<f64> = v["seconds"]
        .as_array()
        .ok_or("no seconds from the PyTorch run")?
        .iter()
        .filter_map(|s| s.as_f64())
        .collect();
    Ok(Some((median(&secs), v["threads"].as_u64().unwrap_or(0))))
}
