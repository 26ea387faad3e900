//! What the library needs from the operating system and the processor, in one place: `unix.rs`
//! (Linux, macOS) and `windows.rs` provide the same items, and the rest of the library calls them
//! through here, so another operating system is one more file; `cpu.rs` says what the processor
//! can do.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

mod cpu;
#[cfg(unix)]
mod unix;
#[cfg(unix)]
use unix as os;
#[cfg(windows)]
mod windows;
#[cfg(windows)]
use windows as os;

pub(crate) use cpu::int8_dot_products_exact;
pub(crate) use os::{
    directory_open_options, empty_file, is_unsupported_sync, keep_off_this_cpu, kernel_thread_id,
    kind_of, kind_of_path, nonblocking_read_options, own_binary_path, process_exists, FileIdentity,
    Library, ORT_LIBRARY, ORT_SYSTEM_NAMES,
};

/// How ONNX Runtime's library files are named on this system: the plain names tried in a
/// directory (in order), and how a fully versioned file name is made (`prefix` + `1.x.y` +
/// `suffix`).
pub(crate) struct OrtLibraryNames {
    pub(crate) plain: &'static [&'static str],
    pub(crate) versioned_prefix: &'static str,
    pub(crate) versioned_suffix: &'static str,
}

impl OrtLibraryNames {
    /// The version numbers in a fully versioned file name (`libonnxruntime.so.1.31.1` → 1, 31, 1).
    pub(crate) fn version_of(&self, file_name: &str) -> Option<Vec<u32>> {
        if self.versioned_prefix.is_empty() {
            return None;
        }
        let version = file_name
            .strip_prefix(self.versioned_prefix)?
            .strip_suffix(self.versioned_suffix)?;
        version.split('.').map(|part| part.parse().ok()).collect()
    }
}

/// The description of a file type `kind_of` gives when the system has nothing more specific.
fn generic_kind_of(file_type: std::fs::FileType) -> &'static str {
    if file_type.is_dir() {
        "a directory"
    } else {
        "a special file"
    }
}

/// A directory only this process uses, removed with everything in it when dropped.
pub(crate) struct PrivateTempDir(PathBuf);

impl PrivateTempDir {
    pub(crate) fn new(prefix: &str) -> std::io::Result<Self> {
        static NEXT: AtomicU64 = AtomicU64::new(0);
        let base = std::env::temp_dir();
        loop {
            let n = NEXT.fetch_add(1, Ordering::Relaxed);
            let path = base.join(format!("{prefix}-{}-{n}", std::process::id()));
            match os::private_dir_builder().create(&path) {
                Ok(()) => return Ok(PrivateTempDir(path)),
                // Left by an earlier process of the same id: take the next name.
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => continue,
                Err(e) => return Err(e),
            }
        }
    }

    pub(crate) fn path(&self) -> &Path {
        &self.0
    }
}

impl Drop for PrivateTempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}
