//! A one-line progress indication on stderr while a long step runs (model load, encode): the
//! step's name and the seconds elapsed, redrawn in place, only when stderr is a terminal.

use std::io::{IsTerminal, Write};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

pub struct Step {
    done: Arc<AtomicBool>,
    ticker: Option<std::thread::JoinHandle<()>>,
}

/// Starts showing `label`; the line is cleared when the returned value is dropped.
pub fn step(label: &str) -> Step {
    let done = Arc::new(AtomicBool::new(false));
    if !std::io::stderr().is_terminal() {
        return Step { done, ticker: None };
    }
    let (flag, label) = (done.clone(), label.to_string());
    let ticker = std::thread::spawn(move || {
        let start = Instant::now();
        const SPIN: [char; 4] = ['|', '/', '-', '\\'];
        let mut i = 0;
        while !flag.load(Ordering::Relaxed) {
            let mut err = std::io::stderr().lock();
            let _ = write!(
                err,
                "\r{} {label} {:.1} s ",
                SPIN[i % 4],
                start.elapsed().as_secs_f32()
            );
            let _ = err.flush();
            drop(err);
            i += 1;
            std::thread::sleep(Duration::from_millis(120));
        }
        let _ = write!(std::io::stderr(), "\r\x1b[2K");
    });
    Step {
        done,
        ticker: Some(ticker),
    }
}

impl Drop for Step {
    fn drop(&mut self) {
        self.done.store(true, Ordering::Relaxed);
        if let Some(t) = self.ticker.take() {
            let _ = t.join();
        }
    }
}
