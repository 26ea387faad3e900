//! Resident memory of N encoder sessions of the bench model: shared weights (the default), explicit
//! copies, and naive ONNX Runtime sessions, side by side. Each configuration runs in its own
//! process so the figures do not contaminate each other.
//!
//!     cargo run --release -p sam2-bench --bin bench_memory [-- --json out/bench_memory.json]

use std::process::Command;
use std::time::Instant;

use ort::session::builder::GraphOptimizationLevel;
use ort::session::Session;
use ort::value::Tensor;
use sam2::device::Optimization;
use sam2::device::WeightSharing;
use sam2::{Encoder, EncoderOptions};

fn rss_anon_mb() -> f64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    let line = status.lines().find(|l| l.starts_with("RssAnon:")).unwrap();
    let kb: f64 = line.split_whitespace().nth(1).unwrap().parse().unwrap();
    kb / 1024.0
}

fn input() -> Vec<f32> {
    (0..3 * 1024 * 1024)
        .map(|i| ((i * 7919) % 255) as f32 / 128.0 - 1.0)
        .collect()
}

fn child(mode: &str, level: &str, n: usize, model: &str) {
    sam2::runtime::init(None).unwrap();
    let env = sam2::runtime::environment().unwrap();
    let base = rss_anon_mb();
    // One input for every session (a copy per session would be counted as session memory).
    let data = std::sync::Arc::new(input());
    let mut times = Vec::new();
    let mut run_all: Vec<Box<dyn FnMut() -> f64>> = Vec::new();
    for _ in 0..n {
        match mode {
            "naive" => {
                let mut session = Session::builder(env)
                    .unwrap()
                    .with_optimization_level(if level == "all" {
                        GraphOptimizationLevel::All
                    } else {
                        GraphOptimizationLevel::Level1
                    })
                    .unwrap()
                    .commit_from_file(model)
                    .unwrap();
                let data = data.clone();
                run_all.push(Box::new(move || {
                    let t = Instant::now();
                    let input =
                        Tensor::from_array(([1usize, 3, 1024, 1024], data.to_vec())).unwrap();
                    let out = session.run(ort::inputs!["image" => input]).unwrap();
                    drop(out);
                    t.elapsed().as_secs_f64() * 1e3
                }));
            }
            _ => {
                let mut options = EncoderOptions::default();
                options.session.weights = if mode == "copy" {
                    WeightSharing::Copy
                } else {
                    WeightSharing::Shared
                };
                options.session.optimization = if level == "all" {
                    Optimization::All
                } else {
                    Optimization::Basic
                };
                let encoder = Encoder::new(model, &options).unwrap();
                let data = data.clone();
                run_all.push(Box::new(move || {
                    let input = Tensor::from_array(([1usize, 3, 1024, 1024], data.to_vec()))
                        .unwrap()
                        .into_dyn();
                    let t = Instant::now();
                    let e = encoder.encode_prepared(&input, 1024, 1024).unwrap();
                    drop(e);
                    t.elapsed().as_secs_f64() * 1e3
                }));
            }
        }
    }
    let created = rss_anon_mb() - base;
    for run in run_all.iter_mut() {
        run();
    }
    let after_runs = rss_anon_mb() - base;
    // Speed of one session, after warm-up.
    for _ in 0..3 {
        times.push(run_all[0]());
    }
    println!(
        "RESULT {mode} {level} {n} {created:.1} {after_runs:.1} {:.1}",
        sam2_bench::stats::median(&times)
    );
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if args.get(1).map(String::as_str) == Some("child") {
        child(&args[2], &args[3], args[4].parse().unwrap(), &args[5]);
        return;
    }
    let json_path = args
        .iter()
        .position(|a| a == "--json")
        .map(|i| args[i + 1].clone());
    let models = std::env::var("SAM2_MODELS").unwrap_or_else(|_| "models".into());
    let model = format!("{models}/bench_a_encoder.onnx");
    let weight_mb = std::fs::metadata(&model).unwrap().len() as f64 / 1048576.0;
    let exe = std::env::current_exe().unwrap();
    println!("bench_a_encoder.onnx: {weight_mb:.1} MiB of weights; resident anonymous memory (RssAnon) added by N sessions");
    println!(
        "{:<8} {:<6} {:>3} {:>16} {:>18} {:>12} {:>16}",
        "mode",
        "optim",
        "N",
        "after create MiB",
        "after one run MiB",
        "encode ms",
        "per extra session"
    );
    let mut rows = Vec::new();
    for level in ["basic", "all"] {
        for mode in ["shared", "copy", "naive"] {
            let mut first = None;
            for n in [1usize, 2, 4, 8] {
                let out = Command::new(&exe)
                    .args(["child", mode, level, &n.to_string(), &model])
                    .output()
                    .unwrap();
                let text = String::from_utf8_lossy(&out.stdout);
                let Some(line) = text.lines().find(|l| l.starts_with("RESULT")) else {
                    eprintln!(
                        "{mode} {level} {n} failed: {}",
                        String::from_utf8_lossy(&out.stderr)
                    );
                    continue;
                };
                let f: Vec<&str> = line.split_whitespace().collect();
                let (created, ran, ms): (f64, f64, f64) = (
                    f[4].parse().unwrap(),
                    f[5].parse().unwrap(),
                    f[6].parse().unwrap(),
                );
                let per_extra = match first {
                    None => {
                        first = Some(created);
                        String::from("-")
                    }
                    Some(one) => format!(
                        "{:.1} MiB ({:.1}%)",
                        (created - one) / (n - 1) as f64,
                        100.0 * (created - one) / (n - 1) as f64 / weight_mb
                    ),
                };
                println!("{mode:<8} {level:<6} {n:>3} {created:>16.1} {ran:>18.1} {ms:>12.1} {per_extra:>16}");
                rows.push(format!(
                    "{{\"mode\":\"{mode}\",\"optimization\":\"{level}\",\"sessions\":{n},\"rss_after_create_mib\":{created:.1},\"rss_after_run_mib\":{ran:.1},\"encode_ms\":{ms:.1}}}"
                ));
            }
        }
    }
    if let Some(path) = json_path {
        std::fs::write(
            &path,
            format!(
                "{{\"weights_mib\":{weight_mb:.1},\"rows\":[{}]}}\n",
                rows.join(",")
            ),
        )
        .unwrap();
        println!("wrote {path}");
    }
}
