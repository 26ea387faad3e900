//! The operating system calls of `platform`, on Windows.
//!
//! Built and linted here by cross-compiling (`x86_64-pc-windows-gnu`); see docs/platforms.md for
//! what has run where.

use std::ffi::c_void;
use std::os::windows::ffi::{OsStrExt, OsStringExt};
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use windows_sys::Win32::Foundation::{
    CloseHandle, FreeLibrary, GetLastError, ERROR_ACCESS_DENIED, ERROR_INVALID_FUNCTION, HMODULE,
    STILL_ACTIVE,
};
use windows_sys::Win32::System::LibraryLoader::{
    GetModuleFileNameW, GetModuleHandleExW, GetProcAddress, LoadLibraryExW,
    GET_MODULE_HANDLE_EX_FLAG_FROM_ADDRESS, GET_MODULE_HANDLE_EX_FLAG_UNCHANGED_REFCOUNT,
    LOAD_LIBRARY_SEARCH_DEFAULT_DIRS, LOAD_LIBRARY_SEARCH_DLL_LOAD_DIR,
};
use windows_sys::Win32::System::Threading::{
    GetExitCodeProcess, OpenProcess, PROCESS_QUERY_LIMITED_INFORMATION,
};

/// A directory and, in it, an empty file (`%TEMP%\sam2-empty\empty`, made once per process; the
/// same for every process, never written). Windows has no `/dev/null` that file APIs treat as
/// an ordinary file, so shared weights' external-data entries name this one instead: ONNX
/// Runtime checks it exists and never reads it (see the Unix version).
pub(crate) fn empty_file() -> std::io::Result<(&'static Path, &'static str)> {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    if let Some(dir) = DIR.get() {
        return Ok((dir, "empty"));
    }
    let dir = std::env::temp_dir().join("sam2-empty");
    std::fs::create_dir_all(&dir)?;
    let file = dir.join("empty");
    let options = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .open(&file)?;
    drop(options);
    Ok((DIR.get_or_init(|| dir), "empty"))
}

/// ONNX Runtime's library name on Windows: the NuGet package's and the release archive's
/// `onnxruntime.dll` (no versioned names).
pub(crate) const ORT_LIBRARY: super::OrtLibraryNames = super::OrtLibraryNames {
    plain: &["onnxruntime.dll"],
    versioned_prefix: "",
    versioned_suffix: "",
};

/// Nothing is left to the system's search: an older `onnxruntime.dll` in System32 (which ships
/// with Windows) would be found first and is a known trap. ONNX Runtime is loaded by full path
/// only (given, from the environment, or beside `sam2.dll`).
pub(crate) const ORT_SYSTEM_NAMES: &[&str] = &[];

/// What identifies a file beyond its path, size and modification time: its creation time and
/// attributes. (Windows has no change time that `SetFileTime` cannot set, and the volume and
/// file index are not available from `std` on stable Rust; this is the best the key has here.)
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) struct FileIdentity {
    created: u64,
    attributes: u32,
}

impl FileIdentity {
    pub(crate) fn of(meta: &std::fs::Metadata) -> Self {
        use std::os::windows::fs::MetadataExt;
        FileIdentity {
            created: meta.creation_time(),
            attributes: meta.file_attributes(),
        }
    }
}

fn wide(path: &Path) -> Vec<u16> {
    path.as_os_str()
        .encode_wide()
        .chain(std::iter::once(0))
        .collect()
}

fn last_error() -> String {
    // SAFETY: reads the calling thread's last-error value.
    let code = unsafe { GetLastError() };
    std::io::Error::from_raw_os_error(code as i32).to_string()
}

/// The file of the module (`sam2.dll`, or an executable linking the library statically) that
/// holds this code.
pub(crate) fn own_binary_path() -> Option<PathBuf> {
    let mut module: HMODULE = std::ptr::null_mut();
    let addr = own_binary_path as *const () as *const u16;
    // SAFETY: FROM_ADDRESS looks up the module holding `addr` without changing its reference
    // count; `module` receives it.
    let found = unsafe {
        GetModuleHandleExW(
            GET_MODULE_HANDLE_EX_FLAG_FROM_ADDRESS | GET_MODULE_HANDLE_EX_FLAG_UNCHANGED_REFCOUNT,
            addr,
            &mut module,
        )
    };
    if found == 0 {
        return None;
    }
    let mut buffer = vec![0u16; 1024];
    loop {
        // SAFETY: `buffer` has room for `len` UTF-16 units; the call writes at most that many.
        let len = unsafe { GetModuleFileNameW(module, buffer.as_mut_ptr(), buffer.len() as u32) };
        if len == 0 {
            return None;
        }
        if (len as usize) < buffer.len() {
            buffer.truncate(len as usize);
            return Some(PathBuf::from(std::ffi::OsString::from_wide(&buffer)));
        }
        if buffer.len() >= 1 << 16 {
            return None;
        }
        buffer.resize(buffer.len() * 2, 0);
    }
}

/// A DLL opened for a look at its symbols, freed when dropped.
pub(crate) struct Library(HMODULE);

impl Library {
    /// Loads `path`, which must be a full path: its own directory is searched for what it
    /// depends on, then the system's (never the working directory or `PATH`).
    pub(crate) fn open(path: &Path) -> Result<Self, String> {
        if !path.is_absolute() {
            return Err("is not a full path; sam2 loads ONNX Runtime by full path only".into());
        }
        let name = wide(path);
        // SAFETY: a NUL-terminated UTF-16 path; no file handle; documented flags.
        let module = unsafe {
            LoadLibraryExW(
                name.as_ptr(),
                std::ptr::null_mut(),
                LOAD_LIBRARY_SEARCH_DLL_LOAD_DIR | LOAD_LIBRARY_SEARCH_DEFAULT_DIRS,
            )
        };
        if module.is_null() {
            return Err(last_error());
        }
        Ok(Library(module))
    }

    /// The address of `name`, valid while the library is open.
    pub(crate) fn symbol(&self, name: &std::ffi::CStr) -> Option<*mut c_void> {
        // SAFETY: the module is loaded; the name is NUL-terminated.
        let sym = unsafe { GetProcAddress(self.0, name.as_ptr().cast()) };
        sym.map(|f| f as *mut c_void)
    }
}

impl Drop for Library {
    fn drop(&mut self) {
        // SAFETY: the module came from LoadLibraryExW and is freed once.
        unsafe {
            FreeLibrary(self.0);
        }
    }
}

/// Whether a process exists (including one another user owns).
pub(crate) fn process_exists(pid: i32) -> bool {
    let Ok(pid) = u32::try_from(pid) else {
        return false;
    };
    // SAFETY: opens a query-only handle, closed below.
    let handle = unsafe { OpenProcess(PROCESS_QUERY_LIMITED_INFORMATION, 0, pid) };
    if handle.is_null() {
        // SAFETY: reads the calling thread's last-error value.
        return unsafe { GetLastError() } == ERROR_ACCESS_DENIED;
    }
    let mut code = 0u32;
    // SAFETY: a live process handle and a place for its exit code.
    let ok = unsafe { GetExitCodeProcess(handle, &mut code) };
    // SAFETY: opened above, closed once.
    unsafe { CloseHandle(handle) };
    ok != 0 && code == STILL_ACTIVE as u32
}

/// The calling thread's id for [`keep_off_this_cpu`]: none on Windows, which has no such call
/// here.
pub(crate) fn kernel_thread_id() -> Option<i32> {
    None
}

/// Leaves the threads where the scheduler puts them (Windows: not needed so far); `None`.
pub(crate) fn keep_off_this_cpu(_threads: &[i32]) -> Option<usize> {
    None
}

/// Options that open a directory (to sync it): Windows needs backup semantics for that.
pub(crate) fn directory_open_options() -> std::fs::OpenOptions {
    use std::os::windows::fs::OpenOptionsExt;
    const FILE_FLAG_BACKUP_SEMANTICS: u32 = 0x0200_0000;
    let mut options = std::fs::File::options();
    options.read(true);
    options.custom_flags(FILE_FLAG_BACKUP_SEMANTICS);
    options
}

/// Options that open a file for reading (Windows file systems hold no FIFOs that block an open).
pub(crate) fn nonblocking_read_options() -> std::fs::OpenOptions {
    let mut options = std::fs::File::options();
    options.read(true);
    options
}

/// A directory sync Windows refuses because directories cannot be flushed there: not a failure.
pub(crate) fn is_unsupported_sync(error: &std::io::Error) -> bool {
    matches!(
        error.raw_os_error().map(|c| c as u32),
        Some(ERROR_ACCESS_DENIED | ERROR_INVALID_FUNCTION)
    )
}

/// A directory builder for the per-user temporary directory (its ACL keeps others out).
pub(crate) fn private_dir_builder() -> std::fs::DirBuilder {
    std::fs::DirBuilder::new()
}

/// What a file that is not a regular file is, for an error message.
pub(crate) fn kind_of(file_type: std::fs::FileType) -> &'static str {
    super::generic_kind_of(file_type)
}

/// What a path names, when that must be told before asking the file system: Windows opens a path
/// to read its metadata, and opening a named pipe (`\\.\pipe\…`, `\\?\pipe\…`) connects to it
/// as a client, which its server sees (shown under Wine by tests/c/test_bad_input.c). Pipes are
/// told apart by that prefix, in either slash and any case, and never opened.
pub(crate) fn kind_of_path(path: &Path) -> Option<&'static str> {
    let prefix: String = path
        .as_os_str()
        .to_string_lossy()
        .chars()
        .take(9)
        .map(|c| {
            if c == '/' {
                '\\'
            } else {
                c.to_ascii_lowercase()
            }
        })
        .collect();
    (prefix == r"\\.\pipe\" || prefix == r"\\?\pipe\").then_some("a named pipe")
}
