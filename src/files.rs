//! Files as the library (and the `sam2` command) reads and writes them: inputs opened only when
//! they are regular files (a FIFO would block, a device never end), outputs written to a
//! temporary file beside their path and renamed into place, several at once all or nothing.
//! One file is replaced atomically ([`replace_atomically`], through symbolic links to the file
//! they name), and the temporary files of saves killed mid-write are removed later. Embedding
//! files ([`crate::embedding_file`]) are saved and read through the same routines.

use std::fs::File;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use crate::error::{Error, Result};
use crate::platform;

static TEMP_COUNTER: AtomicU64 = AtomicU64::new(0);

/// Suffix of the temporary files of saves in progress: `.<name>.<pid>-<n>.sam2tmp`.
pub(crate) const TEMP_SUFFIX: &str = ".sam2tmp";

/// How many taken temporary names a save skips before giving up.
const TEMP_ATTEMPTS: usize = 1000;

fn temp_path(path: &Path) -> Result<PathBuf> {
    let name = path
        .file_name()
        .ok_or_else(|| Error::invalid("path", format!("`{}` names no file", path.display())))?;
    let n = TEMP_COUNTER.fetch_add(1, Ordering::Relaxed);
    let tmp = format!(
        ".{}.{}-{n}{TEMP_SUFFIX}",
        name.to_string_lossy(),
        std::process::id()
    );
    Ok(path.with_file_name(tmp))
}

/// Creates a new temporary file for a save into `path`, in its directory. A name already taken
/// (a file an earlier process with the same id left, or anyone's file) is skipped for the next
/// one, never opened, truncated or removed: only a file this call created is ever ours to
/// delete. `context` starts the message of an I/O error ("saving the embedding to …").
pub(crate) fn create_temp(path: &Path, context: &str) -> Result<(PathBuf, File)> {
    for _ in 0..TEMP_ATTEMPTS {
        let tmp = temp_path(path)?;
        match File::options().write(true).create_new(true).open(&tmp) {
            Ok(file) => return Ok((tmp, file)),
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => continue,
            Err(e) => return Err(Error::io(context, e)),
        }
    }
    Err(Error::io(
        context,
        std::io::Error::new(
            std::io::ErrorKind::AlreadyExists,
            format!(
                "{TEMP_ATTEMPTS} temporary names next to it are taken; remove the stale \
                 `.*{TEMP_SUFFIX}` files of that directory"
            ),
        ),
    ))
}

/// The directory holding `path`: its parent, or the current directory for a bare file name.
pub(crate) fn directory_of(path: &Path) -> &Path {
    match path.parent() {
        Some(dir) if !dir.as_os_str().is_empty() => dir,
        _ => Path::new("."),
    }
}

/// Opens a directory to sync it, and nothing else: a FIFO named like it fails instead of
/// blocking.
pub(crate) fn open_directory(dir: &Path) -> std::io::Result<File> {
    platform::directory_open_options().open(dir)
}

/// Makes a rename in `dir` durable. A file system that cannot sync a directory says `EINVAL`
/// (it has nothing to make durable that way); every other failure is reported.
pub(crate) fn sync_directory(dir: &File) -> std::io::Result<()> {
    match dir.sync_all() {
        Err(e) if platform::is_unsupported_sync(&e) => Ok(()),
        other => other,
    }
}

/// The I/O error for a path that is not a regular file: `it is a FIFO (named pipe), not a
/// regular file; give the path of <what>`.
fn not_regular_file(path: &Path, kind: &str, what: &str) -> Error {
    Error::io(
        format!("reading {}", path.display()),
        std::io::Error::new(
            std::io::ErrorKind::InvalidInput,
            format!("it is {kind}, not a regular file; give the path of {what}"),
        ),
    )
}

fn require_regular_file(metadata: &std::fs::Metadata, path: &Path, what: &str) -> Result<()> {
    if metadata.is_file() {
        return Ok(());
    }
    Err(not_regular_file(
        path,
        platform::kind_of(metadata.file_type()),
        what,
    ))
}

/// Opens `path` for reading without ever blocking or touching a device: anything but a regular
/// file (a FIFO, a device such as `/dev/zero`, a socket, a directory) is refused with an I/O
/// error that names it and says it wants `what` ("an embedding file", "a PNG or JPEG image").
/// The type is checked before opening (opening a FIFO waits for a writer, opening a device can
/// act on it), the open itself does not block (a FIFO put in its place meanwhile returns at
/// once), and the opened file is checked again. A symbolic link is followed.
pub fn open_regular(path: &Path, what: &str) -> Result<File> {
    let io = |e: std::io::Error| Error::io(format!("reading {}", path.display()), e);
    if let Some(kind) = platform::kind_of_path(path) {
        return Err(not_regular_file(path, kind, what));
    }
    require_regular_file(&std::fs::metadata(path).map_err(io)?, path, what)?;
    let file = platform::nonblocking_read_options()
        .open(path)
        .map_err(io)?;
    require_regular_file(&file.metadata().map_err(io)?, path, what)?;
    Ok(file)
}

/// What a target held before a commit, for a roll-back.
enum Backup {
    /// Nothing: a roll-back removes the new file.
    Nothing,
    /// A hard link to the old file (or link, or FIFO), renamed back by a roll-back.
    Kept(PathBuf),
    /// Something the file system would not link: a roll-back cannot restore it.
    Unavailable,
}

/// A temporary file of a [`StagedFiles`], and the path it will replace.
struct Staged {
    temp: PathBuf,
    target: PathBuf,
}

/// Output files written together, all or nothing. [`add`](Self::add) writes each one to a new
/// temporary file in its target's directory (synced to disk); [`commit`](Self::commit) then
/// renames every one into place. Until then no target is touched, and dropping the set (an
/// error, a panic unwinding) removes the temporaries.
///
/// A rename replaces whatever is at the target path itself: a symbolic link planted there is
/// replaced by the new file and its target is left untouched (unlike
/// [`embedding_file::save`](crate::embedding_file::save), which writes through a link by
/// design); a FIFO there is replaced, never opened. A target that is a directory is refused
/// before anything is renamed. Should a rename fail after others succeeded, those are rolled
/// back: each target that existed gets its old file back (kept as a hard link while the set is
/// committed; where the file system refuses one, the error says which files are new).
pub struct StagedFiles {
    staged: Vec<Staged>,
}

impl Default for StagedFiles {
    fn default() -> Self {
        Self::new()
    }
}

impl StagedFiles {
    pub fn new() -> Self {
        StagedFiles { staged: Vec::new() }
    }

    /// Writes the file that will replace `target`: `write` fills a new temporary file beside it,
    /// which is then synced. Fails (removing that temporary) if `write` fails, if `target` names
    /// no file, or if its directory does not exist.
    pub fn add(
        &mut self,
        target: &Path,
        write: impl FnOnce(&mut dyn Write) -> std::io::Result<()>,
    ) -> Result<()> {
        let context = format!("writing {}", target.display());
        let (temp, file) = create_temp(target, &context)?;
        // Registered at once, so that any failure below (or a panic) removes it.
        self.staged.push(Staged {
            temp,
            target: target.to_path_buf(),
        });
        let mut out = std::io::BufWriter::new(file);
        let written = (|| -> std::io::Result<()> {
            write(&mut out)?;
            let file = out.into_inner().map_err(|e| e.into_error())?;
            file.sync_all()
        })();
        written.map_err(|e| Error::io(context, e))
    }

    /// The targets written so far, in order.
    pub fn targets(&self) -> impl Iterator<Item = &Path> {
        self.staged.iter().map(|s| s.target.as_path())
    }

    /// Renames every temporary file onto its target, in the order they were added, then syncs
    /// their directories. On failure no target is left changed (see the type's documentation)
    /// and no temporary remains.
    pub fn commit(mut self) -> Result<()> {
        let staged = std::mem::take(&mut self.staged);
        let result = commit(&staged, &|from, to| std::fs::rename(from, to));
        // The temporaries not renamed (all of them on a failure before the renames).
        for s in &staged {
            let _ = std::fs::remove_file(&s.temp);
        }
        result
    }
}

impl Drop for StagedFiles {
    fn drop(&mut self) {
        for s in &self.staged {
            // Each is this set's own (create_temp made it), so removing it is safe.
            let _ = std::fs::remove_file(&s.temp);
        }
    }
}

/// The commit, with the rename to use (a test makes one fail).
fn commit(staged: &[Staged], rename: &dyn Fn(&Path, &Path) -> std::io::Result<()>) -> Result<()> {
    // A directory at a target: refused before anything changes (a rename could not replace it).
    for s in staged {
        if let Ok(meta) = std::fs::symlink_metadata(&s.target) {
            if meta.is_dir() {
                return Err(Error::io(
                    format!("writing {}", s.target.display()),
                    std::io::Error::other("it is a directory; name a file (nothing was written)"),
                ));
            }
        }
    }
    let mut dirs: Vec<(PathBuf, File)> = Vec::new();
    for s in staged {
        let dir = directory_of(&s.target);
        if dirs.iter().all(|(d, _)| d != dir) {
            let file = open_directory(dir).map_err(|e| {
                Error::io(
                    format!(
                        "writing {}: opening its directory {} (to make the write durable)",
                        s.target.display(),
                        dir.display()
                    ),
                    e,
                )
            })?;
            dirs.push((dir.to_path_buf(), file));
        }
    }
    // What each target holds now, kept under a temporary name for a roll-back.
    let backups: Vec<Backup> = staged
        .iter()
        .map(|s| {
            if std::fs::symlink_metadata(&s.target).is_err() {
                return Backup::Nothing;
            }
            // `hard_link` links a symbolic link itself, not the file it names.
            match temp_path(&s.target) {
                Ok(b) if std::fs::hard_link(&s.target, &b).is_ok() => Backup::Kept(b),
                _ => Backup::Unavailable,
            }
        })
        .collect();
    let remove_backups = |backups: &[Backup]| {
        for b in backups {
            if let Backup::Kept(path) = b {
                let _ = std::fs::remove_file(path);
            }
        }
    };
    for (i, s) in staged.iter().enumerate() {
        if let Err(e) = rename(&s.temp, &s.target) {
            let mut kept_new = Vec::new();
            for (done, backup) in staged[..i].iter().zip(&backups) {
                let restored = match backup {
                    Backup::Kept(b) => std::fs::rename(b, &done.target).is_ok(),
                    Backup::Nothing => std::fs::remove_file(&done.target).is_ok(),
                    Backup::Unavailable => false,
                };
                if !restored {
                    kept_new.push(done.target.display().to_string());
                }
            }
            remove_backups(&backups);
            let outcome = if kept_new.is_empty() {
                "nothing was replaced".to_string()
            } else {
                format!(
                    "these were already replaced and could not be restored: {}",
                    kept_new.join(", ")
                )
            };
            return Err(Error::io(
                format!("writing {} ({outcome})", s.target.display()),
                e,
            ));
        }
    }
    remove_backups(&backups);
    for (dir, file) in &dirs {
        sync_directory(file).map_err(|e| {
            Error::io(
                format!(
                    "the new files are in place, but syncing their directory {} failed, so they \
                     may not survive a crash or power loss",
                    dir.display()
                ),
                e,
            )
        })?;
    }
    Ok(())
}

/// How long a temporary file must have been left unchanged, with its process gone, before a
/// later save removes it as abandoned.
const ABANDONED_AFTER: std::time::Duration = std::time::Duration::from_secs(15 * 60);

/// The process id in a temporary file name made by [`temp_path`], if it is one.
fn temp_owner(file_name: &str) -> Option<i32> {
    let stem = file_name.strip_prefix('.')?.strip_suffix(TEMP_SUFFIX)?;
    let (_, tail) = stem.rsplit_once('.')?;
    let (pid, n) = tail.split_once('-')?;
    n.parse::<u64>().ok()?;
    pid.parse::<i32>().ok().filter(|p| *p > 0)
}

/// Removes the temporary files that saves killed mid-write left in `dir` (a killed process
/// cannot clean up). A file is removed only when its name is exactly ours, `is_ours` says its
/// contents are (a user's file that happens to match the name pattern is not ours), the process that wrote it no longer exists, and it has
/// not changed for 15 minutes: a save in progress, even by a process in another PID namespace
/// sharing the directory, keeps writing and is left alone. Done once per directory per process, after a
/// successful save; failures are ignored (this is housekeeping, never a reason to fail a save).
/// Returns the number of files removed.
pub(crate) fn remove_abandoned_temps(dir: &Path, is_ours: impl Fn(&Path) -> bool) -> usize {
    let own = std::process::id() as i32;
    let Ok(entries) = std::fs::read_dir(dir) else {
        return 0;
    };
    let mut removed = 0;
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some(pid) = name.to_str().and_then(temp_owner) else {
            continue;
        };
        if pid == own || platform::process_exists(pid) {
            continue;
        }
        let idle = entry
            .metadata()
            .ok()
            .filter(|m| m.is_file())
            .and_then(|m| m.modified().ok())
            .and_then(|t| t.elapsed().ok());
        if idle.is_some_and(|idle| idle >= ABANDONED_AFTER)
            && is_ours(&entry.path())
            && std::fs::remove_file(entry.path()).is_ok()
        {
            removed += 1;
        }
    }
    removed
}

/// Runs [`remove_abandoned_temps`] the first time this process saves into `dir`.
pub(crate) fn clean_once(dir: &Path, is_ours: impl Fn(&Path) -> bool) {
    static CLEANED: std::sync::Mutex<Vec<PathBuf>> = std::sync::Mutex::new(Vec::new());
    let key = dir.canonicalize().unwrap_or_else(|_| dir.to_path_buf());
    {
        let mut cleaned = CLEANED.lock().unwrap_or_else(|p| p.into_inner());
        if cleaned.contains(&key) {
            return;
        }
        cleaned.push(key);
    }
    let removed = remove_abandoned_temps(dir, is_ours);
    if removed > 0 {
        crate::log::emit(
            crate::log::LogLevel::Info,
            &format!(
                "removed {removed} temporary file(s) of interrupted saves from {}",
                dir.display()
            ),
        );
    }
}

/// Symbolic links followed at most, as the kernel does (`ELOOP` beyond).
const MAX_LINK_HOPS: usize = 40;

/// The file a save into `path` replaces. A save through a symbolic link replaces the file the
/// link (or chain of links) finally names, in that file's directory, and leaves the link as it
/// is, so the link keeps pointing at the new contents, as any write through a link would. A
/// dangling link's target is created. Links in the directories above are left to the kernel.
pub(crate) fn save_target(path: &Path, what: &str) -> Result<PathBuf> {
    let mut current = path.to_path_buf();
    for _ in 0..=MAX_LINK_HOPS {
        let is_link = std::fs::symlink_metadata(&current)
            .map(|m| m.file_type().is_symlink())
            .unwrap_or(false);
        if !is_link {
            // Not a link, or nothing there yet (created by the save), or unreadable (the save
            // reports why).
            return Ok(current);
        }
        let link = std::fs::read_link(&current)
            .map_err(|e| Error::io(format!("saving {what} to {}", path.display()), e))?;
        current = if link.is_absolute() {
            link
        } else {
            directory_of(&current).join(link)
        };
    }
    Err(Error::io(
        format!("saving {what} to {}", path.display()),
        std::io::Error::new(
            std::io::ErrorKind::InvalidInput,
            format!(
                "more than {MAX_LINK_HOPS} symbolic links in a row (a loop?); \
                 give the path of a file or of a link that ends at one"
            ),
        ),
    ))
}

/// Replaces `target` with what `write` writes, atomically: a temporary file in the target's
/// directory, fsync, rename over the target, fsync of the directory (with `sync_dir`). The
/// directory is opened first, so a save that could not be made durable fails before anything
/// is written. A failure before the rename removes the temporary file and leaves `target` as it
/// was; a failure to sync the directory after the rename is reported as such (the new contents
/// are in place, their survival of a power loss is not assured). `shown` is the path the caller
/// gave, and `what` what is saved ("the embedding"), for messages.
pub(crate) fn replace_atomically(
    target: &Path,
    shown: &Path,
    what: &str,
    write: impl FnOnce(&mut File) -> std::io::Result<()>,
    sync_dir: &dyn Fn(&File) -> std::io::Result<()>,
) -> Result<()> {
    let context = if target == shown {
        format!("saving {what} to {}", shown.display())
    } else {
        format!(
            "saving {what} to {} (the file its link names, {})",
            shown.display(),
            target.display()
        )
    };
    let dir_path = directory_of(target);
    // Only a directory: opening a FIFO named like one would block.
    let dir = open_directory(dir_path).map_err(|e| {
        Error::io(
            format!(
                "{context}: opening its directory {} (to make the save durable)",
                dir_path.display()
            ),
            e,
        )
    })?;
    let (tmp, mut file) = create_temp(target, &format!("saving {what} to {}", target.display()))?;
    let written = (|| -> std::io::Result<()> {
        write(&mut file)?;
        file.sync_all()?;
        drop(file);
        std::fs::rename(&tmp, target)
    })();
    if let Err(e) = written {
        // The temporary file is this save's own (create_temp made it), so removing it is safe.
        let _ = std::fs::remove_file(&tmp);
        return Err(Error::io(context, e));
    }
    sync_dir(&dir).map_err(|e| {
        Error::io(
            format!(
                "{context}: the new file is in place, but syncing its directory {} failed, \
                 so it may not survive a crash or power loss",
                dir_path.display()
            ),
            e,
        )
    })
}

#[cfg(all(test, unix))]
mod tests {
    use super::*;
    use std::cell::RefCell;
    use std::os::unix::fs::MetadataExt;

    fn scratch(name: &str) -> PathBuf {
        let dir =
            std::env::temp_dir().join(format!("sam2-unit-files-{}-{name}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        dir
    }

    fn names(dir: &Path) -> Vec<String> {
        let mut names: Vec<String> = std::fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        names.sort();
        names
    }

    /// A rename that fails on the last file rolls the others back: an old file and an old
    /// symbolic link are restored, a new file is removed, and nothing temporary remains.
    #[test]
    fn a_failed_rename_rolls_the_renamed_files_back() {
        let dir = scratch("rollback");
        std::fs::write(dir.join("victim"), b"victim").unwrap();
        std::fs::write(dir.join("a"), b"old a").unwrap();
        std::os::unix::fs::symlink("victim", dir.join("b")).unwrap();
        let mut set = StagedFiles::new();
        for name in ["a", "b", "c", "d"] {
            set.add(&dir.join(name), |f| {
                f.write_all(format!("new {name}").as_bytes())
            })
            .unwrap();
        }
        let staged = std::mem::take(&mut set.staged);
        let last = dir.join("d");
        let result = commit(&staged, &|from, to| {
            if to == last {
                Err(std::io::Error::from_raw_os_error(libc::EBUSY))
            } else {
                std::fs::rename(from, to)
            }
        });
        for s in &staged {
            let _ = std::fs::remove_file(&s.temp);
        }
        let message = result.unwrap_err().to_string();
        assert!(message.contains("nothing was replaced"), "{message}");
        assert_eq!(std::fs::read(dir.join("a")).unwrap(), b"old a");
        assert_eq!(
            std::fs::read_link(dir.join("b")).unwrap(),
            Path::new("victim")
        );
        assert_eq!(std::fs::read(dir.join("victim")).unwrap(), b"victim");
        assert_eq!(
            names(&dir),
            ["a", "b", "victim"],
            "c removed, no temporary left"
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }

    /// A commit replaces a link and a FIFO at their paths; dropping an uncommitted set removes
    /// its temporaries.
    #[test]
    fn a_commit_replaces_links_and_fifos_and_a_dropped_set_leaves_nothing() {
        let dir = scratch("commit");
        std::fs::write(dir.join("victim"), b"victim").unwrap();
        std::os::unix::fs::symlink("victim", dir.join("link")).unwrap();
        let fifo = std::ffi::CString::new(dir.join("fifo").to_str().unwrap()).unwrap();
        // SAFETY: a NUL-terminated path.
        assert_eq!(unsafe { libc::mkfifo(fifo.as_ptr(), 0o600) }, 0);
        let mut set = StagedFiles::new();
        set.add(&dir.join("link"), |f| f.write_all(b"new link"))
            .unwrap();
        set.add(&dir.join("fifo"), |f| f.write_all(b"new fifo"))
            .unwrap();
        assert_eq!(set.targets().count(), 2);
        set.commit().unwrap();
        assert_eq!(std::fs::read(dir.join("link")).unwrap(), b"new link");
        assert!(std::fs::symlink_metadata(dir.join("link"))
            .unwrap()
            .is_file());
        assert_eq!(std::fs::read(dir.join("fifo")).unwrap(), b"new fifo");
        assert_eq!(std::fs::read(dir.join("victim")).unwrap(), b"victim");
        let mut set = StagedFiles::new();
        set.add(&dir.join("dropped"), |f| f.write_all(b"x"))
            .unwrap();
        let failed = set.add(&dir.join("failed"), |_| Err(std::io::Error::other("no")));
        assert!(failed.unwrap_err().to_string().contains("failed"));
        drop(set);
        assert_eq!(names(&dir), ["fifo", "link", "victim"]);
        std::fs::remove_dir_all(&dir).unwrap();
    }

    fn identity(path: &Path) -> (u64, u64) {
        let m = std::fs::metadata(path).unwrap();
        (m.dev(), m.ino())
    }

    #[test]
    fn a_bare_file_name_syncs_the_current_directory() {
        // The test runs in the package directory; the file is removed at once.
        let name = format!("sam2-unit-test-bare-name-{}.bin", std::process::id());
        let path = Path::new(&name);
        // (device, inode) of each directory synced.
        let synced = RefCell::new(Vec::new());
        let sync = |dir: &File| {
            let m = dir.metadata()?;
            synced.borrow_mut().push((m.dev(), m.ino()));
            dir.sync_all()
        };
        let result =
            replace_atomically(path, path, "the embedding", |f| f.write_all(b"new"), &sync);
        let contents = std::fs::read(path);
        let _ = std::fs::remove_file(path);
        result.unwrap();
        assert_eq!(contents.unwrap(), b"new");
        assert_eq!(*synced.borrow(), vec![identity(Path::new("."))]);
    }

    #[test]
    fn a_failed_directory_sync_fails_the_save_and_says_the_file_is_in_place() {
        let dir = std::env::temp_dir().join(format!("sam2-unit-dirsync-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("e.sam2");
        std::fs::write(&path, b"old").unwrap();
        let failing =
            |_: &File| -> std::io::Result<()> { Err(std::io::Error::from_raw_os_error(libc::EIO)) };
        let result = replace_atomically(
            &path,
            &path,
            "the embedding",
            |f| f.write_all(b"new"),
            &failing,
        );
        let contents = std::fs::read(&path).unwrap();
        let left = std::fs::read_dir(&dir).unwrap().count();
        std::fs::remove_dir_all(&dir).unwrap();
        match result {
            Err(Error::Io { context, source }) => {
                assert_eq!(source.raw_os_error(), Some(libc::EIO));
                assert!(
                    context.contains("in place") && context.contains("power loss"),
                    "{context}"
                );
            }
            other => panic!("expected the directory's I/O error, got {other:?}"),
        }
        assert_eq!(contents, b"new", "the rename happened; the error says so");
        assert_eq!(left, 1, "no temporary file left");
    }
}
