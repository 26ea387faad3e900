//! A panic caught at the C boundary reaches the host as SAM2_ERR_PANIC with its message in
//! sam2_last_error_message and one SAM2_LOG_ERROR line through the log callback; nothing is
//! written on the host's stderr (it used to print "thread … panicked at …" and, with
//! RUST_BACKTRACE, a backtrace). A hook the host installed before still receives the host's own
//! panics. Each case runs in a child process: the panic hook is process-wide.

use std::ffi::{c_char, c_void, CStr, CString};
use std::process::Command;

use sam2_capi::sam2_status;
use sam2_capi::test_support::sam2_test_panic;

const CHILD: &str = "SAM2_PANIC_HOOK_CHILD";

unsafe extern "C" fn log_to_stdout(level: u32, message: *const c_char, _: *mut c_void) {
    // SAFETY: the library passes a NUL-terminated message.
    let text = unsafe { CStr::from_ptr(message) }.to_string_lossy();
    println!("log\t{level}\t{text}");
}

fn last_error() -> String {
    let mut buf = vec![0 as c_char; 1024];
    let mut needed = 0;
    sam2_capi::runtime::sam2_last_error_message(buf.as_mut_ptr(), buf.len(), &mut needed);
    // SAFETY: NUL-terminated by sam2_last_error_message.
    unsafe { CStr::from_ptr(buf.as_ptr()) }
        .to_string_lossy()
        .into_owned()
}

/// The child: with `SAM2_PANIC_HOOK_CHILD=host`, installs a host hook (printing "host hook: …"
/// on stdout; with `default` Rust's own hook stays, printing on stderr), then the log callback,
/// then panics through the ABI (on the calling thread and on a pool worker) and on its own.
#[test]
fn child() {
    let Some(mode) = std::env::var_os(CHILD) else {
        return;
    };
    // The harness prints "test child ... " without a newline: start the child's lines afresh.
    println!();
    if mode == "host" {
        std::panic::set_hook(Box::new(|info| {
            let payload = info.payload();
            let text = payload
                .downcast_ref::<&str>()
                .copied()
                .or(payload.downcast_ref::<String>().map(String::as_str))
                .unwrap_or("?");
            println!("host hook: {text}");
        }));
    }
    sam2_capi::runtime::sam2_set_log_callback(
        Some(log_to_stdout),
        std::ptr::null_mut(),
        sam2_capi::runtime::SAM2_LOG_DEBUG,
    );
    for (on_worker, text) in [(0, "boom on the caller"), (1, "boom on a worker")] {
        let message = CString::new(text).unwrap();
        let status = sam2_test_panic(message.as_ptr(), on_worker);
        println!("status\t{status:?}\t{}", last_error());
        assert_eq!(status, sam2_status::SAM2_ERR_PANIC);
    }
    // The host's own panic still reaches the host's hook.
    let _ = std::panic::catch_unwind(|| panic!("the host's own panic"));
    println!("child done");
}

/// Runs the child in `mode`, with `RUST_BACKTRACE=1`.
fn run_child(mode: &str) -> std::process::Output {
    Command::new(std::env::current_exe().unwrap())
        .args(["--exact", "child", "--nocapture", "--test-threads=1"])
        .env(CHILD, mode)
        .env("RUST_BACKTRACE", "1")
        .output()
        .unwrap()
}

/// With Rust's default hook (a C host): the host's own panic is still printed on stderr, the
/// library's are not.
#[test]
fn a_caught_panic_is_not_printed_on_stderr() {
    let out = run_child("default");
    let (stdout, stderr) = (
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
    );
    println!("child stdout:\n{stdout}\nchild stderr:\n{stderr}");
    assert!(
        out.status.success() && stdout.contains("child done"),
        "{stdout}\n{stderr}"
    );
    for text in ["boom on the caller", "boom on a worker"] {
        assert!(!stderr.contains(text), "{text:?} on stderr:\n{stderr}");
    }
    assert_eq!(stderr.matches("panicked").count(), 1, "{stderr}");
    assert!(stderr.contains("the host's own panic"), "{stderr}");
}

/// With a hook of the host's: the library's panics reach the host as a status, the last error
/// and the log, and the host's hook keeps receiving the host's own panics.
#[test]
fn a_caught_panic_is_reported_to_the_host_and_the_hosts_hook_is_kept() {
    let out = run_child("host");
    let (stdout, stderr) = (
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
    );
    println!("child stdout:\n{stdout}\nchild stderr:\n{stderr}");
    assert!(
        out.status.success() && stdout.contains("child done"),
        "{stdout}\n{stderr}"
    );
    for text in ["boom on the caller", "boom on a worker"] {
        assert!(!stderr.contains(text), "{text:?} on stderr:\n{stderr}");
        // The status and its message...
        assert!(
            stdout
                .lines()
                .any(|l| l.starts_with("status\tSAM2_ERR_PANIC\t")
                    && l.contains(&format!("internal error (panic): {text}"))),
            "{text:?}: {stdout}"
        );
        // ... and one line through the log callback (level 3: SAM2_LOG_ERROR), with the place.
        let logged: Vec<&str> = stdout
            .lines()
            .filter(|l| l.starts_with("log\t3\tinternal error (panic) at ") && l.contains(text))
            .collect();
        assert_eq!(logged.len(), 1, "{text:?}: {stdout}");
        assert!(logged[0].contains("test_support.rs:"), "{}", logged[0]);
        // The host's hook is not called for the library's panics.
        assert!(!stdout.contains(&format!("host hook: {text}")), "{stdout}");
    }
    assert!(!stderr.contains("panicked"), "{stderr}");
    assert!(!stderr.contains("stack backtrace"), "{stderr}");
    assert!(
        stdout.contains("host hook: the host's own panic"),
        "the host's hook was lost: {stdout}"
    );
}
