//! The peer co-process (tools/bench/bench_peer.py) and the load of other processes.

use super::*;

pub(crate) struct Peer {
    pub(crate) child: std::process::Child,
    pub(crate) stdin: std::process::ChildStdin,
    pub(crate) stdout: std::io::BufReader<std::process::ChildStdout>,
    pub(crate) error: Option<String>,
}

impl Peer {
    pub(crate) fn start(
        python: &str,
        image: &Path,
        encoder: &Path,
        decoder: &Path,
    ) -> Option<Peer> {
        let script = sam2_bench::root().join("tools/bench/bench_peer.py");
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

    pub(crate) fn read(&mut self) -> Option<Value> {
        use std::io::BufRead;
        let mut line = String::new();
        match self.stdout.read_line(&mut line) {
            Ok(n) if n > 0 => serde_json::from_str(&line).ok(),
            _ => None,
        }
    }

    /// Sends one command; None (and the error kept) when the peer failed.
    pub(crate) fn call(&mut self, cmd: &str) -> Option<Value> {
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
    pub(crate) fn ms(&mut self, cmd: &str) -> f64 {
        self.call(cmd)
            .and_then(|v| v.get("ms").and_then(Value::as_f64))
            .unwrap_or(f64::NAN)
    }

    pub(crate) fn pid(&self) -> u32 {
        self.child.id()
    }

    pub(crate) fn quit(mut self) {
        let _ = writeln!(self.stdin, "quit");
        let _ = self.stdin.flush();
        let _ = self.child.wait();
    }
}

/// CPU time (ticks) of this process, its reaped children, and the peer, and of the whole machine.
#[derive(Clone, Copy)]
pub(crate) struct CpuSnap {
    pub(crate) at: Instant,
    pub(crate) machine_busy: u64,
    pub(crate) own: u64,
}

pub(crate) fn proc_ticks(stat_path: &str, with_children: bool) -> u64 {
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

pub(crate) fn cpu_snap(peer_pid: Option<u32>) -> CpuSnap {
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
pub(crate) fn other_cores(a: CpuSnap, b: CpuSnap) -> f64 {
    // SAFETY: sysconf has no preconditions.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) }.max(1) as f64;
    let secs = b.at.duration_since(a.at).as_secs_f64().max(1e-3);
    let other =
        b.machine_busy.saturating_sub(a.machine_busy) as f64 - b.own.saturating_sub(a.own) as f64;
    (other / hz / secs).max(0.0)
}
