//! Runtime initialisation, versions, errors and the log callback.

use std::ffi::{c_char, c_void, CString};
use std::path::Path;
use std::sync::{Arc, OnceLock};

use super::c_enum::c_enum;
use super::{arg_str, copy_out_str, guard, guard_value, last_error, sam2_status};
use sam2::log::{self, LogLevel};
use sam2::Error;

/// Major version of this library (also `sam2_version()`).
pub const SAM2_VERSION_MAJOR: u32 = 0;
/// Minor version of this library.
pub const SAM2_VERSION_MINOR: u32 = 1;
/// Patch version of this library.
pub const SAM2_VERSION_PATCH: u32 = 0;

/// Log level: detail useful when debugging.
pub const SAM2_LOG_DEBUG: u32 = 0;
/// Log level: information (which ONNX Runtime was loaded, say).
pub const SAM2_LOG_INFO: u32 = 1;
/// Log level: something the host should know about (a device fallback, say).
pub const SAM2_LOG_WARNING: u32 = 2;
/// Log level: an error.
pub const SAM2_LOG_ERROR: u32 = 3;

c_enum! {
    /// `SAM2_LOG_*` ↔ [`LogLevel`].
    pub(crate) LogLevelCodes: u32 => LogLevel {
        SAM2_LOG_DEBUG => LogLevel::Debug,
        SAM2_LOG_INFO => LogLevel::Info,
        SAM2_LOG_WARNING => LogLevel::Warning,
        SAM2_LOG_ERROR => LogLevel::Error,
    }
}

/// Receives log messages. `message` is NUL-terminated UTF-8, valid only during the call.
/// May be called from any thread, including ONNX Runtime's; must not call back into sam2.
pub type sam2_log_callback =
    Option<unsafe extern "C" fn(level: u32, message: *const c_char, user_data: *mut c_void)>;

/// Returns the library version as "MAJOR.MINOR.PATCH".
///
/// The string is static: valid for the life of the process; do not free it.
#[no_mangle]
pub extern "C" fn sam2_version() -> *const c_char {
    static VERSION: OnceLock<CString> = OnceLock::new();
    VERSION
        .get_or_init(|| CString::new(sam2::VERSION).expect("no NUL in version"))
        .as_ptr()
}

/// Returns a static description of a status code ("SAM2_ERR_MODEL: …"), or of an unknown code.
///
/// The string is static; do not free it. Never returns NULL.
#[no_mangle]
pub extern "C" fn sam2_status_str(status: u32) -> *const c_char {
    sam2_status::from_code(status).map_or(c"unknown sam2_status value".as_ptr(), |s| {
        s.as_str().as_ptr()
    })
}

/// Copies the calling thread's last error message (NUL-terminated UTF-8) into `buf`.
///
/// The message describes the most recent call on this thread that failed; successful calls
/// leave it unchanged, and so do this function and every `SAM2_ERR_BUFFER_TOO_SMALL` answer of
/// a `(buf, buf_len, needed)` function (asking for a size does not lose a message). `*needed` (if not
/// NULL) receives the size in bytes including the NUL, also when the buffer is too small or NULL,
/// in which case `SAM2_ERR_BUFFER_TOO_SMALL` is returned and `buf` is untouched. An empty message
/// means no error has been recorded on this thread.
#[no_mangle]
pub extern "C" fn sam2_last_error_message(
    buf: *mut c_char,
    buf_len: usize,
    needed: *mut usize,
) -> sam2_status {
    guard_value(sam2_status::SAM2_ERR_PANIC, || {
        match copy_out_str(&last_error(), buf, buf_len, needed) {
            Ok(()) => sam2_status::SAM2_OK,
            // Reported through the status alone: recording it would overwrite the message asked for.
            Err(e) => sam2_status::of(&e),
        }
    })
}

/// Loads ONNX Runtime and creates the library's environment.
///
/// `onnxruntime_path`: full path of `libonnxruntime.so` (1.30 or newer), or NULL to search:
/// the `SAM2_ONNXRUNTIME_PATH` environment variable, then `ORT_DYLIB_PATH`, then the directory
/// of `libsam2.so`, then the system's library search. Optional: every other function
/// initialises by searching on first use. A process holds one ONNX Runtime: once loaded,
/// asking for a different file gives `SAM2_ERR_ENVIRONMENT_CONFIGURATION`; asking for the same
/// (or NULL) returns `SAM2_OK`. Fails with `SAM2_ERR_RUNTIME_NOT_FOUND`, naming every path
/// tried, when nothing usable loads. Thread-safe.
///
/// The process environment: ONNX Runtime writes telemetry files under `~/.cache/Microsoft/` unless
/// `ORT_DISABLE_TELEMETRY` is set when it loads, and it has no other switch for that. So, only
/// when that variable is unset, the library sets `ORT_DISABLE_TELEMETRY=1` (`setenv`), once, just
/// before it loads ONNX Runtime: here, or in the first call that needs the runtime. A host whose
/// other threads may call `getenv` at that moment should set the variable itself (any value is
/// obeyed, and the environment is then never written), or call this function before starting them.
#[no_mangle]
pub extern "C" fn sam2_runtime_init(onnxruntime_path: *const c_char) -> sam2_status {
    guard(|| {
        let path = if onnxruntime_path.is_null() {
            None
        } else {
            Some(arg_str(onnxruntime_path, "onnxruntime_path")?)
        };
        if let Some("") = path {
            return Err(Error::invalid(
                "onnxruntime_path",
                "is empty (pass NULL to search)",
            ));
        }
        sam2::runtime::init(path.map(Path::new)).map(|_| ())
    })
}

/// Returns the version of the loaded ONNX Runtime ("1.31.1"), or NULL before it is loaded.
///
/// The string is owned by the library and valid for the life of the process; do not free it.
#[no_mangle]
pub extern "C" fn sam2_runtime_version() -> *const c_char {
    static VERSION: OnceLock<CString> = OnceLock::new();
    guard_value(std::ptr::null(), || match sam2::runtime::info() {
        Some(info) => VERSION
            .get_or_init(|| CString::new(info.version).unwrap_or_default())
            .as_ptr(),
        None => std::ptr::null(),
    })
}

struct CallbackTarget {
    callback: unsafe extern "C" fn(u32, *const c_char, *mut c_void),
    user_data: *mut c_void,
}
// SAFETY: the host promises its callback and user_data may be used from any thread (documented).
unsafe impl Send for CallbackTarget {}
unsafe impl Sync for CallbackTarget {}

/// Installs the process-wide log callback (NULL removes it). Messages below `min_level`
/// (`SAM2_LOG_*`) are not delivered. `user_data` is passed back unchanged. The callback may run
/// on any thread and must not call back into sam2. When this function returns, the previous
/// callback is not running on any thread and will not be called again. A level above
/// `SAM2_LOG_ERROR` gives `SAM2_ERR_INVALID_ARGUMENT`.
#[no_mangle]
pub extern "C" fn sam2_set_log_callback(
    callback: sam2_log_callback,
    user_data: *mut c_void,
    min_level: u32,
) -> sam2_status {
    guard(|| {
        let level = LogLevelCodes::parse(min_level, "min_level")?;
        match callback {
            None => log::set_sink(None, level),
            Some(callback) => {
                let target = Arc::new(CallbackTarget {
                    callback,
                    user_data,
                });
                log::set_sink(
                    Some(Arc::new(move |level: LogLevel, message: &str| {
                        let text = CString::new(message.replace('\0', " ")).unwrap_or_default();
                        // SAFETY: the host's callback, with a NUL-terminated string valid during the call.
                        unsafe {
                            (target.callback)(
                                LogLevelCodes::code(level),
                                text.as_ptr(),
                                target.user_data,
                            )
                        };
                    })),
                    level,
                );
            }
        }
        Ok(())
    })
}
