//! Resident memory of 1, 2, 4 and 8 encoder sessions: the library's with shared weights (its
//! default) and with copied weights, and naive ONNX Runtime sessions. Each configuration is
//! measured in a child process of this binary (`--memory-child`), so that the figures do not
//! contaminate each other.

use super::*;

/// Per mode (shared, copied, naive): RssAnon added (MiB) and seconds to create the sessions.
pub(crate) type MemoryRow = [Option<(f64, f64)>; 3];

/// The encoder file's size (one copy of the weights), and a [`MemoryRow`] per number of sessions.
pub(crate) struct Memory {
    pub(crate) weights_mib: f64,
    pub(crate) rows: Vec<(usize, MemoryRow)>,
}

/// The resident memory section: a child process per number of sessions and mode.
pub(crate) fn resident_memory(run: &Run) -> Res<Memory> {
    let exe = std::env::current_exe()?;
    let weights_mib = std::fs::metadata(&run.encoder_path)?.len() as f64 / 1048576.0;
    let mut memory: Vec<(usize, MemoryRow)> = Vec::new();
    for n in [1usize, 2, 4, 8] {
        let mut per_mode = [None, None, None];
        for (i, mode) in ["shared", "copy", "naive"].iter().enumerate() {
            let out = Command::new(&exe)
                .args(["--memory-child", mode, &n.to_string()])
                .arg(&run.encoder_path)
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
    Ok(Memory {
        weights_mib,
        rows: memory,
    })
}

pub(crate) fn rss_anon_mib() -> f64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find(|l| l.starts_with("RssAnon:"))
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|v| v.parse::<f64>().ok())
        .map_or(f64::NAN, |kb| kb / 1024.0)
}

/// Child process: resident anonymous memory added by creating `n` encoder sessions.
pub(crate) fn memory_child(mode: &str, n: usize, model: &str) -> Res<()> {
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
