//! `sam2 track`: a video model (SAM2's four modules, found by name in `--model`) over a sequence
//! of frames, from prompts on any frames, forward and backward; writes one mask PNG per object
//! and frame and one COCO-style JSON (an RLE per object per frame, with its presence score).

use std::path::{Path, PathBuf};

use image::RgbImage;
use sam2::video::{Direction, Tracker, TrackerOptions, VideoModelPaths};
use sam2::{ImageView, PixelFormat, Prompt};

use crate::args::{Directions, Track};
use crate::batch::IMAGE_EXTENSIONS;
use crate::common::{has_extension, init_runtime, session_options};
use crate::failure::{exit, Failure};
use crate::track_out::{self, TrackOutput};
use crate::video_file::{self, At, Video};
use crate::{picture, progress};
use sam2::Error;

/// The frames the arguments name: one directory's PNG and JPEG files sorted by name, or the
/// files given, in the order given.
fn frame_files(given: &[PathBuf]) -> Result<Vec<PathBuf>, Failure> {
    if let [dir] = given {
        if dir.is_dir() {
            let entries = std::fs::read_dir(dir).map_err(|e| {
                Failure::new(exit::INPUT, format!("cannot read {}: {e}", dir.display()))
            })?;
            let mut files = Vec::new();
            for entry in entries {
                let entry = entry.map_err(|e| {
                    Failure::new(exit::INPUT, format!("cannot read {}: {e}", dir.display()))
                })?;
                let path = entry.path();
                if has_extension(&path, &IMAGE_EXTENSIONS) && !path.is_dir() {
                    files.push(path);
                }
            }
            files.sort_by(|a, b| a.file_name().cmp(&b.file_name()));
            if files.is_empty() {
                return Err(Failure::new(
                    exit::INPUT,
                    format!(
                        "{} holds no frames (PNG or JPEG files: .png, .jpg, .jpeg)",
                        dir.display()
                    ),
                ));
            }
            return Ok(files);
        }
    }
    for path in given {
        if path.is_dir() {
            return Err(Failure::new(
                exit::INPUT,
                format!(
                    "{} is a directory: give one directory of frames, or the frames themselves",
                    path.display()
                ),
            ));
        }
    }
    Ok(given.to_vec())
}

/// The name of each frame's mask files: the frames' own names when they are all different,
/// else the frame numbers.
fn frame_names(files: &[PathBuf]) -> Vec<String> {
    let stems: Vec<String> = files
        .iter()
        .map(|f| {
            f.file_stem()
                .map(|s| s.to_string_lossy().into_owned())
                .unwrap_or_default()
        })
        .collect();
    let unique: std::collections::HashSet<&String> = stems.iter().collect();
    if unique.len() == stems.len() && stems.iter().all(|s| !s.is_empty()) {
        stems
    } else {
        (0..files.len()).map(|i| format!("{i:05}")).collect()
    }
}

fn view(rgb: &RgbImage) -> Result<ImageView<'_>, Failure> {
    let (w, h) = rgb.dimensions();
    ImageView::packed(rgb.as_raw(), w as usize, h as usize, PixelFormat::Rgb)
        .map_err(|e| Failure::of(e, exit::INPUT))
}

/// Where the frames come from: image files, or a video file decoded by ffmpeg.
enum Frames {
    Files {
        files: Vec<PathBuf>,
        max_pixels: u64,
        /// The first frame read and its size: every frame must have it.
        size: Option<(u32, (u32, u32))>,
    },
    Video(Video),
}

impl Frames {
    /// The frames `given` names (the command's FRAMES, or one entry of a list file).
    fn open(t: &Track, given: &[PathBuf]) -> Result<Frames, Failure> {
        if let [file] = given {
            if video_file::is_video(file) {
                return Ok(Frames::Video(Video::open(file, t.selection, t.max_pixels)?));
            }
        }
        Ok(Frames::Files {
            files: frame_files(given)?,
            max_pixels: t.max_pixels,
            size: None,
        })
    }

    fn count(&self) -> usize {
        match self {
            Frames::Files { files, .. } => files.len(),
            Frames::Video(v) => v.frames.len(),
        }
    }

    /// The inputs, which the outputs must not overwrite.
    fn inputs(&self) -> Vec<PathBuf> {
        match self {
            Frames::Files { files, .. } => files.clone(),
            Frames::Video(v) => vec![v.path().to_path_buf()],
        }
    }

    /// Frame `k` for a message: its file, or the video and the stream's frame number.
    fn describe(&self, k: u32) -> String {
        match self {
            Frames::Files { files, .. } => files[k as usize].display().to_string(),
            Frames::Video(v) => format!("{}, frame {}", v.path().display(), v.frames[k as usize]),
        }
    }

    /// The tracker's frame of a prompt's `--frame`: the position in the list of files, or in a
    /// video the stream's own frame number (or the frame shown at a time), which must be one of
    /// those tracked.
    fn index_of(&self, frame: At) -> Result<u32, String> {
        match (self, frame) {
            (Frames::Files { files, .. }, At::Frame(k)) => {
                let count = files.len();
                if (k as usize) < count {
                    Ok(k as u32)
                } else {
                    Err(format!(
                        "there are {count} frames, numbered 0 to {}",
                        count - 1
                    ))
                }
            }
            (Frames::Files { .. }, At::Seconds(_)) => Err(
                "a time names a frame of a video file; frames in a folder are counted from 0"
                    .to_string(),
            ),
            (Frames::Video(v), at) => v.index_of(at.frame(v.fps)),
        }
    }

    /// The name of each frame's mask files: for files, the frames' own names when they are all
    /// different, else the frame numbers; for a video, the stream's frame numbers.
    fn names(&self) -> Vec<String> {
        match self {
            Frames::Files { files, .. } => frame_names(files),
            Frames::Video(v) => v.frames.iter().map(|n| format!("{n:06}")).collect(),
        }
    }

    /// Each frame's record in track.json besides its id, number and size.
    fn images(&self) -> Result<Vec<serde_json::Map<String, serde_json::Value>>, Failure> {
        let record = |value: serde_json::Value| match value {
            serde_json::Value::Object(map) => map,
            _ => unreachable!("a JSON object"),
        };
        match self {
            Frames::Files { files, .. } => files
                .iter()
                .map(|f| {
                    // Frame names must be text: track.json names each frame's file.
                    let text = f.to_str().ok_or_else(|| {
                        Failure::new(
                            exit::INPUT,
                            format!(
                                "the frame name {} is not valid UTF-8, so track.json could not \
                                 name it: rename the file",
                                f.display()
                            ),
                        )
                    })?;
                    Ok(record(serde_json::json!({ "file_name": text })))
                })
                .collect(),
            Frames::Video(v) => {
                let text = utf8_name(v.path())?;
                Ok(v.frames
                    .iter()
                    .map(|&n| {
                        record(serde_json::json!({
                            "file_name": text,
                            "video_frame": n,
                            "time": n as f64 / v.fps,
                        }))
                    })
                    .collect())
            }
        }
    }

    /// Frame `k`, upright RGB, of the first frame's size.
    fn read(&mut self, k: u32) -> Result<RgbImage, Failure> {
        match self {
            Frames::Video(v) => v.read(k),
            Frames::Files {
                files,
                max_pixels,
                size,
            } => {
                let rgb = picture::load(&files[k as usize], *max_pixels)
                    .map_err(|m| Failure::new(exit::INPUT, m))?
                    .rgb;
                let dims = rgb.dimensions();
                match *size {
                    None => *size = Some((k, dims)),
                    Some((first, d)) if d != dims => {
                        return Err(Failure::new(
                            exit::INPUT,
                            format!(
                                "{} is {}×{}, but frame {first} ({}) is {}×{}: every frame of a \
                                 video has one size",
                                files[k as usize].display(),
                                dims.0,
                                dims.1,
                                files[first as usize].display(),
                                d.0,
                                d.1
                            ),
                        ))
                    }
                    Some(_) => {}
                }
                Ok(rgb)
            }
        }
    }
}

fn utf8_name(path: &Path) -> Result<String, Failure> {
    path.to_str().map(str::to_string).ok_or_else(|| {
        Failure::new(
            exit::INPUT,
            format!(
                "the name {} is not valid UTF-8, so track.json could not name it: rename the file",
                path.display()
            ),
        )
    })
}

pub fn run(t: Track) -> Result<(), Failure> {
    if let [list] = t.frames.as_slice() {
        if crate::batch::is_list(list) {
            return crate::track_batch::run(&t, list);
        }
    }
    if let Some(shard) = t.shard {
        return Err(crate::batch::shard_needs_a_batch(shard));
    }
    let clip = Clip::prepare(&t, &t.frames, &t.out)?;
    let paths = VideoModelPaths::find(&t.model).map_err(|e| Failure::of(e, exit::MODEL))?;
    init_runtime(t.onnxruntime.as_deref())?;
    let tracker = load_tracker(&t, &paths, clip.frames.count())?;
    let line = clip.track(&t, &paths, &tracker, &t.out, t.overlay.as_deref())?;
    eprintln!("sam2: {line}");
    Ok(())
}

/// The video model, for a clip of `count` frames.
pub(crate) fn load_tracker(
    t: &Track,
    paths: &VideoModelPaths,
    count: usize,
) -> Result<Tracker, Failure> {
    let _p = progress::step("loading the video model");
    Tracker::new(
        paths,
        &TrackerOptions {
            session: session_options(t.device),
            num_frames: Some(count as u32),
            ..TrackerOptions::default()
        },
    )
    .map_err(|e| Failure::of(e, exit::MODEL))
}

/// One clip, opened and checked: its frames, its objects, and its prompts on the tracker's
/// frames.
pub(crate) struct Clip<'t> {
    frames: Frames,
    ids: Vec<u32>,
    ordered: Vec<(u32, &'t crate::args::TrackPrompt)>,
}

impl<'t> Clip<'t> {
    /// The clip `given` names (the command's FRAMES, or a list file's entry), whose result goes
    /// to `out`.
    pub(crate) fn prepare(t: &'t Track, given: &[PathBuf], out: &Path) -> Result<Self, Failure> {
        let frames = Frames::open(t, given)?;
        let mut ids: Vec<u32> = t.prompts.iter().map(|p| p.object_id).collect();
        ids.sort_unstable();
        ids.dedup();
        track_out::check_clashes(out, &frames.inputs(), &ids)?;
        // Each prompt on the tracker's frame (a video's frame numbers are the stream's own).
        let mut ordered = Vec::with_capacity(t.prompts.len());
        for p in &t.prompts {
            let k = frames.index_of(p.frame).map_err(|why| {
                Failure::new(
                    exit::INPUT,
                    format!("--frame {} (object {}): {why}", p.frame, p.object_id),
                )
            })?;
            ordered.push((k, p));
        }
        ordered.sort_by_key(|(k, _)| *k);
        Ok(Clip {
            frames,
            ids,
            ordered,
        })
    }

    /// The number of frames tracked.
    pub(crate) fn count(&self) -> usize {
        self.frames.count()
    }

    /// Tracks the clip with `tracker` (made or started for its frame count) and writes the result
    /// into `out` (and the overlay video); returns the summary line.
    pub(crate) fn track(
        self,
        t: &Track,
        paths: &VideoModelPaths,
        tracker: &Tracker,
        out: &Path,
        overlay: Option<&Path>,
    ) -> Result<String, Failure> {
        let Clip {
            mut frames,
            ids,
            ordered,
        } = self;
        let count = frames.count();
        // Every frame is read when it is needed (a long clip is never held whole).
        // The prompts, frame by frame (each object's prompts on a frame at once).
        for &(k, p) in &ordered {
            let rgb = frames.read(k)?;
            let prompt = Prompt {
                points: p.points.clone(),
                bbox: p.bbox,
                mask_input: None,
            };
            tracker
                .add_prompt(k, &view(&rgb)?, p.object_id, &prompt)
                .map_err(|e| {
                    let code = if matches!(e, Error::InvalidArgument { .. }) {
                        exit::INPUT
                    } else {
                        exit::RUNTIME
                    };
                    let mut f = Failure::of(e, code);
                    f.message = format!(
                        "object {} on frame {} ({}): {}",
                        p.object_id,
                        p.frame,
                        frames.describe(k),
                        f.message
                    );
                    f
                })?;
        }

        // Forward from the first prompted frame to the end; backward to the start from the first
        // prompted frame (after a forward pass) or from the last one (backward alone).
        let first = ordered.first().map(|(k, _)| *k).unwrap_or(0);
        let last = ordered.last().map(|(k, _)| *k).unwrap_or(0);
        let mut passes: Vec<(Direction, Vec<u32>)> = Vec::new();
        if t.directions != Directions::Backward {
            passes.push((Direction::Forward, (first..count as u32).collect()));
        }
        match t.directions {
            Directions::Both => passes.push((Direction::Backward, (0..=first).rev().collect())),
            Directions::Backward => passes.push((Direction::Backward, (0..=last).rev().collect())),
            Directions::Forward => {}
        }
        // Each frame's masks are written as it is tracked (track_out), never held to the end; a
        // signal or an error stops the tracking between two frames and keeps what was tracked.
        track_out::catch_stop_signals();
        let mut output = TrackOutput::begin(out, frames.names(), frames.images()?, &ids)?;
        let bar = progress::Bar::new(passes.iter().map(|(_, f)| f.len() as u64).sum(), "frames");
        let mut stopped: Option<(String, Failure)> = None;
        'passes: for (direction, order) in &passes {
            let what = match direction {
                Direction::Forward => "forward",
                Direction::Backward => "backward",
            };
            for &k in order {
                if let Some(signal) = track_out::stop_requested() {
                    let name = signal_name(signal);
                    let why = format!("interrupted by {name} before frame {k}");
                    let failure = Failure::new(
                        128u8.saturating_add(signal as u8),
                        format!("{why}: the frames tracked so far are kept, marked partial"),
                    );
                    stopped = Some((why, failure));
                    break 'passes;
                }
                let tracked = frames.read(k).and_then(|rgb| {
                    tracker.track(k, &view(&rgb)?, *direction).map_err(|e| {
                        let mut f = Failure::of(e, exit::RUNTIME);
                        f.message = format!("frame {k} ({}): {}", frames.describe(k), f.message);
                        f
                    })
                });
                match tracked {
                    Ok(tracked) => output.frame(k, &tracked)?,
                    Err(f) => {
                        stopped = Some((f.message.clone(), f));
                        break 'passes;
                    }
                }
                bar.advance(format!("{what}: frame {k}"));
            }
        }
        drop(bar);

        let written = output.frames_written();
        let head = head(t, &frames, paths, tracker, &ids);
        let json_path = out.join("track.json");
        match stopped {
            None => {
                output.commit(head, None)?;
                if let Some(overlay) = overlay {
                    let _p = progress::step("writing the overlay video");
                    write_overlay_video(overlay, &mut frames, out, &ids)?;
                }
                Ok(format!(
                    "{} object{} on {written} of {} frames → {}, {}",
                    ids.len(),
                    if ids.len() == 1 { "" } else { "s" },
                    count,
                    out.join("masks").display(),
                    json_path.display()
                ))
            }
            Some((why, mut failure)) => {
                if written > 0 {
                    output.commit(head, Some(&why))?;
                    failure.message = format!(
                        "{} ({written} frame{} written to {}, marked partial)",
                        failure.message,
                        if written == 1 { "" } else { "s" },
                        json_path.display()
                    );
                }
                Err(failure)
            }
        }
    }
}

/// Writes a video of the frames with each object's committed masks tinted over them, object by
/// object in a colour of its own, at the stream's frame rate over the selection (25 frames/s for
/// image files). It is written under a temporary name beside `path` and renamed when complete.
fn write_overlay_video(
    path: &Path,
    frames: &mut Frames,
    out: &Path,
    ids: &[u32],
) -> Result<(), Failure> {
    let fps = match frames {
        Frames::Video(v) => v.fps / v.every as f64,
        Frames::Files { .. } => 25.0,
    };
    let names = frames.names();
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let ext = path
        .extension()
        .map(|e| e.to_string_lossy().into_owned())
        .unwrap_or_default();
    let partial = path.with_file_name(format!(".{name}.partial-{}.{ext}", std::process::id()));
    crate::common::create_parent(path)?;
    let write = |frames: &mut Frames| -> Result<(), Failure> {
        let mut writer: Option<video_file::VideoWriter> = None;
        for (k, frame_name) in names.iter().enumerate() {
            let rgb = frames.read(k as u32)?;
            let (w, h) = rgb.dimensions();
            let mut labels = vec![0u32; w as usize * h as usize];
            for (i, id) in ids.iter().enumerate() {
                let file = out
                    .join("masks")
                    .join(format!("obj{id}"))
                    .join(format!("{frame_name}.png"));
                // A frame the run did not track (before the first prompt, going forward only)
                // has no mask.
                let Ok(mask) = image::open(&file) else {
                    continue;
                };
                let mask = mask.into_luma8();
                if mask.dimensions() != (w, h) {
                    continue;
                }
                for (l, &m) in labels.iter_mut().zip(mask.as_raw()) {
                    if m != 0 {
                        *l = i as u32 + 1;
                    }
                }
            }
            let tinted = picture::labels_tinted(&rgb, &labels);
            if writer.is_none() {
                writer = Some(video_file::VideoWriter::create(&partial, w, h, fps)?);
            }
            writer.as_mut().expect("created").frame(&tinted)?;
        }
        writer.expect("at least one frame").finish()
    };
    if let Err(f) = write(frames) {
        let _ = std::fs::remove_file(&partial);
        return Err(f);
    }
    std::fs::rename(&partial, path).map_err(|e| {
        let _ = std::fs::remove_file(&partial);
        Failure::new(
            exit::OUTPUT,
            format!("cannot write {}: {e}", path.display()),
        )
    })
}

/// A signal's name, for messages.
fn signal_name(signal: i32) -> String {
    match signal {
        2 => "SIGINT".into(),
        15 => "SIGTERM".into(),
        s => format!("signal {s}"),
    }
}

/// The fields of `track.json` before its images and annotations.
fn head(
    t: &Track,
    frames: &Frames,
    paths: &VideoModelPaths,
    tracker: &Tracker,
    ids: &[u32],
) -> serde_json::Map<String, serde_json::Value> {
    let device = tracker.device();
    let prompts: Vec<serde_json::Value> = t
        .prompts
        .iter()
        .map(|p| {
            let mut prompt = serde_json::json!({
                "object_id": p.object_id,
                "frame": frames.index_of(p.frame).ok(),
                "points": p.points.iter().map(|q| serde_json::json!([q.x, q.y, if q.positive { 1 } else { 0 }])).collect::<Vec<_>>(),
                "box": p.bbox,
            });
            if let Frames::Video(v) = frames {
                prompt["video_frame"] = p.frame.frame(v.fps).into();
            }
            prompt
        })
        .collect();
    let document = serde_json::json!({
        "info": { "description": "sam2 track", "version": env!("CARGO_PKG_VERSION") },
        "model": {
            "image_encoder": paths.image_encoder.display().to_string(),
            "memory_attention": paths.memory_attention.display().to_string(),
            "image_decoder": paths.image_decoder.display().to_string(),
            "memory_encoder": paths.memory_encoder.display().to_string(),
            "device": device.primary.ort_name(),
            "fell_back": device.fell_back,
            "precision": tracker.variant().precision.name(),
        },
        "frames": frames.count(),
        "direction": match t.directions {
            Directions::Forward => "forward",
            Directions::Backward => "backward",
            Directions::Both => "both",
        },
        "prompts": prompts,
        "categories": [{ "id": 1, "name": "object" }],
        "objects": ids,
    });
    let mut document = document;
    if let Frames::Video(v) = frames {
        document["video"] = serde_json::json!({
            "file": v.path().display().to_string(),
            "frames": v.stream_frames,
            "frame_rate": v.fps,
            "rotation": v.rotation,
            "start_frame": v.frames[0],
            "every": v.every,
        });
    }
    match document {
        serde_json::Value::Object(map) => map,
        _ => unreachable!("a JSON object"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frame_names_are_the_stems_unless_two_are_alike() {
        let files: Vec<PathBuf> = ["a/0001.png", "a/0002.jpg"].map(PathBuf::from).into();
        assert_eq!(frame_names(&files), ["0001", "0002"]);
        let files: Vec<PathBuf> = ["a/0001.png", "b/0001.png"].map(PathBuf::from).into();
        assert_eq!(frame_names(&files), ["00000", "00001"]);
    }
}
