//! `sam2`: segment your own images with Segment Anything 2 from the command line.
//! `sam2 --help` says how; docs/cli.md says more.

mod args;
mod batch;
mod common;
mod concept;
mod encode;
mod everything;
mod failure;
mod info;
mod picture;
mod progress;
mod segment;
mod shard;
mod track;
mod track_batch;
mod track_out;
mod video_file;

use std::process::ExitCode;

use args::Command;
use failure::{exit, Failure};

/// Replaces the default panic hook (which prints "thread panicked" and, with `RUST_BACKTRACE`, a
/// backtrace) by one that only keeps the message, for [`guarded`] to print as its one line.
fn install_panic_hook() {
    std::panic::set_hook(Box::new(|info| {
        let what = info
            .payload()
            .downcast_ref::<&str>()
            .map(|s| s.to_string())
            .or_else(|| info.payload().downcast_ref::<String>().cloned())
            .unwrap_or_else(|| "a panic".to_string());
        let at = info
            .location()
            .map(|l| format!(" at {}:{}", l.file(), l.line()))
            .unwrap_or_default();
        *PANIC.lock().unwrap_or_else(|p| p.into_inner()) = Some(format!("{what}{at}"));
    }));
}

/// Runs the command (or one input of a batch); a panic (a bug: every expected failure is a
/// [`Failure`]) becomes exit 1 with one line.
pub(crate) fn guarded<T>(command: impl FnOnce() -> Result<T, Failure>) -> Result<T, Failure> {
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(command)).unwrap_or_else(|_| {
        let what = PANIC
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .take()
            .unwrap_or_else(|| "a panic".to_string());
        Err(Failure::new(
            exit::INTERNAL,
            format!("internal error ({what}); please report it"),
        ))
    })
}

/// The message of the last panic, kept by the panic hook for `main` to print as its one line
/// (the default hook would print "thread panicked" and, with `RUST_BACKTRACE`, a backtrace).
static PANIC: std::sync::Mutex<Option<String>> = std::sync::Mutex::new(None);

fn main() -> ExitCode {
    install_panic_hook();
    let result =
        guarded(
            || match args::utf8(std::env::args_os().skip(1).collect()).and_then(args::parse) {
                Err(args::Usage(text)) => Err(Failure::new(exit::USAGE, text)),
                Ok(invocation) => {
                    if invocation.quiet {
                        progress::silence();
                    }
                    run(invocation.command)
                }
            },
        );
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(f) => {
            eprintln!("sam2: {}", f.message.replace('\n', " "));
            ExitCode::from(f.code)
        }
    }
}

fn run(command: Command) -> Result<(), Failure> {
    match command {
        Command::Show(help_or_version) => {
            // Help and the version go to stdout; a closed pipe (`sam2 --help | head`) is fine.
            let _ = help_or_version.print();
            Ok(())
        }
        Command::Completions(shell) => {
            clap_complete::generate(shell, &mut args::command(), "sam2", &mut std::io::stdout());
            Ok(())
        }
        Command::Everything(e) => everything::run(e),
        Command::Segment(s) => segment::run(s),
        Command::Encode(e) => encode::run(e),
        Command::Info(i) => info::run(i),
        Command::Track(t) => track::run(t),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_panic_is_exit_1_with_one_line_naming_it() {
        install_panic_hook();
        let failure = guarded::<()>(|| panic!("index 9 out of\nrange")).unwrap_err();
        assert_eq!(failure.code, exit::INTERNAL);
        assert!(
            failure.message.contains("index 9 out of") && failure.message.contains("main.rs"),
            "{}",
            failure.message
        );
        let failure = guarded::<()>(|| Err(Failure::new(exit::INPUT, "bad"))).unwrap_err();
        assert_eq!(
            (failure.code, failure.message.as_str()),
            (exit::INPUT, "bad")
        );
        let _ = std::panic::take_hook();
    }
}
