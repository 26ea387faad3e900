//! Finding and loading ONNX Runtime, and the one process-wide environment this library owns.
//!
//! Discovery order (the first that loads wins):
//! 1. the path given to [`init`] by the host (`sam2_runtime_init`); when given, nothing else is tried;
//! 2. the `SAM2_ONNXRUNTIME_PATH` environment variable, then ONNX Runtime's own `ORT_DYLIB_PATH`,
//!    each naming the library or a directory that holds it;
//! 3. the directory that holds `libsam2.so`;
//! 4. the system's default search (`dlopen("libonnxruntime.so.1")`, then `libonnxruntime.so`).
//!
//! In a directory, the names tried are those of the layouts ONNX Runtime ships in (see
//! [`library_files_in`]): `libonnxruntime.so` (the NuGet package's `runtimes/<rid>/native/`, a
//! release archive's or a system's `lib/`), `libonnxruntime.so.1`, and fully versioned files
//! such as the PyPI wheel's `onnxruntime/capi/libonnxruntime.so.1.31.1`.

use std::path::{Path, PathBuf};
use std::sync::{Mutex, OnceLock};

use ort::environment::Environment;

use crate::error::{Error, Result};
use crate::log::{self, LogLevel};
use crate::platform;

/// The environment variable naming the ONNX Runtime library to load.
pub(crate) const ENV_VAR: &str = "SAM2_ONNXRUNTIME_PATH";
/// ONNX Runtime's own variable, honoured after ours.
pub(crate) const ORT_ENV_VAR: &str = "ORT_DYLIB_PATH";
/// The oldest ONNX Runtime minor version (1.x) the pinned binding can drive.
pub(crate) const MIN_ORT_MINOR: u32 = ort::MINOR_VERSION;

/// What was loaded, and from where.
#[derive(Debug, Clone)]
pub struct RuntimeInfo {
    pub path: PathBuf,
    pub version: String,
}

struct Runtime {
    info: RuntimeInfo,
    env: Environment,
    /// A CPU arena registered with the environment, which sessions share (activations of one
    /// session's run reuse memory another's run released) instead of one arena each.
    shared_arena: bool,
}

static RUNTIME: OnceLock<Runtime> = OnceLock::new();
static INIT_LOCK: Mutex<()> = Mutex::new(());

/// Loads ONNX Runtime (once per process) and creates the library's environment.
///
/// With `explicit = Some(path)` only that file is tried. Calling again after a successful
/// initialisation returns the existing runtime; asking then for a different file is an error,
/// since a process can hold only one ONNX Runtime.
pub fn init(explicit: Option<&Path>) -> Result<RuntimeInfo> {
    if let Some(rt) = RUNTIME.get() {
        return check_same(rt, explicit);
    }
    let _guard = INIT_LOCK.lock().unwrap_or_else(|p| p.into_inner());
    if let Some(rt) = RUNTIME.get() {
        return check_same(rt, explicit);
    }

    disable_telemetry();
    let mut tried = Vec::new();
    for candidate in &candidates(explicit) {
        if let Some(why) = &candidate.absent {
            tried.push(format!(
                "{} ({}): {why}",
                candidate.path.display(),
                candidate.source
            ));
            continue;
        }
        // Check the library before handing it to ort, which keeps whatever it loaded and panics
        // on a library that cannot give the API it needs.
        let version = match probe(&candidate.path) {
            Ok(version) => version,
            Err(why) => {
                tried.push(format!(
                    "{} ({}): {why}",
                    candidate.path.display(),
                    candidate.source
                ));
                continue;
            }
        };
        match ort::init_from(&candidate.path) {
            Ok(builder) => {
                let env = builder
                    .with_name("sam2")
                    .with_telemetry(false)
                    .with_logger(std::sync::Arc::new(forward_ort_log))
                    .build()
                    .map_err(|e| Error::OnnxRuntime(format!("creating the environment: {e}")))?;
                env.set_log_level(ort::logging::LogLevel::Warning);
                let shared_arena = register_shared_cpu_arena(&env);
                let info = RuntimeInfo {
                    path: candidate.path.clone(),
                    version,
                };
                log::emit(
                    LogLevel::Info,
                    &format!(
                        "loaded ONNX Runtime {} from {} ({})",
                        info.version,
                        info.path.display(),
                        candidate.source
                    ),
                );
                let _ = RUNTIME.set(Runtime {
                    info: info.clone(),
                    env,
                    shared_arena,
                });
                return Ok(info);
            }
            Err(e) => tried.push(format!(
                "{} ({}): {}",
                candidate.path.display(),
                candidate.source,
                e
            )),
        }
    }
    Err(Error::RuntimeNotFound(format!(
        "no usable ONNX Runtime (1.{MIN_ORT_MINOR} or newer) was found; tried {}. \
         Set {ENV_VAR} to {} or the directory that holds it, or call \
         sam2_runtime_init with the library's path.",
        tried.join("; "),
        platform::ORT_LIBRARY.plain[0]
    )))
}

/// The environment, initialising the runtime by discovery if the host has not done so.
pub fn environment() -> Result<&'static Environment> {
    if RUNTIME.get().is_none() {
        init(None)?;
    }
    Ok(&RUNTIME.get().expect("initialised above").env)
}

/// Whether sessions can share the environment's CPU arena.
pub(crate) fn shared_arena() -> bool {
    RUNTIME.get().is_some_and(|rt| rt.shared_arena)
}

/// Largest step by which the shared CPU arena grows. ONNX Runtime's arena doubles each new
/// region (up to 1 GiB by default) and never gives memory back, so one large request can leave
/// a region of slack that later fills in: with the defaults, the soak test's arena settled at
/// 255 MiB for 183 MiB of peak use, and resident memory kept rising long after warm-up (1.09–1.19×)
/// as untouched parts of it were reached. Capped at 64 MiB, it settles at 191 MiB and resident
/// memory stays flat (1.01×); a request larger than the cap gets a region of its own size.
const ARENA_MAX_STEP: usize = 64 << 20;

/// Registers one CPU arena allocator with the environment, for sessions built with
/// `session.use_env_allocators`: regions grow by powers of two up to [`ARENA_MAX_STEP`].
/// (`kSameAsRequested` growth was measured too: more regions, more fragmentation, 1.23× growth.)
/// Failure only costs memory, so it is logged, not returned.
fn register_shared_cpu_arena(env: &Environment) -> bool {
    let info = match ort::memory::MemoryInfo::new(
        ort::memory::AllocationDevice::CPU,
        0,
        ort::memory::AllocatorType::Arena,
        ort::memory::MemoryType::Default,
    ) {
        Ok(info) => info,
        Err(_) => return false,
    };
    let config = [
        (c"arena_extend_strategy", 0usize /* kNextPowerOfTwo */),
        (c"max_power_of_two_extend_bytes", ARENA_MAX_STEP),
    ];
    match crate::ort_raw::register_cpu_arena(env, &info, &config) {
        Ok(()) => true,
        Err(message) => {
            log::emit(
                LogLevel::Debug,
                &format!("sessions keep their own CPU arenas: {message}"),
            );
            false
        }
    }
}

/// The loaded runtime, if any.
pub fn info() -> Option<RuntimeInfo> {
    RUNTIME.get().map(|rt| rt.info.clone())
}

fn check_same(rt: &Runtime, explicit: Option<&Path>) -> Result<RuntimeInfo> {
    if let Some(path) = explicit {
        let same = match (path.canonicalize(), rt.info.path.canonicalize()) {
            (Ok(a), Ok(b)) => a == b,
            _ => path == rt.info.path,
        };
        if !same {
            return Err(Error::EnvironmentConfiguration(format!(
                "ONNX Runtime is already loaded from {} and a process can hold only one; \
                 cannot switch to {}",
                rt.info.path.display(),
                path.display()
            )));
        }
    }
    Ok(rt.info.clone())
}

/// ONNX Runtime 1.31 writes a device id and a telemetry database under `$HOME/.cache/Microsoft/
/// DeveloperTools/.onnxruntime/` when its first environment is created, unless telemetry is
/// switched off for the whole process at that moment. The only switches it reads are environment
/// variables (`ORT_DISABLE_TELEMETRY`, `ORT_RUNNING_UNIT_TESTS`, CI variables such as `CI`):
/// `DisableTelemetryEvents` (ort's `with_telemetry(false)`) only mutes events of an uploader that
/// already exists and has written its files (tests/telemetry.rs shows it), and the 1.31.1 library
/// has no environment-creation or session configuration key for it. A library must not write into its host's
/// home, so the variable is set, which is the one write this library makes to the process
/// environment:
///
/// * only when `ORT_DISABLE_TELEMETRY` is unset (a host that sets it, to any value, is obeyed
///   and its environment is never written);
/// * at most once per process, under the initialisation lock, just before ONNX Runtime is
///   loaded: in `sam2_runtime_init`, or in the first call that needs the runtime when the host
///   does not call it.
///
/// `setenv` while another thread calls `getenv` is undefined behaviour in POSIX (C libraries
/// that free or move the environment array can crash the reader). A host whose other threads may
/// read the environment then should set `ORT_DISABLE_TELEMETRY` itself, or call
/// `sam2_runtime_init` before it starts them.
fn disable_telemetry() {
    if std::env::var_os("ORT_DISABLE_TELEMETRY").is_none() {
        std::env::set_var("ORT_DISABLE_TELEMETRY", "1");
    }
}

struct Candidate {
    path: PathBuf,
    source: &'static str,
    /// Set when a place to look holds nothing to load: why, for the error message.
    absent: Option<String>,
}

impl Candidate {
    fn new(path: PathBuf, source: &'static str) -> Self {
        Candidate {
            path,
            source,
            absent: None,
        }
    }
}

fn candidates(explicit: Option<&Path>) -> Vec<Candidate> {
    if let Some(path) = explicit {
        return vec![Candidate::new(path.to_path_buf(), "given by the host")];
    }
    let mut out = Vec::new();
    for (var, source) in [
        (ENV_VAR, "environment variable SAM2_ONNXRUNTIME_PATH"),
        (ORT_ENV_VAR, "environment variable ORT_DYLIB_PATH"),
    ] {
        if let Some(value) = std::env::var_os(var).filter(|v| !v.is_empty()) {
            let path = PathBuf::from(value);
            if path.is_dir() {
                let absent = format!(
                    "a directory without {} or a versioned {}",
                    platform::ORT_LIBRARY.plain.join(", "),
                    platform::ORT_LIBRARY.plain[0]
                );
                in_directory(&mut out, &path, path.clone(), source, &absent);
            } else {
                out.push(Candidate::new(path, source));
            }
        }
    }
    if let Some(dir) = own_directory() {
        let shown = dir.join(platform::ORT_LIBRARY.plain[0]);
        in_directory(&mut out, &dir, shown, "beside libsam2", "not present");
    }
    for name in platform::ORT_SYSTEM_NAMES {
        out.push(Candidate::new(PathBuf::from(name), "system library search"));
    }
    out
}

/// Adds the ONNX Runtime files of `dir`, or a note (naming `shown`) that it holds none.
fn in_directory(
    out: &mut Vec<Candidate>,
    dir: &Path,
    shown: PathBuf,
    source: &'static str,
    absent: &str,
) {
    let files = library_files_in(dir);
    if files.is_empty() {
        out.push(Candidate {
            path: shown,
            source,
            absent: Some(absent.to_string()),
        });
    }
    out.extend(files.into_iter().map(|path| Candidate::new(path, source)));
}

/// The ONNX Runtime library files in `dir`, in the order they are tried: `libonnxruntime.so`
/// (all a NuGet package's `runtimes/<rid>/native/` has), `libonnxruntime.so.1` (the SONAME),
/// then fully versioned files, newest first (all the PyPI wheel's `capi/` has).
fn library_files_in(dir: &Path) -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = platform::ORT_LIBRARY
        .plain
        .iter()
        .map(|name| dir.join(name))
        .filter(|path| path.is_file())
        .collect();
    let mut versioned: Vec<(Vec<u32>, PathBuf)> = std::fs::read_dir(dir)
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|entry| {
            let numbers = platform::ORT_LIBRARY.version_of(entry.file_name().to_str()?)?;
            Some((numbers, entry.path()))
        })
        .filter(|(_, path)| path.is_file())
        .collect();
    versioned.sort_by(|a, b| b.0.cmp(&a.0));
    files.extend(versioned.into_iter().map(|(_, path)| path));
    files
}

/// The directory of the binary that holds this code (`libsam2.so`, or an executable linking it statically).
fn own_directory() -> Option<PathBuf> {
    let path = platform::own_binary_path()?;
    let path = path.canonicalize().unwrap_or(path);
    path.parent().map(Path::to_path_buf)
}

/// Opens a candidate library and checks it is an ONNX Runtime that provides the API version the
/// binding needs, without keeping it; gives its version string.
fn probe(path: &Path) -> std::result::Result<String, String> {
    let library = platform::Library::open(path)?;
    let sym = library
        .symbol(c"OrtGetApiBase")
        .ok_or_else(|| "does not export OrtGetApiBase: not ONNX Runtime".to_string())?;
    // SAFETY: `sym` is OrtGetApiBase of `library`, which stays open for the call.
    let (version, provides_api) = unsafe { crate::ort_raw::probe_api_base(sym)? };
    let minor: u32 = version
        .split('.')
        .nth(1)
        .and_then(|m| m.parse().ok())
        .unwrap_or(0);
    if !version.starts_with("1.") || minor < MIN_ORT_MINOR {
        return Err(format!(
            "is ONNX Runtime {version}; version 1.{MIN_ORT_MINOR} or newer is needed"
        ));
    }
    if !provides_api {
        return Err(format!(
            "ONNX Runtime {version} does not provide API version {}",
            ort::sys::ORT_API_VERSION
        ));
    }
    Ok(version)
}

fn forward_ort_log(
    level: ort::logging::LogLevel,
    category: &str,
    _id: &str,
    location: &str,
    message: &str,
) {
    let level = match level {
        ort::logging::LogLevel::Verbose | ort::logging::LogLevel::Info => return,
        ort::logging::LogLevel::Warning => LogLevel::Warning,
        ort::logging::LogLevel::Error | ort::logging::LogLevel::Fatal => LogLevel::Error,
    };
    log::emit(
        level,
        &format!("onnxruntime [{category}] {message} ({location})"),
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A scratch directory holding empty files (and links) with the given names.
    fn layout(name: &str, files: &[&str], links: &[(&str, &str)]) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("sam2-layout-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        for file in files {
            std::fs::write(dir.join(file), b"").unwrap();
        }
        for (link, target) in links {
            std::os::unix::fs::symlink(target, dir.join(link)).unwrap();
        }
        dir
    }

    fn names(files: Vec<PathBuf>) -> Vec<String> {
        files
            .iter()
            .map(|f| f.file_name().unwrap().to_string_lossy().into_owned())
            .collect()
    }

    #[test]
    fn finds_the_library_in_each_layout_onnx_runtime_ships_in() {
        // The PyPI wheel's onnxruntime/capi/: only the fully versioned file.
        let wheel = layout(
            "wheel",
            &[
                "libonnxruntime.so.1.31.1",
                "libonnxruntime_providers_shared.so",
                "onnxruntime_pybind11_state.cpython-311-x86_64-linux-gnu.so",
            ],
            &[],
        );
        assert_eq!(
            names(library_files_in(&wheel)),
            ["libonnxruntime.so.1.31.1"]
        );
        // The Microsoft.ML.OnnxRuntime NuGet package's runtimes/linux-x64/native/.
        let nuget = layout(
            "nuget",
            &["libonnxruntime.so", "libonnxruntime_providers_shared.so"],
            &[],
        );
        assert_eq!(names(library_files_in(&nuget)), ["libonnxruntime.so"]);
        // A release archive's or a system's lib/: the chain of links, the link first.
        let system = layout(
            "system",
            &["libonnxruntime.so.1.31.1"],
            &[
                ("libonnxruntime.so.1", "libonnxruntime.so.1.31.1"),
                ("libonnxruntime.so", "libonnxruntime.so.1"),
            ],
        );
        assert_eq!(
            names(library_files_in(&system)),
            [
                "libonnxruntime.so",
                "libonnxruntime.so.1",
                "libonnxruntime.so.1.31.1"
            ]
        );
        for dir in [wheel, nuget, system] {
            std::fs::remove_dir_all(dir).unwrap();
        }
    }

    #[test]
    fn versioned_files_newest_first_and_nothing_else() {
        let dir = layout(
            "versions",
            &[
                "libonnxruntime.so.1.9.0",
                "libonnxruntime.so.1.31.1",
                "libonnxruntime.so.1.31.0",
                "libonnxruntime.so.1.32.0.dbg",
                "libonnxruntime.so.2.0.0",
                "libonnxruntime_providers_cuda.so",
            ],
            &[("libonnxruntime.so", "missing-target")],
        );
        std::fs::create_dir(dir.join("libonnxruntime.so.1")).unwrap();
        assert_eq!(
            names(library_files_in(&dir)),
            [
                "libonnxruntime.so.1.31.1",
                "libonnxruntime.so.1.31.0",
                "libonnxruntime.so.1.9.0"
            ],
            "a dangling link, a directory, ONNX Runtime 2 and non-numeric suffixes are skipped"
        );
        assert!(library_files_in(&dir.join("absent")).is_empty());
        std::fs::remove_dir_all(dir).unwrap();
    }
}
