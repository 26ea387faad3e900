//! What each load-time rewrite buys: every model family the tests ship, loaded with every rewrite
//! on, with each rewrite that ran on it switched off alone, and with all of them off, timed side by
//! side in one run (interleaved rounds, the order rotated). The image encoders time an encode of
//! the demo image; the video exports time a tracked frame at steady state (after the memory bank
//! has filled). A rewrite whose figure shows no gain on any family is a candidate for removal
//! (docs/performance.md, "What each rewrite buys").
//!
//!   bench_rewrites [--out DIR] [--runs N]
//!
//! Reads `$SAM2_REAL_MODELS` (SAM2.1 tiny), `$SAM2_EDGETAM_MODELS` and `$SAM2_VIDEO_MODELS`;
//! a family whose variable is unset is skipped with a line saying so. Writes
//! `DIR/bench_rewrites.json`.

use std::path::{Path, PathBuf};

use sam2::models::{Rewrite, RewriteReport, Rewrites};
use sam2::video::{Direction, Tracker, TrackerOptions, VideoModelPaths};
use sam2::{Encoder, EncoderOptions, ImageView, PixelFormat, Point, Prompt};
use sam2_bench::stats::{interleaved, timed, Stat, SETTLE_ORT};
use sam2_bench::{root, track_clip};
use serde_json::{json, Value};

type Res<T> = Result<T, Box<dyn std::error::Error>>;

/// Frames tracked before timing: from frame 16 on a frame attends to a full memory bank.
const WARM_FRAMES: u32 = 17;
/// The video frames' size.
const FRAME: (usize, usize) = (640, 480);

/// The configurations of one family, from the counts of the rewrites that ran on it: every
/// rewrite on, each that ran off alone, all off.
fn configurations(counts: &[(Rewrite, usize)]) -> Vec<(String, Rewrites)> {
    let mut out = vec![("every rewrite on".to_string(), Rewrites::ALL)];
    for (r, n) in counts {
        if *n > 0 {
            out.push((format!("{r} off ({n} made)"), Rewrites::ALL.without(*r)));
        }
    }
    out.push(("every rewrite off".to_string(), Rewrites::NONE));
    out
}

/// Each rewrite's count summed over `reports` (a video export's four modules).
fn summed(reports: &[RewriteReport]) -> Vec<(Rewrite, usize)> {
    Rewrite::ALL
        .iter()
        .map(|r| {
            let n = reports
                .iter()
                .flat_map(|report| report.counts())
                .filter(|(c, _)| c == r)
                .map(|(_, n)| n)
                .sum();
            (*r, n)
        })
        .collect()
}

fn demo() -> Res<(Vec<u8>, usize, usize)> {
    let data = std::fs::read(root().join("testdata/demo.ppm"))?;
    let text = String::from_utf8_lossy(&data[..64.min(data.len())]).to_string();
    let fields: Vec<&str> = text.split_ascii_whitespace().take(4).collect();
    let (w, h): (usize, usize) = (fields[1].parse()?, fields[2].parse()?);
    let header = fields.iter().map(|f| f.len() + 1).sum::<usize>();
    Ok((data[header..header + w * h * 3].to_vec(), w, h))
}

/// One family's rows: (configuration, stat), the first row every rewrite on.
fn print_rows(family: &str, what: &str, rows: &[(String, Option<Stat>)]) -> Value {
    println!("\n{family}: {what}, median ms (min–max) and against every rewrite on");
    let base = rows[0].1.as_ref().map(|s| s.median);
    let mut json_rows = Vec::new();
    for (name, stat) in rows {
        match (stat, base) {
            (Some(s), Some(b)) => {
                println!(
                    "  {name:<44} {:>9.1} ({:.1}–{:.1})  {:.3}×",
                    s.median,
                    s.min,
                    s.max,
                    s.median / b
                );
                json_rows.push(json!({"configuration": name, "median_ms": s.median,
                    "min_ms": s.min, "max_ms": s.max, "ratio": s.median / b}));
            }
            _ => println!("  {name:<44} failed"),
        }
    }
    json!({"family": family, "measure": what, "rows": json_rows})
}

fn encoders(runs: usize) -> Res<Vec<Value>> {
    let (rgb, w, h) = demo()?;
    let view = ImageView::packed(&rgb, w, h, PixelFormat::Rgb)?;
    let mut families: Vec<(&str, PathBuf)> = Vec::new();
    match std::env::var_os("SAM2_REAL_MODELS") {
        Some(d) => families.push((
            "SAM2.1 tiny image encoder",
            Path::new(&d).join("sam2.1_hiera_tiny.encoder.onnx"),
        )),
        None => println!("SAM2_REAL_MODELS unset: SAM2.1's encoder skipped"),
    }
    match std::env::var_os("SAM2_EDGETAM_MODELS") {
        Some(d) => families.push((
            "EdgeTAM image encoder",
            Path::new(&d).join("edgetam_image_encoder.onnx"),
        )),
        None => println!("SAM2_EDGETAM_MODELS unset: EdgeTAM's encoder skipped"),
    }
    let mut out = Vec::new();
    for (family, path) in families {
        let on = Encoder::new(&path, &EncoderOptions::default())?;
        let configs = configurations(&on.attention_fusion().counts());
        drop(on);
        let encoders: Vec<Encoder> = configs
            .iter()
            .map(|(_, rewrites)| {
                let mut o = EncoderOptions::default();
                o.session.rewrites = *rewrites;
                Encoder::new(&path, &o)
            })
            .collect::<Result<_, _>>()?;
        let mut calls: Vec<Box<dyn FnMut() -> f64>> = encoders
            .iter()
            .map(|e| {
                let view = &view;
                Box::new(move || timed(|| drop(e.encode(view).expect("encodes"))))
                    as Box<dyn FnMut() -> f64>
            })
            .collect();
        let mut refs: Vec<&mut dyn FnMut() -> f64> =
            calls.iter_mut().map(|c| c.as_mut() as _).collect();
        let stats = interleaved(SETTLE_ORT, 1, runs, &mut refs);
        let rows: Vec<(String, Option<Stat>)> =
            configs.into_iter().map(|(n, _)| n).zip(stats).collect();
        out.push(print_rows(family, "an encode of the demo image", &rows));
    }
    Ok(out)
}

fn frame(t: u32) -> Vec<u8> {
    let (w, h) = FRAME;
    let (src, _, _) = track_clip::frame(track_clip::back_and_forth(t));
    let (sw, sh) = (track_clip::WIDTH, track_clip::HEIGHT);
    let mut rgb = vec![0u8; w * h * 3];
    for y in 0..h {
        for x in 0..w {
            let s = ((y * sh / h) * sw + x * sw / w) * 3;
            rgb[(y * w + x) * 3..][..3].copy_from_slice(&src[s..s + 3]);
        }
    }
    rgb
}

fn trackers(runs: usize) -> Res<Vec<Value>> {
    let mut families: Vec<(&str, VideoModelPaths)> = Vec::new();
    for (family, var) in [
        ("SAM2.1 tiny video export", "SAM2_VIDEO_MODELS"),
        ("EdgeTAM video export", "SAM2_EDGETAM_MODELS"),
    ] {
        match std::env::var_os(var) {
            Some(d) => families.push((family, VideoModelPaths::find(Path::new(&d))?)),
            None => println!("{var} unset: the {family} skipped"),
        }
    }
    let (w, h) = FRAME;
    let (cx, cy) = track_clip::target_centre(0);
    let prompt = Prompt {
        points: vec![Point {
            x: cx as f32 * w as f32 / track_clip::WIDTH as f32,
            y: cy as f32 * h as f32 / track_clip::HEIGHT as f32,
            positive: true,
        }],
        ..Default::default()
    };
    let mut out = Vec::new();
    for (family, paths) in families {
        let on = Tracker::new(&paths, &TrackerOptions::default())?;
        let reports: Vec<RewriteReport> =
            on.attention_fusion().into_iter().map(|(_, r)| r).collect();
        drop(on);
        let configs = configurations(&summed(&reports));
        let trackers: Vec<Tracker> = configs
            .iter()
            .map(|(_, rewrites)| {
                let mut o = TrackerOptions::default();
                o.session.rewrites = *rewrites;
                Tracker::new(&paths, &o)
            })
            .collect::<Result<_, _>>()?;
        let first = frame(0);
        let view = ImageView::packed(&first, w, h, PixelFormat::Rgb)?;
        for t in &trackers {
            t.add_prompt(0, &view, 1, &prompt)?;
        }
        for k in 1..=WARM_FRAMES {
            let rgb = frame(k);
            let view = ImageView::packed(&rgb, w, h, PixelFormat::Rgb)?;
            for t in &trackers {
                t.track(k, &view, Direction::Forward)?;
            }
        }
        // Each round tracks the next frame on every tracker (the order rotated by `interleaved`).
        let mut calls: Vec<Box<dyn FnMut() -> f64>> = trackers
            .iter()
            .map(|t| {
                let mut k = WARM_FRAMES;
                Box::new(move || {
                    k += 1;
                    let rgb = frame(k);
                    let view = ImageView::packed(&rgb, w, h, PixelFormat::Rgb).expect("a frame");
                    timed(|| drop(t.track(k, &view, Direction::Forward).expect("tracks")))
                }) as Box<dyn FnMut() -> f64>
            })
            .collect();
        let mut refs: Vec<&mut dyn FnMut() -> f64> =
            calls.iter_mut().map(|c| c.as_mut() as _).collect();
        let stats = interleaved(SETTLE_ORT, 0, runs, &mut refs);
        let rows: Vec<(String, Option<Stat>)> =
            configs.into_iter().map(|(n, _)| n).zip(stats).collect();
        out.push(print_rows(
            family,
            &format!("a tracked frame of {w}×{h} at steady state"),
            &rows,
        ));
    }
    Ok(out)
}

fn main() -> Res<()> {
    let mut out_dir = root().join("out");
    let mut runs = 5usize;
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        match a.as_str() {
            "--out" => out_dir = PathBuf::from(args.next().ok_or("--out needs a directory")?),
            "--runs" => runs = args.next().ok_or("--runs needs a number")?.parse()?,
            other => return Err(format!("unknown argument {other}").into()),
        }
    }
    sam2::runtime::init(None)?;
    println!(
        "What each load-time rewrite buys (CPU, {} cores; {runs} interleaved rounds)",
        std::thread::available_parallelism().map_or(0, |n| n.get())
    );
    let mut families = encoders(runs)?;
    families.extend(trackers(runs)?);
    std::fs::create_dir_all(&out_dir)?;
    std::fs::write(
        out_dir.join("bench_rewrites.json"),
        serde_json::to_string_pretty(&json!({ "families": families }))?,
    )?;
    Ok(())
}
