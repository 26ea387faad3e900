//! SAM 3 (issue 59), side by side in one run, on an export of sam2-export-sam3 (the full
//! configuration: Meta's architecture, 840 M parameters, seeded random weights; speed and memory
//! do not depend on their values):
//!
//! - **encode**: the library's `ConceptModel::encode` (its image `Encoder`, loaded alone with the
//!   same options: a concept model's language encoder would add 3 GB beside the plain session) of
//!   a 1008×1008 RGB image against ONNX
//!   Runtime alone on the same file (a plain `ort` session with default options, the same pixels
//!   as the uint8 `[3, 1008, 1008]` tensor the graph takes), and against Meta's PyTorch
//!   `Sam3Processor.set_image` on the CPU (tools/bench/sam3_torch.py, same image, in its own
//!   process, run after the memory children and before this process loads a model);
//! - **a phrase on ready features**: `segment` of one phrase whose text features are cached (run
//!   once first) against ONNX Runtime alone running the decoder graph on the same inputs (the
//!   plain image encoder's six outputs, the plain language encoder's two);
//! - **memory**: resident memory of 1 and 4 concept models on one copy of the weights, each count
//!   in a fresh process, and the peak resident memory of one encode (VmHWM reset after loading),
//!   the library's and a plain session's, each in a fresh process;
//! - **the int8 variant** (`--int8 DIR`, or SAM2_SAM3_INT8: a copy of the export whose image
//!   encoder is sam2-variant's int8 one), when given: its encode in the encode rounds, and its
//!   agreement with float32 (correlation of each feature level; the phrase's instances matched
//!   by query, their masks' IoU).
//!
//! Rows are interleaved round by round, each call after a 40 ms pause; medians [min–max].
//! Prints a table and writes DIR/bench_sam3.json.
//!
//!     cargo run --release -p sam2-bench --bin bench_sam3 --
//!         [--out DIR] [--models DIR] [--vocab FILE] [--repeat N] [--int8 DIR] [--no-torch]
//!
//! The export comes from --models or SAM2_SAM3_FULL_MODELS, CLIP's vocabulary from --vocab or
//! SAM2_SAM3_VOCAB, SAM 3's Python from SAM2_SAM3_PYTHON (tools/setup/setup-sam3-full.sh sets all
//! three).

use std::collections::HashMap;
use std::hint::black_box;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

use ort::session::Session;
use ort::value::{DynValue, Tensor};
use sam2::concept::{Concept, ConceptModel, ConceptModelOptions, SegmentOptions, Segmentation};
use sam2::{Embedding, Encoder, EncoderOptions, ImageView, PixelFormat};
use sam2_bench::stats::{interleaved, stat, stat_json, Stat, SETTLE_ORT};
use serde_json::json;

type Res<T> = Result<T, Box<dyn std::error::Error>>;

/// SAM 3's input side: an image of this size is not resized by either side.
const SIDE: usize = 1008;
const PHRASE: &str = "a red car";
/// Box slots of sam2-export-sam3's decoder.
const BOX_SLOTS: usize = 8;

/// The image every side encodes (tools/bench/sam3_torch.py makes the same): RGB, byte i of the
/// packed rows = (i × 7919) mod 251.
fn bench_image() -> Vec<u8> {
    (0..SIDE * SIDE * 3)
        .map(|i| ((i as u64 * 7919) % 251) as u8)
        .collect()
}

/// A field of /proc/self/status (VmRSS, VmHWM, RssAnon), in MiB.
fn status_mib(field: &str) -> f64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find(|l| l.starts_with(field) && l[field.len()..].starts_with(':'))
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|kb| kb.parse::<f64>().ok())
        .map_or(f64::NAN, |kb| kb / 1024.0)
}

/// Resets VmHWM to the current resident size (Linux 4.0 on), so that it reads the peak of what
/// follows.
fn reset_peak() -> bool {
    std::fs::write("/proc/self/clear_refs", "5").is_ok()
}

fn model_options(vocab: &Path) -> ConceptModelOptions {
    ConceptModelOptions {
        vocabulary: Some(vocab.to_path_buf()),
        ..Default::default()
    }
}

fn plain_session(path: &Path) -> Res<Session> {
    let env = sam2::runtime::environment()?;
    Ok(Session::builder(env)?.commit_from_file(path)?)
}

/// The image as the graph takes it: uint8 `[3, H, W]`.
fn chw(rgb: &[u8]) -> Res<DynValue> {
    let plane = SIDE * SIDE;
    let mut out = vec![0u8; 3 * plane];
    for (p, px) in rgb.chunks_exact(3).enumerate() {
        for c in 0..3 {
            out[c * plane + p] = px[c];
        }
    }
    Ok(Tensor::from_array(([3usize, SIDE, SIDE], out))?.into_dyn())
}

fn ms_since(t: Instant) -> f64 {
    t.elapsed().as_secs_f64() * 1e3
}

/// The child processes: `child models N VOCAB DIR` (resident memory of N concept models) and
/// `child encode lib|ort VOCAB DIR` (the peak of one encode). Each prints one RESULT line of JSON.
fn child(args: &[String]) -> Res<()> {
    sam2::runtime::init(None)?;
    let (what, vocab, dir) = (&args[3], Path::new(&args[4]), Path::new(&args[5]));
    let base = status_mib("VmRSS");
    let result = match args[2].as_str() {
        "models" => {
            let n: usize = what.parse()?;
            let models: Vec<ConceptModel> = (0..n)
                .map(|_| ConceptModel::new(dir, &model_options(vocab)))
                .collect::<sam2::Result<_>>()?;
            let addresses: Vec<Option<usize>> = models
                .iter()
                .map(|m| m.encoder().weights_address())
                .collect();
            json!({
                "models": n,
                "rss_mib": status_mib("VmRSS") - base,
                "rss_anon_mib": status_mib("RssAnon"),
                "weight_mib": models[0].weight_bytes() as f64 / 1048576.0,
                "one_copy": addresses.windows(2).all(|w| w[0] == w[1] && w[0].is_some()),
            })
        }
        "encode" => {
            let rgb = bench_image();
            let (loaded, peak_load, peak, ms) = if what == "lib" {
                let model = ConceptModel::new(dir, &model_options(vocab))?;
                let view = ImageView::packed(&rgb, SIDE, SIDE, PixelFormat::Rgb)?;
                let (loaded, peak_load) = (status_mib("VmRSS"), status_mib("VmHWM"));
                let reset = reset_peak();
                let t = Instant::now();
                let embedding = model.encode(&view)?;
                let ms = ms_since(t);
                black_box(&embedding);
                let peak = if reset { status_mib("VmHWM") } else { f64::NAN };
                (loaded, peak_load, peak, ms)
            } else {
                let mut session = plain_session(&dir.join("sam3_image_encoder.onnx"))?;
                let input = chw(&rgb)?;
                let (loaded, peak_load) = (status_mib("VmRSS"), status_mib("VmHWM"));
                let reset = reset_peak();
                let t = Instant::now();
                let out = session.run(ort::inputs!["image" => &input])?;
                let ms = ms_since(t);
                black_box(&out);
                let peak = if reset { status_mib("VmHWM") } else { f64::NAN };
                (loaded, peak_load, peak, ms)
            };
            json!({"side": what, "loaded_mib": loaded, "peak_while_loading_mib": peak_load,
                   "peak_encode_mib": peak, "encode_ms": ms})
        }
        other => return Err(format!("unknown child mode {other}").into()),
    };
    println!("RESULT {result}");
    Ok(())
}

fn run_child(exe: &Path, args: &[&str]) -> Option<serde_json::Value> {
    let out = Command::new(exe).arg("child").args(args).output().ok()?;
    let text = String::from_utf8_lossy(&out.stdout);
    let line = text.lines().find_map(|l| l.strip_prefix("RESULT "));
    if line.is_none() {
        eprintln!(
            "[bench_sam3] child {args:?} failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    serde_json::from_str(line?).ok()
}

/// Pearson correlation of two float32 tensors' bytes.
fn correlation(a: &[u8], b: &[u8]) -> f64 {
    let f = |x: &[u8]| -> Vec<f64> {
        x.chunks_exact(4)
            .map(|c| f32::from_ne_bytes([c[0], c[1], c[2], c[3]]) as f64)
            .collect()
    };
    let (a, b) = (f(a), f(b));
    let n = a.len() as f64;
    let (ma, mb) = (a.iter().sum::<f64>() / n, b.iter().sum::<f64>() / n);
    let (mut sab, mut saa, mut sbb) = (0.0, 0.0, 0.0);
    for (x, y) in a.iter().zip(&b) {
        let (dx, dy) = (x - ma, y - mb);
        sab += dx * dy;
        saa += dx * dx;
        sbb += dy * dy;
    }
    sab / (saa * sbb).sqrt()
}

/// The instances of two segmentations matched by query: (query, IoU of the masks); and the
/// queries kept by one only.
fn matched_iou(a: &Segmentation, b: &Segmentation) -> (Vec<(usize, f64)>, Vec<usize>) {
    let mut pairs = Vec::new();
    let mut alone = Vec::new();
    for x in &a.instances {
        match b.instances.iter().find(|y| y.query == x.query) {
            Some(y) => {
                let inter = x
                    .mask
                    .iter()
                    .zip(&y.mask)
                    .filter(|(p, q)| **p != 0 && **q != 0)
                    .count() as f64;
                let union = x.area as f64 + y.area as f64 - inter;
                pairs.push((x.query, if union > 0.0 { inter / union } else { 1.0 }));
            }
            None => alone.push(x.query),
        }
    }
    for y in &b.instances {
        if !a.instances.iter().any(|x| x.query == y.query) {
            alone.push(y.query);
        }
    }
    (pairs, alone)
}

fn fmt_stat(s: &Option<Stat>, unit_ms: bool) -> String {
    match s {
        Some(s) if unit_ms => format!("{:.0} ms [{:.0}–{:.0}]", s.median, s.min, s.max),
        Some(s) => format!("{:.2} s [{:.2}–{:.2}]", s.median, s.min, s.max),
        None => "failed".into(),
    }
}

fn ratio(a: &Option<Stat>, b: &Option<Stat>) -> Option<f64> {
    Some(a.as_ref()?.median / b.as_ref()?.median)
}

fn fmt_ratio(r: Option<f64>) -> String {
    r.map_or("—".into(), |r| format!("{r:.3}×"))
}

fn met(ok: Option<bool>) -> &'static str {
    match ok {
        Some(true) => "met",
        Some(false) => "not met",
        None => "—",
    }
}

fn main() -> Res<()> {
    let args: Vec<String> = std::env::args().collect();
    if args.get(1).map(String::as_str) == Some("child") {
        return child(&args);
    }
    let arg = |name: &str| {
        args.iter()
            .position(|a| a == name)
            .and_then(|i| args.get(i + 1).cloned())
    };
    let out_dir = PathBuf::from(arg("--out").unwrap_or_else(|| "out".into()));
    let repeat: usize = arg("--repeat").map_or(Ok(3), |r| r.parse())?;
    let Some(models) = arg("--models").or_else(|| std::env::var("SAM2_SAM3_FULL_MODELS").ok())
    else {
        return Err(
            "no export: --models DIR or SAM2_SAM3_FULL_MODELS (tools/setup/setup-sam3-full.sh)"
                .into(),
        );
    };
    let models = PathBuf::from(models);
    let vocab = PathBuf::from(
        arg("--vocab")
            .or_else(|| std::env::var("SAM2_SAM3_VOCAB").ok())
            .ok_or("no vocabulary: --vocab FILE or SAM2_SAM3_VOCAB")?,
    );
    let int8 = arg("--int8")
        .or_else(|| std::env::var("SAM2_SAM3_INT8").ok())
        .map(PathBuf::from);
    let python = std::env::var("SAM2_SAM3_PYTHON")
        .ok()
        .filter(|_| !args.iter().any(|a| a == "--no-torch"));
    let info = sam2::runtime::init(None)?;
    let exe = std::env::current_exe()?;
    let (m, v) = (models.to_string_lossy(), vocab.to_string_lossy());
    let load = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
    eprintln!("[bench_sam3] {} on {m}; load {load}", info.version);

    // Memory first, each in a fresh process, before this one holds anything.
    eprintln!("[bench_sam3] memory: 1 and 4 concept models, one encode's peak");
    let one = run_child(&exe, &["models", "1", &v, &m]);
    let four = run_child(&exe, &["models", "4", &v, &m]);
    let peak_lib = run_child(&exe, &["encode", "lib", &v, &m]);
    let peak_ort = run_child(&exe, &["encode", "ort", &v, &m]);

    // Meta's PyTorch, in its own process, before this one loads anything: memory ONNX Runtime
    // freed is not all returned to the system, and after the encodes this process still held
    // 15 GB, beside which the PyTorch model's build would run the machine out of memory.
    let torch = python.as_ref().and_then(|py| {
        eprintln!("[bench_sam3] Meta's PyTorch set_image ({py})");
        let script = sam2_bench::root().join("tools/bench/sam3_torch.py");
        let out = Command::new(py)
            .arg(&script)
            .args(["--models", &m, "--side", &SIDE.to_string()])
            .args(["--repeat", &repeat.to_string()])
            .output()
            .ok()?;
        let text = String::from_utf8_lossy(&out.stdout);
        let parsed: Option<serde_json::Value> = text
            .lines()
            .last()
            .and_then(|l| serde_json::from_str(l).ok());
        if parsed.is_none() {
            eprintln!(
                "[bench_sam3] sam3_torch.py failed: {}",
                String::from_utf8_lossy(&out.stderr)
            );
        }
        parsed
    });
    let torch_stat = torch.as_ref().and_then(|t| {
        let ms: Vec<f64> = t["seconds"]
            .as_array()?
            .iter()
            .filter_map(|s| s.as_f64().map(|s| s * 1e3))
            .collect();
        (!ms.is_empty()).then(|| stat(ms))
    });

    // Encode: the library from the image, ONNX Runtime alone on the ready tensor, the int8 variant.
    eprintln!("[bench_sam3] encode, {repeat} rounds");
    let rgb = bench_image();
    let view = ImageView::packed(&rgb, SIDE, SIDE, PixelFormat::Rgb)?;
    // The library's image encoder as `ConceptModel::encode` runs it (the same options), loaded
    // alone so that the language encoder's weights are not resident beside a plain session of
    // the image encoder (the concept model is loaded for the phrase, after the encodes).
    let lib_encoder = Encoder::new(
        models.join("sam3_image_encoder.onnx"),
        &EncoderOptions::default(),
    )?;
    let mut encoder = plain_session(&models.join("sam3_image_encoder.onnx"))?;
    let input = chw(&rgb)?;
    let mut plain_features: HashMap<String, DynValue> = HashMap::new();
    // ONNX Runtime alone: one run, its outputs kept for the decoder's inputs.
    let mut plain = || {
        let t = Instant::now();
        let out = encoder.run(ort::inputs!["image" => &input]);
        let ms = ms_since(t);
        match out {
            Ok(mut out) => {
                let names: Vec<String> = out.keys().map(str::to_string).collect();
                for name in names {
                    if let Some(v) = out.remove(&name) {
                        plain_features.insert(name, v);
                    }
                }
                ms
            }
            Err(e) => {
                eprintln!("[bench_sam3] ONNX Runtime alone: {e}");
                f64::NAN
            }
        }
    };
    let timed_encode = |encoder: &Encoder, kept: &mut Option<Embedding>| {
        let t = Instant::now();
        let e = encoder.encode(&view);
        let ms = ms_since(t);
        match e {
            Ok(e) => {
                *kept = Some(e);
                ms
            }
            Err(e) => {
                eprintln!("[bench_sam3] encode: {e}");
                f64::NAN
            }
        }
    };
    // Two sessions of the image encoder at a time: with a third (the int8 variant's) the run
    // peaked at 16 GB resident, each session's arena holding its last run's activations.
    let mut embedding: Option<Embedding> = None;
    let stats = interleaved(
        SETTLE_ORT,
        1,
        repeat,
        &mut [
            &mut || timed_encode(&lib_encoder, &mut embedding),
            &mut plain,
        ],
    );
    drop(lib_encoder);
    let (encode_lib, encode_ort) = (stats[0].clone(), stats[1].clone());
    let mut embedding_int8: Option<Embedding> = None;
    let (encode_int8, encode_ort_beside_int8) = match &int8 {
        Some(d) => {
            let int8_encoder = Encoder::new(
                d.join("sam3_image_encoder.onnx"),
                &EncoderOptions::default(),
            )?;
            eprintln!("[bench_sam3] encode, the int8 variant, {repeat} rounds");
            let stats = interleaved(
                SETTLE_ORT,
                1,
                repeat,
                &mut [
                    &mut || timed_encode(&int8_encoder, &mut embedding_int8),
                    &mut plain,
                ],
            );
            (stats[0].clone(), stats[1].clone())
        }
        None => (None, None),
    };
    drop(encoder);
    let embedding = embedding.ok_or("the library's encode failed")?;
    let model = ConceptModel::new(&models, &model_options(&vocab))?;

    let concepts = [Concept::text(PHRASE)];
    let segment_options = SegmentOptions::default();

    // A phrase on ready features.
    eprintln!("[bench_sam3] a phrase on ready features");
    let first = Instant::now();
    let reference = model.segment(&embedding, &concepts, &segment_options)?;
    let first_ms = ms_since(first);
    let tokens = model.tokens(PHRASE);
    let mut language = plain_session(&models.join("sam3_language_encoder.onnx"))?;
    let ids = Tensor::from_array(([1usize, 32], tokens.ids.to_vec()))?.into_dyn();
    let (text_mask, text_memory) = {
        let mut out = language.run(ort::inputs!["tokens" => &ids])?;
        (
            out.remove("text_attention_mask")
                .ok_or("no text_attention_mask")?,
            out.remove("text_memory").ok_or("no text_memory")?,
        )
    };
    drop(language);
    let mut decoder = plain_session(&models.join("sam3_decoder.onnx"))?;
    let coords = Tensor::from_array(([BOX_SLOTS, 1, 4], vec![0f32; BOX_SLOTS * 4]))?.into_dyn();
    let labels = Tensor::from_array(([BOX_SLOTS, 1], vec![1i64; BOX_SLOTS]))?.into_dyn();
    let empty = Tensor::from_array(([1, BOX_SLOTS], vec![true; BOX_SLOTS]))?.into_dyn();
    let decoder_inputs: Vec<String> = decoder
        .inputs()
        .iter()
        .map(|i| i.name().to_string())
        .collect();
    let decode_rounds = repeat.max(5);
    let stats = {
        let mut lib = || {
            let t = Instant::now();
            let s = model.segment(&embedding, &concepts, &segment_options);
            let ms = ms_since(t);
            black_box(&s);
            if s.is_ok() {
                ms
            } else {
                f64::NAN
            }
        };
        let mut plain = || {
            let mut feeds: Vec<(
                std::borrow::Cow<'_, str>,
                ort::session::SessionInputValue<'_>,
            )> = Vec::new();
            for name in &decoder_inputs {
                let value: &DynValue = match name.as_str() {
                    "language_mask" => &text_mask,
                    "language_features" => &text_memory,
                    "box_coords" => &coords,
                    "box_labels" => &labels,
                    "box_masks" => &empty,
                    other => match plain_features.get(other) {
                        Some(v) => v,
                        None => return f64::NAN,
                    },
                };
                feeds.push((name.as_str().into(), value.into()));
            }
            let t = Instant::now();
            let out = decoder.run(feeds);
            let ms = ms_since(t);
            black_box(&out);
            if out.is_ok() {
                ms
            } else {
                f64::NAN
            }
        };
        interleaved(SETTLE_ORT, 1, decode_rounds, &mut [&mut lib, &mut plain])
    };
    drop(decoder);
    let (segment_lib, segment_ort) = (stats[0].clone(), stats[1].clone());

    // The int8 variant's agreement with float32.
    let variant = int8
        .as_ref()
        .filter(|_| embedding_int8.is_some())
        .map(|d| ConceptModel::new(d, &model_options(&vocab)))
        .transpose()?;
    let agreement = match (&variant, &embedding_int8) {
        (Some(variant), Some(e8)) => {
            let mut levels = Vec::new();
            for (a, b) in embedding.tensors().iter().zip(e8.tensors()) {
                levels.push(correlation(a.host_bytes()?, b.host_bytes()?));
            }
            let s8 = variant.segment(e8, &concepts, &segment_options)?;
            let (pairs, alone) = matched_iou(&reference, &s8);
            Some(json!({
                "feature_correlation": levels,
                "instances_float32": reference.instances.len(),
                "instances_int8": s8.instances.len(),
                "matched_iou": pairs.iter().map(|p| json!({"query": p.0, "iou": p.1})).collect::<Vec<_>>(),
                "kept_by_one_only": alone,
                "presence": [reference.concepts[0].presence, s8.concepts[0].presence],
            }))
        }
        _ => None,
    };
    drop(variant);
    drop(model);

    let load_after = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();

    // The table.
    let encode_ratio = ratio(&encode_lib, &encode_ort);
    let torch_speedup = ratio(&torch_stat, &encode_lib);
    let int8_ratio = ratio(&encode_int8, &encode_ort_beside_int8);
    let segment_ratio = ratio(&segment_lib, &segment_ort);
    let segment_s = segment_lib.as_ref().map(|s| s.median / 1e3);
    let rss = |v: &Option<serde_json::Value>, k: &str| v.as_ref().and_then(|v| v[k].as_f64());
    let (rss_one, rss_four) = (rss(&one, "rss_mib"), rss(&four, "rss_mib"));
    let memory_ratio = rss_one.zip(rss_four).map(|(a, b)| b / a);
    println!("SAM 3, {m}: {SIDE}×{SIDE} RGB, {repeat} rounds ({decode_rounds} for the phrase), medians [min–max]");
    println!("| row | library | ONNX Runtime alone | PyTorch | ratio | goal | met? |");
    println!("|---|---|---|---|---|---|---|");
    println!(
        "| encode, float32 | {} | {} | {} | {} (PyTorch {}) | ≤ 1.0×; ≥ 1.5× faster than PyTorch | {}; {} |",
        fmt_stat(&encode_lib, true),
        fmt_stat(&encode_ort, true),
        fmt_stat(&torch_stat, true),
        fmt_ratio(encode_ratio),
        torch_speedup.map_or("—".into(), |s| format!("{s:.2}× slower than the library")),
        met(encode_ratio.map(|r| r <= 1.0)),
        met(torch_speedup.map(|s| s >= 1.5)),
    );
    if int8.is_some() {
        println!(
            "| encode, int8 variant | {} | {} (float32 file, its own rounds) | — | {} | ≤ 0.6× | {} |",
            fmt_stat(&encode_int8, true),
            fmt_stat(&encode_ort_beside_int8, true),
            fmt_ratio(int8_ratio),
            met(int8_ratio.map(|r| r <= 0.6)),
        );
    }
    println!(
        "| a phrase on ready features | {} | {} | — | {} | ≤ 1.05×; < 3 s | {}; {} |",
        fmt_stat(&segment_lib, true),
        fmt_stat(&segment_ort, true),
        fmt_ratio(segment_ratio),
        met(segment_ratio.map(|r| r <= 1.05)),
        met(segment_s.map(|s| s < 3.0)),
    );
    println!(
        "| resident memory, 4 models against 1 | {} MiB (1: {} MiB) | — | — | {} | ≤ 1.1× | {} |",
        rss_four.map_or("—".into(), |v| format!("{v:.0}")),
        rss_one.map_or("—".into(), |v| format!("{v:.0}")),
        fmt_ratio(memory_ratio),
        met(memory_ratio.map(|r| r <= 1.1)),
    );
    println!(
        "| peak resident memory of one encode | {} MiB (loaded: {} MiB) | {} MiB (loaded: {} MiB) | — | — | — | — |",
        rss(&peak_lib, "peak_encode_mib").map_or("—".into(), |v| format!("{v:.0}")),
        rss(&peak_lib, "loaded_mib").map_or("—".into(), |v| format!("{v:.0}")),
        rss(&peak_ort, "peak_encode_mib").map_or("—".into(), |v| format!("{v:.0}")),
        rss(&peak_ort, "loaded_mib").map_or("—".into(), |v| format!("{v:.0}")),
    );
    println!(
        "first segment of the phrase (the text encoded too): {first_ms:.0} ms; instances: {}; load before {}, after {}",
        reference.instances.len(),
        load.trim(),
        load_after.trim()
    );
    if let Some(a) = &agreement {
        println!("int8 agreement: {a}");
    }
    std::fs::create_dir_all(&out_dir)?;
    let report = json!({
        "models": m,
        "side": SIDE,
        "phrase": PHRASE,
        "onnxruntime": info.version,
        "rounds": repeat,
        "phrase_rounds": decode_rounds,
        "load_before": load.trim(),
        "load_after": load_after.trim(),
        "encode_ms": {"library": stat_json(&encode_lib), "onnxruntime_alone": stat_json(&encode_ort),
                      "int8_variant": stat_json(&encode_int8),
                      "onnxruntime_alone_beside_int8": stat_json(&encode_ort_beside_int8), "pytorch": stat_json(&torch_stat)},
        "encode_ratio": encode_ratio,
        "pytorch_over_library": torch_speedup,
        "int8_over_onnxruntime_float32": int8_ratio,
        "pytorch": torch,
        "phrase_ms": {"library": stat_json(&segment_lib), "onnxruntime_alone": stat_json(&segment_ort),
                      "first_call_with_text": first_ms},
        "phrase_ratio": segment_ratio,
        "instances": reference.instances.len(),
        "memory": {"one_model": one, "four_models": four, "four_over_one": memory_ratio,
                   "encode_peak_library": peak_lib, "encode_peak_onnxruntime_alone": peak_ort},
        "int8_agreement": agreement,
    });
    let path = out_dir.join("bench_sam3.json");
    std::fs::write(&path, serde_json::to_string_pretty(&report)?)?;
    eprintln!("[bench_sam3] wrote {}", path.display());
    Ok(())
}
