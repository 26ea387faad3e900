//! Progress on stderr (indicatif), only when stderr is a terminal and `--quiet` was not given, so
//! a pipe or a log gets nothing of it: a spinner with the time elapsed for a step whose length is
//! not known (a model load, an encode), a bar with the rate and the time left for work counted in
//! units (the frames of `sam2 track`, the clicks of `sam2 everything`, a batch's inputs).

use std::io::IsTerminal;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use indicatif::{ProgressBar, ProgressState, ProgressStyle};

static QUIET: AtomicBool = AtomicBool::new(false);
/// A batch's bar over its inputs is shown: the steps and bars of each input are not (two bars
/// would overwrite each other's line).
static IN_BATCH: AtomicBool = AtomicBool::new(false);

/// `--quiet`: no progress at all.
pub fn silence() {
    QUIET.store(true, Ordering::Relaxed);
}

fn shown() -> bool {
    !QUIET.load(Ordering::Relaxed)
        && !IN_BATCH.load(Ordering::Relaxed)
        && std::io::stderr().is_terminal()
}

/// A step in progress; its line is cleared when it is dropped.
pub struct Step(ProgressBar);

/// Starts showing `label` and the time elapsed.
pub fn step(label: &str) -> Step {
    if !shown() {
        return Step(ProgressBar::hidden());
    }
    let spinner = ProgressBar::new_spinner()
        .with_style(
            ProgressStyle::with_template("{spinner} {msg} {elapsed}")
                .expect("a valid template")
                .tick_chars("|/-\\ "),
        )
        .with_message(label.to_string());
    spinner.enable_steady_tick(Duration::from_millis(120));
    Step(spinner)
}

impl Drop for Step {
    fn drop(&mut self) {
        self.0.finish_and_clear();
    }
}

/// Work counted in `unit`s: done of all, the rate and the time left; cleared when dropped.
pub struct Bar(ProgressBar, bool);

impl Bar {
    /// A batch's bar over its `total` inputs; while it lives, each input's own progress is not
    /// shown.
    pub fn over_inputs(total: u64, unit: &str) -> Bar {
        let mut bar = Bar::new(total, unit);
        bar.1 = true;
        IN_BATCH.store(true, Ordering::Relaxed);
        bar
    }

    /// Says what is being done now.
    pub fn message(&self, what: &str) {
        self.0.set_message(what.to_string());
    }

    pub fn new(total: u64, unit: &str) -> Bar {
        if !shown() {
            return Bar(ProgressBar::hidden(), false);
        }
        // The rate and the time left once a unit is done (before, they would be made up).
        let unit_per_second = format!("{unit}/s");
        let style = ProgressStyle::with_template(&format!(
            "[{{bar:20}}] {{pos}}/{{len}} {unit}{{speed}} {{wide_msg}}"
        ))
        .expect("a valid template")
        .progress_chars("#> ")
        .with_key(
            "speed",
            move |state: &ProgressState, w: &mut dyn std::fmt::Write| {
                if state.pos() > 0 {
                    let _ = write!(
                        w,
                        " ({:.1} {unit_per_second}, {} left)",
                        state.per_sec(),
                        short(state.eta())
                    );
                }
            },
        );
        let bar = ProgressBar::new(total).with_style(style);
        // Redrawn every second too, so the time left moves while one unit takes long.
        bar.enable_steady_tick(Duration::from_secs(1));
        Bar(bar, false)
    }

    /// `done` of `total` (for work whose total is known once it starts).
    pub fn set(&self, done: u64, total: u64) {
        self.0.set_length(total);
        self.0.set_position(done);
    }

    /// One more unit done; `what` says which.
    pub fn advance(&self, what: String) {
        self.0.set_message(what);
        self.0.inc(1);
    }
}

/// `42s`, `3m05s`, `2h07m`: a time left that fits beside the bar.
fn short(time: Duration) -> String {
    let s = time.as_secs();
    match s {
        0..=59 => format!("{s}s"),
        60..=3599 => format!("{}m{:02}s", s / 60, s % 60),
        _ => format!("{}h{:02}m", s / 3600, s / 60 % 60),
    }
}

impl Drop for Bar {
    fn drop(&mut self) {
        if self.1 {
            IN_BATCH.store(false, Ordering::Relaxed);
        }
        self.0.finish_and_clear();
    }
}
