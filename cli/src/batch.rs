//! A folder or a list file of inputs at a time: one result per input under `-o DIR`, inputs whose
//! complete result is already there skipped (so a killed run resumes where it stopped), a
//! deterministic part of them per shard, the models loaded once, and one bad input never stopping
//! the others. docs/cli.md ("Batches") says what a user sees.

use std::path::{Path, PathBuf};

use crate::common::has_extension;
use crate::failure::{exit, Failure};
use crate::progress;
use crate::shard::Shard;

/// Where a batch's inputs come from.
pub(crate) enum Source {
    /// Every image under the folder (its subfolders too), by relative path.
    Folder(PathBuf),
    /// One input per line.
    List(PathBuf),
}

/// The extensions of a list file.
const LIST_EXTENSIONS: [&str; 3] = ["txt", "lst", "list"];
/// The extensions of the images a folder's batch takes, and of a folder's frames.
pub(crate) const IMAGE_EXTENSIONS: [&str; 3] = ["png", "jpg", "jpeg"];

/// Whether `path` is a list file (`.txt`, `.lst`, `.list`, not a folder).
pub(crate) fn is_list(path: &Path) -> bool {
    has_extension(path, &LIST_EXTENSIONS) && !path.is_dir()
}

/// The batch an image argument names: a folder, or a list file; `None` for one image.
pub(crate) fn image_source(path: &Path) -> Option<Source> {
    if path.is_dir() {
        Some(Source::Folder(path.to_path_buf()))
    } else if is_list(path) {
        Some(Source::List(path.to_path_buf()))
    } else {
        None
    }
}

/// `--shard` given for one input.
pub(crate) fn shard_needs_a_batch(shard: Shard) -> Failure {
    Failure::new(
        exit::USAGE,
        format!(
            "--shard {shard} splits a batch (a folder, or a list file: .txt, .lst, .list), not one \
             input"
        ),
    )
}

/// One input of a batch.
#[derive(Debug, Clone)]
pub(crate) struct Input {
    /// Where it is read from.
    pub(crate) path: PathBuf,
    /// What names it in messages and picks its shard: its path relative to the folder
    /// (`/`-separated), or its line in the list file.
    pub(crate) key: String,
    /// Its result's path under `-o DIR`, without an extension: the relative path less its
    /// extension for a folder's image, the file's stem for a list's entry.
    pub(crate) name: PathBuf,
}

/// This shard's inputs, of how many in all.
pub(crate) struct Plan {
    pub(crate) inputs: Vec<Input>,
    pub(crate) total: usize,
    pub(crate) shard: Option<Shard>,
}

/// The inputs of `source`, checked for two that would write one result, and this shard's part of
/// them (`--shard`, else a scheduler's variables). `out` is left out of a folder it is inside of.
pub(crate) fn plan(source: &Source, out: &Path, shard: Option<Shard>) -> Result<Plan, Failure> {
    let shard = match shard {
        Some(s) => Some(s),
        None => Shard::from_environment(&|name| std::env::var(name).ok())
            .map_err(|m| Failure::new(exit::USAGE, m))?,
    };
    let inputs = match source {
        Source::Folder(dir) => folder_inputs(dir, out)?,
        Source::List(file) => list_inputs(file)?,
    };
    check_collisions(&inputs, out)?;
    let total = inputs.len();
    let inputs = inputs
        .into_iter()
        .filter(|i| shard.is_none_or(|s| s.takes(i.key.as_bytes())))
        .collect();
    Ok(Plan {
        inputs,
        total,
        shard,
    })
}

fn unreadable(path: &Path, e: std::io::Error) -> Failure {
    Failure::new(exit::INPUT, format!("cannot read {}: {e}", path.display()))
}

/// Every PNG or JPEG file under `dir`, sorted by relative path; hidden files and folders
/// (`.name`, where temporaries live), links to folders, and the output folder are not entered.
fn folder_inputs(dir: &Path, out: &Path) -> Result<Vec<Input>, Failure> {
    let skip = out.canonicalize().ok();
    let mut inputs = Vec::new();
    let mut pending = vec![PathBuf::new()];
    while let Some(relative) = pending.pop() {
        let here = dir.join(&relative);
        if !relative.as_os_str().is_empty() && skip.is_some() && here.canonicalize().ok() == skip {
            continue;
        }
        for entry in std::fs::read_dir(&here).map_err(|e| unreadable(&here, e))? {
            let entry = entry.map_err(|e| unreadable(&here, e))?;
            let name = entry.file_name();
            if name.to_string_lossy().starts_with('.') {
                continue;
            }
            let rel = relative.join(&name);
            let kind = entry
                .file_type()
                .map_err(|e| unreadable(&entry.path(), e))?;
            if kind.is_dir() {
                pending.push(rel);
            } else if has_extension(&rel, &IMAGE_EXTENSIONS) {
                let key = rel
                    .components()
                    .map(|c| c.as_os_str().to_string_lossy())
                    .collect::<Vec<_>>()
                    .join("/");
                inputs.push(Input {
                    path: dir.join(&rel),
                    key,
                    name: rel.with_extension(""),
                });
            }
        }
    }
    inputs.sort_by(|a, b| a.key.cmp(&b.key));
    if inputs.is_empty() {
        return Err(Failure::new(
            exit::INPUT,
            format!(
                "{} holds no images (PNG or JPEG files: .png, .jpg, .jpeg)",
                dir.display()
            ),
        ));
    }
    Ok(inputs)
}

/// The list file's entries, one per line: blank lines and lines starting with `#` are skipped,
/// a relative path is relative to the list file's folder.
fn list_inputs(file: &Path) -> Result<Vec<Input>, Failure> {
    let text = std::fs::read_to_string(file).map_err(|e| unreadable(file, e))?;
    let base = file.parent().unwrap_or(Path::new(""));
    let mut inputs = Vec::new();
    for line in text.lines() {
        let entry = line.trim();
        if entry.is_empty() || entry.starts_with('#') {
            continue;
        }
        let path = base.join(entry);
        let stem = Path::new(entry)
            .file_stem()
            .filter(|s| !s.is_empty())
            .ok_or_else(|| {
                Failure::new(
                    exit::INPUT,
                    format!(
                        "{}: the entry {entry} names no file, so it has no result name",
                        file.display()
                    ),
                )
            })?;
        inputs.push(Input {
            path,
            key: entry.to_string(),
            name: PathBuf::from(stem),
        });
    }
    if inputs.is_empty() {
        return Err(Failure::new(
            exit::INPUT,
            format!("{} lists no inputs", file.display()),
        ));
    }
    Ok(inputs)
}

/// Two inputs that would write the same result are refused before anything is written.
fn check_collisions(inputs: &[Input], out: &Path) -> Result<(), Failure> {
    let mut seen: std::collections::HashMap<&Path, &str> = std::collections::HashMap::new();
    for input in inputs {
        if let Some(first) = seen.insert(&input.name, &input.key) {
            let what = if first == input.key {
                format!("{first} is listed twice")
            } else {
                format!("{first} and {} would both write", input.key)
            };
            return Err(Failure::new(
                exit::INPUT,
                format!(
                    "{what} {}.*: rename one, or run them in separate batches (nothing was \
                     written)",
                    out.join(&input.name).display()
                ),
            ));
        }
    }
    Ok(())
}

/// How a batch went, input by input.
#[derive(Default)]
struct Tally {
    done: usize,
    skipped: usize,
    failed: Vec<(String, Failure)>,
}

/// Runs a batch: `complete` says whether an input's result is already whole (then it is
/// skipped), `load` loads the models (once, and only if an input is left to do), `one` does an
/// input, `stop` gives the exit code when a signal asked the batch to stop.
/// Prints the summary on stderr; a batch in which an input failed is [`exit::BATCH`].
pub(crate) fn run<M>(
    plan: Plan,
    unit: &str,
    complete: impl Fn(&Input) -> bool,
    load: impl FnOnce() -> Result<M, Failure>,
    mut one: impl FnMut(&mut M, &Input) -> Result<(), Failure>,
    stop: impl Fn() -> Option<u8>,
) -> Result<(), Failure> {
    let mut tally = Tally::default();
    let mut todo = Vec::new();
    for input in &plan.inputs {
        if complete(input) {
            tally.skipped += 1;
        } else {
            todo.push(input);
        }
    }
    let mut stopped: Option<Failure> = None;
    if !todo.is_empty() {
        let mut models = load()?;
        let bar = progress::Bar::over_inputs(todo.len() as u64, unit);
        for (k, input) in todo.iter().enumerate() {
            bar.message(&input.key);
            match crate::guarded(|| one(&mut models, input)) {
                Ok(()) => tally.done += 1,
                Err(f) => tally.failed.push((input.key.clone(), f)),
            }
            bar.advance(input.key.clone());
            if let Some(code) = stop() {
                let left = todo.len() - k - 1;
                stopped = Some(Failure::new(
                    code,
                    format!(
                        "stopped by a signal with {left} input{} not started: run the command \
                         again to resume",
                        if left == 1 { "" } else { "s" }
                    ),
                ));
                break;
            }
        }
    }
    summarise(&plan, &tally);
    if let Some(f) = stopped {
        return Err(f);
    }
    match tally.failed.len() {
        0 => Ok(()),
        n => Err(Failure::new(
            exit::BATCH,
            format!(
                "{n} input{} of the batch failed (named above); run the command again to retry \
                 them, the others are skipped",
                if n == 1 { "" } else { "s" }
            ),
        )),
    }
}

/// The summary: one line of counts, then one line per failed input with its reason and code.
fn summarise(plan: &Plan, tally: &Tally) {
    let whose = match plan.shard {
        Some(s) => format!(
            "shard {s}: {} of the batch's {} inputs",
            plan.inputs.len(),
            plan.total
        ),
        None => format!("{} inputs", plan.total),
    };
    eprintln!(
        "sam2: {whose}: {} done, {} skipped (complete result already there), {} failed",
        tally.done,
        tally.skipped,
        tally.failed.len()
    );
    for (key, f) in &tally.failed {
        eprintln!(
            "sam2: failed: {key}: {} (exit {})",
            f.message.replace('\n', " "),
            f.code
        );
    }
}

/// Whether a file is at `path` (a result renamed into place whole).
pub(crate) fn exists(path: &Path) -> bool {
    std::fs::symlink_metadata(path).is_ok_and(|m| m.is_file())
}
