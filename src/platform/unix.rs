//! The operating system calls of `platform`, on Unix (Linux and macOS).

use std::path::Path;

/// A directory and, in it, a file that always exists and reads as empty: `/dev/null`. Shared
/// weights are described to ONNX Runtime as external data in this file: ONNX Runtime checks that
/// the file exists when it loads the graph, and never needs to read it because every such weight
/// is handed over with `AddInitializer`; were it ever to read, it would fail on the empty file
/// rather than read another model's bytes.
pub(crate) fn empty_file() -> std::io::Result<(&'static Path, &'static str)> {
    Ok((Path::new("/dev"), "null"))
}

/// ONNX Runtime's library names: what its Linux packages and wheel ship.
#[cfg(not(target_os = "macos"))]
pub(crate) const ORT_LIBRARY: super::OrtLibraryNames = super::OrtLibraryNames {
    plain: &["libonnxruntime.so", "libonnxruntime.so.1"],
    versioned_prefix: "libonnxruntime.so.1.",
    versioned_suffix: "",
};
/// ONNX Runtime's library names: what its macOS archive and wheel ship
/// (`libonnxruntime.dylib` → `libonnxruntime.1.31.1.dylib`).
#[cfg(target_os = "macos")]
pub(crate) const ORT_LIBRARY: super::OrtLibraryNames = super::OrtLibraryNames {
    plain: &["libonnxruntime.dylib"],
    versioned_prefix: "libonnxruntime.1.",
    versioned_suffix: ".dylib",
};

/// The names handed to the system's own library search, last of all.
#[cfg(not(target_os = "macos"))]
pub(crate) const ORT_SYSTEM_NAMES: &[&str] = &["libonnxruntime.so.1", "libonnxruntime.so"];
#[cfg(target_os = "macos")]
pub(crate) const ORT_SYSTEM_NAMES: &[&str] = &["libonnxruntime.dylib"];

/// What identifies a file beyond its path, size and modification time (which `utime` can set):
/// on Unix its device, inode and change time.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) struct FileIdentity {
    device: u64,
    inode: u64,
    changed: (i64, i64),
}

impl FileIdentity {
    pub(crate) fn of(meta: &std::fs::Metadata) -> Self {
        {
            use std::os::unix::fs::MetadataExt;
            FileIdentity {
                device: meta.dev(),
                inode: meta.ino(),
                changed: (meta.ctime(), meta.ctime_nsec()),
            }
        }
        #[cfg(not(unix))]
        {
            let _ = meta;
            FileIdentity {}
        }
    }
}

/// The file of the binary that holds this code (`libsam2.so`, or an executable linking it
/// statically), as the dynamic loader knows it.
pub(crate) fn own_binary_path() -> Option<std::path::PathBuf> {
    let mut info = std::mem::MaybeUninit::<libc::Dl_info>::zeroed();
    let addr = own_binary_path as *const () as *const libc::c_void;
    // SAFETY: dladdr only reads the address and fills the struct; a zero return means "unknown".
    let found = unsafe { libc::dladdr(addr, info.as_mut_ptr()) };
    if found == 0 {
        return None;
    }
    // SAFETY: dladdr succeeded, so the struct is initialised.
    let info = unsafe { info.assume_init() };
    if info.dli_fname.is_null() {
        return None;
    }
    // SAFETY: dli_fname is a NUL-terminated string owned by the loader.
    let name = unsafe { std::ffi::CStr::from_ptr(info.dli_fname) };
    Some(std::path::PathBuf::from(std::ffi::OsStr::new(
        std::str::from_utf8(name.to_bytes()).ok()?,
    )))
}

/// A shared library opened for a look at its symbols, closed when dropped.
pub(crate) struct Library(*mut libc::c_void);

impl Library {
    /// Opens `path` (resolving every symbol now, keeping them local); the error is the loader's.
    pub(crate) fn open(path: &Path) -> Result<Self, String> {
        use std::os::unix::ffi::OsStrExt;
        let c_path = std::ffi::CString::new(path.as_os_str().as_bytes())
            .map_err(|_| "path contains NUL".to_string())?;
        // SAFETY: dlopen/dlerror are thread-safe and read a NUL-terminated path.
        unsafe {
            let handle = libc::dlopen(c_path.as_ptr(), libc::RTLD_NOW | libc::RTLD_LOCAL);
            if handle.is_null() {
                let err = libc::dlerror();
                return Err(if err.is_null() {
                    "cannot be loaded".to_string()
                } else {
                    std::ffi::CStr::from_ptr(err).to_string_lossy().into_owned()
                });
            }
            Ok(Library(handle))
        }
    }

    /// The address of `name`, valid while the library is open.
    pub(crate) fn symbol(&self, name: &std::ffi::CStr) -> Option<*mut std::ffi::c_void> {
        // SAFETY: the handle is open; dlsym reads a NUL-terminated name.
        let sym = unsafe { libc::dlsym(self.0, name.as_ptr()) };
        (!sym.is_null()).then_some(sym)
    }
}

impl Drop for Library {
    fn drop(&mut self) {
        // SAFETY: the handle came from dlopen and is closed once.
        unsafe {
            libc::dlclose(self.0);
        }
    }
}

/// Whether a process exists (including one another user owns).
pub(crate) fn process_exists(pid: i32) -> bool {
    // SAFETY: kill with signal 0 only checks that the process exists and may be signalled.
    let rc = unsafe { libc::kill(pid, 0) };
    rc == 0 || std::io::Error::last_os_error().raw_os_error() != Some(libc::ESRCH)
}

/// The calling thread's kernel id, which the scheduler calls below take (Linux; `None` elsewhere).
/// `SYS_gettid` rather than `gettid()`: the portable build targets glibc 2.28.
pub(crate) fn kernel_thread_id() -> Option<i32> {
    #[cfg(target_os = "linux")]
    {
        // SAFETY: a system call without arguments.
        i32::try_from(unsafe { libc::syscall(libc::SYS_gettid) }).ok()
    }
    #[cfg(not(target_os = "linux"))]
    None
}

/// Allows the threads `threads` (kernel ids) every CPU the calling thread may use except the one
/// it is on now, so that the scheduler wakes them elsewhere; returns that CPU, or `None` where
/// nothing was changed (the caller may use one CPU only, or the OS has no such call). A thread
/// the kernel refuses (a cpuset the host narrowed meanwhile) is left as it was.
pub(crate) fn keep_off_this_cpu(threads: &[i32]) -> Option<usize> {
    #[cfg(target_os = "linux")]
    // SAFETY: plain system calls on a zeroed cpu_set_t of the size passed.
    unsafe {
        let cpu = usize::try_from(libc::sched_getcpu()).ok()?;
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        let size = std::mem::size_of::<libc::cpu_set_t>();
        if libc::sched_getaffinity(0, size, &mut set) != 0 {
            return None;
        }
        libc::CPU_CLR(cpu, &mut set);
        if libc::CPU_COUNT(&set) == 0 {
            return None;
        }
        for &tid in threads {
            libc::sched_setaffinity(tid, size, &set);
        }
        Some(cpu)
    }
    #[cfg(not(target_os = "linux"))]
    {
        let _ = threads;
        None
    }
}

/// Options that open a directory for reading (to sync it), and nothing else: a FIFO put where
/// the directory was expected fails instead of blocking.
pub(crate) fn directory_open_options() -> std::fs::OpenOptions {
    let mut options = std::fs::File::options();
    options.read(true);
    std::os::unix::fs::OpenOptionsExt::custom_flags(&mut options, libc::O_DIRECTORY);
    options
}

/// Options that open a file for reading without blocking in the open itself (a FIFO returns at
/// once; the caller then checks what it opened).
pub(crate) fn nonblocking_read_options() -> std::fs::OpenOptions {
    let mut options = std::fs::File::options();
    options.read(true);
    std::os::unix::fs::OpenOptionsExt::custom_flags(&mut options, libc::O_NONBLOCK);
    options
}

/// A directory sync refused because the file system cannot sync directories at all (`EINVAL`):
/// nothing to make durable that way, not a failure.
pub(crate) fn is_unsupported_sync(error: &std::io::Error) -> bool {
    error.raw_os_error() == Some(libc::EINVAL)
}

/// A directory builder for directories only this user may enter.
pub(crate) fn private_dir_builder() -> std::fs::DirBuilder {
    let mut builder = std::fs::DirBuilder::new();
    std::os::unix::fs::DirBuilderExt::mode(&mut builder, 0o700);
    builder
}

/// What a file that is not a regular file is, for an error message.
pub(crate) fn kind_of(file_type: std::fs::FileType) -> &'static str {
    {
        use std::os::unix::fs::FileTypeExt;
        if file_type.is_fifo() {
            return "a FIFO (named pipe)";
        }
        if file_type.is_char_device() {
            return "a character device";
        }
        if file_type.is_block_device() {
            return "a block device";
        }
        if file_type.is_socket() {
            return "a socket";
        }
    }
    super::generic_kind_of(file_type)
}

/// What a path names, when that must be told before asking the file system: nothing here, since
/// `stat` never opens the file (see the Windows version).
pub(crate) fn kind_of_path(_path: &Path) -> Option<&'static str> {
    None
}
