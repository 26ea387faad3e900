//! Where `sam2 track` puts its result, written as the frames are tracked: memory stays flat in
//! the number of frames, and an interrupted or failed run leaves either the previous result or a
//! consistent partial one that says so, never a mix and never a temporary file.
//!
//! A run writes into a private staging folder inside the output folder, `DIR/.sam2-track-<pid>`:
//! each frame's masks as PNG files as soon as the frame is tracked, and one line of JSON per
//! frame (its image entry and annotations) to a journal. At the end (or when a signal or an error
//! stops the tracking) `track.json` is assembled from the journal, frame by frame, and the
//! result is moved into place by renames: each `masks/obj<ID>` folder replaced whole (the old
//! one, or a link planted there, moved aside and removed, never written through), then
//! `track.json`. A run killed outright (SIGKILL, power loss) leaves its staging folder, which the
//! next run into that folder removes once its process is gone.

use std::collections::BTreeMap;
use std::fs::File;
use std::io::{BufRead, BufReader, BufWriter, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicI32, Ordering};

use sam2::masks::Rle;
use sam2::video::TrackedFrame;

use crate::failure::{exit, Failure};
use crate::picture;

/// Names of the staging folders of runs (`.sam2-track-<pid>`) and of the folders a run moved
/// aside while putting its result in place (`.sam2-old-<pid>-<name>`).
const STAGE_PREFIX: &str = ".sam2-track-";
const OLD_PREFIX: &str = ".sam2-old-";

fn failed(what: impl std::fmt::Display, e: std::io::Error) -> Failure {
    Failure::new(exit::OUTPUT, format!("{what}: {e}"))
}

/// Whether process `pid` may still be running (on systems where this cannot be asked, a folder
/// is left to its owner unless it is this process's).
fn alive(pid: u32) -> bool {
    #[cfg(unix)]
    {
        let Ok(pid) = libc::pid_t::try_from(pid) else {
            return false;
        };
        // SAFETY: signal 0 only checks that the process exists and may be signalled.
        let rc = unsafe { libc::kill(pid, 0) };
        rc == 0 || std::io::Error::last_os_error().raw_os_error() != Some(libc::ESRCH)
    }
    #[cfg(not(unix))]
    {
        pid != std::process::id()
    }
}

/// The process id in the name of a staging or moved-aside folder, if it is one.
fn owner(name: &str) -> Option<u32> {
    let rest = name
        .strip_prefix(STAGE_PREFIX)
        .or_else(|| name.strip_prefix(OLD_PREFIX))?;
    let pid = rest.split('-').next()?;
    pid.parse().ok()
}

/// Removes what runs killed outright left in `dir` (and in `dir/masks`): staging folders and
/// moved-aside folders whose process is gone. A link is removed as a link. Returns how many.
fn remove_leftovers(dir: &Path) -> usize {
    let mut removed = 0;
    for d in [dir.to_path_buf(), dir.join("masks")] {
        let Ok(entries) = std::fs::read_dir(&d) else {
            continue;
        };
        for entry in entries.flatten() {
            let name = entry.file_name();
            let Some(pid) = name.to_str().and_then(owner) else {
                continue;
            };
            if pid != std::process::id() && alive(pid) {
                continue;
            }
            if remove(&entry.path()).is_ok() {
                removed += 1;
            }
        }
    }
    removed
}

/// Removes a file, a link (never what it names) or a folder and everything in it.
fn remove(path: &Path) -> std::io::Result<()> {
    let meta = std::fs::symlink_metadata(path)?;
    if meta.is_dir() {
        std::fs::remove_dir_all(path)
    } else {
        std::fs::remove_file(path)
    }
}

/// The signal that asked the run to stop (SIGINT, SIGTERM), 0 while none has.
static STOP: AtomicI32 = AtomicI32::new(0);

/// Asks for SIGINT and SIGTERM to stop the tracking between two frames instead of killing the
/// process; a second one kills it as usual. Unix only (elsewhere the first kills it, and the
/// next run removes the staging folder).
pub(crate) fn catch_stop_signals() {
    #[cfg(unix)]
    {
        extern "C" fn on_signal(signal: libc::c_int) {
            STOP.store(signal, Ordering::SeqCst);
        }
        for signal in [libc::SIGINT, libc::SIGTERM] {
            // SAFETY: the handler only stores to an atomic (async-signal-safe); SA_RESETHAND
            // restores the default action once it has run.
            unsafe {
                let mut action: libc::sigaction = std::mem::zeroed();
                action.sa_sigaction = on_signal as extern "C" fn(libc::c_int) as usize;
                action.sa_flags = libc::SA_RESETHAND;
                libc::sigemptyset(&mut action.sa_mask);
                libc::sigaction(signal, &action, std::ptr::null_mut());
            }
        }
    }
}

/// The signal that asked the run to stop, if one has.
pub(crate) fn stop_requested() -> Option<i32> {
    match STOP.load(Ordering::SeqCst) {
        0 => None,
        s => Some(s),
    }
}

/// Refuses outputs that would overwrite an input frame, before anything is written: a frame
/// inside `DIR/masks/obj<ID>` of an object tracked, or `DIR/track.json` itself.
pub(crate) fn check_clashes(out: &Path, frames: &[PathBuf], ids: &[u32]) -> Result<(), Failure> {
    let canonical_out = match out.canonicalize() {
        Ok(c) => c,
        // Nothing there yet: no frame can be inside it.
        Err(_) => return Ok(()),
    };
    let outputs: Vec<PathBuf> = ids
        .iter()
        .map(|id| canonical_out.join("masks").join(format!("obj{id}")))
        .collect();
    let json = canonical_out.join("track.json");
    for frame in frames {
        let Ok(f) = frame.canonicalize() else {
            continue;
        };
        let clash = if f == json {
            Some(json.clone())
        } else {
            outputs.iter().find(|o| f.starts_with(o)).cloned()
        };
        if let Some(output) = clash {
            return Err(Failure::new(
                exit::INPUT,
                format!(
                    "frame {} is inside the output {}, which this run replaces: write to another \
                     folder with -o (nothing was written)",
                    frame.display(),
                    output.display()
                ),
            ));
        }
    }
    Ok(())
}

/// The run's result as it is written.
pub(crate) struct TrackOutput {
    out: PathBuf,
    stage: PathBuf,
    journal: BufWriter<File>,
    /// Where each frame's latest line starts in the journal (a frame tracked in both directions
    /// is written twice; the later one counts, as it did when results were kept in memory).
    lines: BTreeMap<u32, u64>,
    written: u64,
    names: Vec<String>,
    /// Each frame's image record in track.json, besides its id, number and size: the file it
    /// came from (and, from a video, where in the stream).
    images: Vec<serde_json::Map<String, serde_json::Value>>,
    ids: Vec<u32>,
    done: bool,
}

impl TrackOutput {
    /// Prepares `out` (created if missing): removes what killed runs left there, refuses a link
    /// at `out/masks`, and creates this run's staging folder with a folder per object.
    pub(crate) fn begin(
        out: &Path,
        names: Vec<String>,
        images: Vec<serde_json::Map<String, serde_json::Value>>,
        ids: &[u32],
    ) -> Result<Self, Failure> {
        std::fs::create_dir_all(out)
            .map_err(|e| failed(format!("cannot create {}", out.display()), e))?;
        let removed = remove_leftovers(out);
        if removed > 0 {
            eprintln!(
                "sam2: removed {removed} folder(s) that interrupted runs left in {}",
                out.display()
            );
        }
        let masks = out.join("masks");
        match std::fs::symlink_metadata(&masks) {
            Ok(m) if m.file_type().is_symlink() || !m.is_dir() => {
                return Err(Failure::new(
                    exit::OUTPUT,
                    format!(
                        "{} is {}, not a folder: the masks are written only into a folder of \
                         their own (nothing was written)",
                        masks.display(),
                        if m.file_type().is_symlink() {
                            "a symbolic link"
                        } else {
                            "a file"
                        }
                    ),
                ))
            }
            _ => {}
        }
        let stage = out.join(format!("{STAGE_PREFIX}{}", std::process::id()));
        // Ours alone: a folder of that name already there (a leftover of a process with this id
        // that still runs) is an error, never reused.
        std::fs::create_dir(&stage)
            .map_err(|e| failed(format!("cannot create {}", stage.display()), e))?;
        let journal = match File::options()
            .read(true)
            .write(true)
            .create_new(true)
            .open(stage.join("journal.jsonl"))
        {
            Ok(f) => f,
            Err(e) => {
                let _ = remove(&stage);
                return Err(failed(format!("cannot create {}", stage.display()), e));
            }
        };
        // From here on, dropping the output removes the staging folder.
        let output = TrackOutput {
            out: out.to_path_buf(),
            journal: BufWriter::new(journal),
            stage,
            lines: BTreeMap::new(),
            written: 0,
            names,
            images,
            ids: ids.to_vec(),
            done: false,
        };
        for id in ids {
            let dir = output.stage.join("masks").join(format!("obj{id}"));
            std::fs::create_dir_all(&dir)
                .map_err(|e| failed(format!("cannot create {}", dir.display()), e))?;
        }
        Ok(output)
    }

    fn mask_file(&self, id: u32, k: u32) -> String {
        format!("masks/obj{id}/{}.png", self.names[k as usize])
    }

    /// Writes frame `k`'s masks and its line of the journal; the frame's masks are no longer
    /// needed in memory after this.
    pub(crate) fn frame(&mut self, k: u32, frame: &TrackedFrame) -> Result<(), Failure> {
        let (w, h) = (frame.width, frame.height);
        let mut annotations = Vec::with_capacity(frame.objects.len());
        for object in &frame.objects {
            let relative = self.mask_file(object.object_id, k);
            let path = self.stage.join(&relative);
            let write = || -> std::io::Result<()> {
                // In the private staging folder: a second pass over the frame replaces the first.
                let mut f = BufWriter::new(File::create(&path)?);
                picture::write_mask(&object.mask, w as u32, h as u32, &mut f)?;
                f.into_inner().map_err(|e| e.into_error())?.sync_all()
            };
            write().map_err(|e| failed(format!("writing {}", path.display()), e))?;
            let (area, bbox) = area_and_box(&object.mask, w);
            annotations.push(serde_json::json!({
                "frame": k,
                "object_id": object.object_id,
                "category_id": 1,
                "present": object.present,
                "object_score": object.score,
                "area": area,
                "bbox": bbox,
                "segmentation": {
                    "size": [h, w],
                    "counts": Rle::encode(&object.mask, w, h).to_coco_string(),
                },
                "mask_file": relative,
            }));
        }
        let mut image = serde_json::Map::new();
        image.insert("id".into(), (k + 1).into());
        image.insert("frame".into(), k.into());
        image.extend(self.images[k as usize].clone());
        image.insert("width".into(), w.into());
        image.insert("height".into(), h.into());
        let line = serde_json::json!({
            "image": image,
            "annotations": annotations,
        })
        .to_string();
        self.journal
            .write_all(line.as_bytes())
            .and_then(|()| self.journal.write_all(b"\n"))
            .map_err(|e| failed(format!("writing {}", self.stage.display()), e))?;
        self.lines.insert(k, self.written);
        self.written += line.len() as u64 + 1;
        Ok(())
    }

    /// The frames written so far.
    pub(crate) fn frames_written(&self) -> usize {
        self.lines.len()
    }

    /// Writes `track.json` from the journal (`head`: its fields before the images; `stopped`:
    /// why the run ended early, for a partial result) and moves the result into place.
    pub(crate) fn commit(
        mut self,
        mut head: serde_json::Map<String, serde_json::Value>,
        stopped: Option<&str>,
    ) -> Result<(), Failure> {
        let json_path = self.stage.join("track.json");
        let frames = self.lines.len();
        head.insert("complete".into(), stopped.is_none().into());
        if let Some(why) = stopped {
            head.insert(
                "partial".into(),
                serde_json::json!({
                    "reason": why,
                    "frames_tracked": frames,
                }),
            );
        }
        self.write_json(&json_path, &head)
            .map_err(|e| failed(format!("writing {}", json_path.display()), e))?;
        self.put_in_place()?;
        self.done = true;
        let _ = remove(&self.stage);
        Ok(())
    }

    /// `track.json`: the head's fields, then the images and annotations in frame order read back
    /// from the journal one line at a time.
    fn write_json(
        &mut self,
        path: &Path,
        head: &serde_json::Map<String, serde_json::Value>,
    ) -> std::io::Result<()> {
        self.journal.flush()?;
        let mut journal = BufReader::new(self.journal.get_ref().try_clone()?);
        let mut out = BufWriter::new(File::create(path)?);
        let text = serde_json::to_string_pretty(&serde_json::Value::Object(head.clone()))?;
        // The head's closing brace is replaced by the two arrays.
        let body = text
            .trim_end()
            .strip_suffix('}')
            .unwrap_or(&text)
            .trim_end();
        out.write_all(body.as_bytes())?;
        let mut read = |offset: u64| -> std::io::Result<serde_json::Value> {
            journal.seek(SeekFrom::Start(offset))?;
            let mut line = String::new();
            journal.read_line(&mut line)?;
            Ok(serde_json::from_str(&line)?)
        };
        out.write_all(b",\n  \"images\": [")?;
        for (n, &offset) in self.lines.values().enumerate() {
            let entry = read(offset)?;
            out.write_all(if n == 0 { b"\n    " } else { b",\n    " })?;
            serde_json::to_writer(&mut out, &entry["image"])?;
        }
        out.write_all(b"\n  ],\n  \"annotations\": [")?;
        let mut id = 0usize;
        for &offset in self.lines.values() {
            let entry = read(offset)?;
            let image_id = entry["image"]["id"].clone();
            for a in entry["annotations"].as_array().into_iter().flatten() {
                let mut a = a.clone();
                id += 1;
                a["id"] = id.into();
                a["image_id"] = image_id.clone();
                out.write_all(if id == 1 { b"\n    " } else { b",\n    " })?;
                serde_json::to_writer(&mut out, &a)?;
            }
        }
        out.write_all(b"\n  ]\n}\n")?;
        out.into_inner().map_err(|e| e.into_error())?.sync_all()
    }

    /// Each object's folder, then `track.json`, renamed into place; what was there before moved
    /// aside first (a link as a link) and removed after.
    fn put_in_place(&self) -> Result<(), Failure> {
        let masks = self.out.join("masks");
        std::fs::create_dir_all(&masks)
            .map_err(|e| failed(format!("cannot create {}", masks.display()), e))?;
        let pid = std::process::id();
        let mut aside = Vec::new();
        for id in &self.ids {
            let name = format!("obj{id}");
            let target = masks.join(&name);
            if std::fs::symlink_metadata(&target).is_ok() {
                let old = masks.join(format!("{OLD_PREFIX}{pid}-{name}"));
                std::fs::rename(&target, &old)
                    .map_err(|e| failed(format!("moving the old {} aside", target.display()), e))?;
                aside.push(old);
            }
            let new = self.stage.join("masks").join(&name);
            std::fs::rename(&new, &target)
                .map_err(|e| failed(format!("moving the masks to {}", target.display()), e))?;
        }
        let json = self.out.join("track.json");
        std::fs::rename(self.stage.join("track.json"), &json)
            .map_err(|e| failed(format!("writing {}", json.display()), e))?;
        for old in aside {
            let _ = remove(&old);
        }
        #[cfg(unix)]
        for dir in [&masks, &self.out] {
            if let Ok(d) = File::open(dir) {
                let _ = d.sync_all();
            }
        }
        Ok(())
    }
}

impl Drop for TrackOutput {
    fn drop(&mut self) {
        if !self.done {
            let _ = remove(&self.stage);
        }
    }
}

/// The mask's pixel count and COCO box `[x, y, width, height]` (all 0 when empty).
pub(crate) fn area_and_box(mask: &[u8], width: usize) -> (usize, [usize; 4]) {
    let (mut area, mut x0, mut y0, mut x1, mut y1) = (0, usize::MAX, usize::MAX, 0, 0);
    for (i, &v) in mask.iter().enumerate() {
        if v != 0 {
            let (x, y) = (i % width, i / width);
            area += 1;
            x0 = x0.min(x);
            y0 = y0.min(y);
            x1 = x1.max(x);
            y1 = y1.max(y);
        }
    }
    if area == 0 {
        (0, [0, 0, 0, 0])
    } else {
        (area, [x0, y0, x1 - x0 + 1, y1 - y0 + 1])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_box_spans_the_mask() {
        let mask = [0, 0, 0, 0, 1, 1, 0, 1, 0];
        assert_eq!(area_and_box(&mask, 3), (3, [1, 1, 2, 2]));
        assert_eq!(area_and_box(&[0; 9], 3), (0, [0, 0, 0, 0]));
    }

    #[test]
    fn leftover_names_carry_their_process() {
        assert_eq!(owner(".sam2-track-123"), Some(123));
        assert_eq!(owner(".sam2-old-77-obj1"), Some(77));
        assert_eq!(owner("sam2-track-1"), None);
        assert_eq!(owner(".sam2-track-x"), None);
    }
}
