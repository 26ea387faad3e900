//! `sam2 track`: a video model (SAM2's four modules, found by name in `--model`) over a sequence
//! of frames, from prompts on any frames, forward and backward; writes one mask PNG per object
//! and frame and one COCO-style JSON (an RLE per object per frame, with its presence score).

use std::path::{Path, PathBuf};

use sam2::video::{Direction, Tracker, TrackerOptions, VideoModelPaths};
use sam2::{ImageView, PixelFormat, Prompt};

use crate::args::{Directions, Track};
use crate::common::{init_runtime, session_options};
use crate::failure::{exit, Failure};
use crate::track_out::{self, TrackOutput};
use crate::{picture, progress};
use sam2::Error;

/// The frames the arguments name: one directory's PNG and JPEG files sorted by name, or the
/// files given, in the order given.
fn frame_files(given: &[PathBuf]) -> Result<Vec<PathBuf>, Failure> {
    let is_frame = |p: &Path| {
        p.extension()
            .and_then(|e| e.to_str())
            .map(|e| matches!(e.to_ascii_lowercase().as_str(), "png" | "jpg" | "jpeg"))
            .unwrap_or(false)
    };
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
                if is_frame(&path) && !path.is_dir() {
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

fn view(picture: &picture::Picture) -> Result<ImageView<'_>, Failure> {
    let (w, h) = picture.rgb.dimensions();
    ImageView::packed(
        picture.rgb.as_raw(),
        w as usize,
        h as usize,
        PixelFormat::Rgb,
    )
    .map_err(|e| Failure::of(e, exit::INPUT))
}

pub fn run(t: Track) -> Result<(), Failure> {
    let files = frame_files(&t.frames)?;
    let count = files.len();
    let mut ids: Vec<u32> = t.prompts.iter().map(|p| p.object_id).collect();
    ids.sort_unstable();
    ids.dedup();
    track_out::check_clashes(&t.out, &files, &ids)?;
    for p in &t.prompts {
        if p.frame as usize >= count {
            return Err(Failure::new(
                exit::INPUT,
                format!(
                    "--frame {} (object {}): there are {count} frames, numbered 0 to {}",
                    p.frame,
                    p.object_id,
                    count - 1
                ),
            ));
        }
    }
    let paths = VideoModelPaths::find(&t.model).map_err(|e| Failure::of(e, exit::MODEL))?;
    init_runtime(t.onnxruntime.as_deref())?;
    let tracker = {
        let _p = progress::step("loading the video model");
        Tracker::new(
            &paths,
            &TrackerOptions {
                session: session_options(t.device),
                num_frames: Some(count as u32),
                ..TrackerOptions::default()
            },
        )
        .map_err(|e| Failure::of(e, exit::MODEL))?
    };

    // Every frame is read when it is needed (a long clip is never held whole), and must have
    // the first frame's size.
    let mut size = None;
    let mut read = |k: u32| -> Result<picture::Picture, Failure> {
        let picture = picture::load(&files[k as usize], t.max_pixels)
            .map_err(|m| Failure::new(exit::INPUT, m))?;
        let dims = picture.rgb.dimensions();
        match size {
            None => size = Some((k, dims)),
            Some((first, d)) if d != dims => {
                return Err(Failure::new(
                    exit::INPUT,
                    format!(
                        "{} is {}×{}, but frame {first} ({}) is {}×{}: every frame of a video has \
                         one size",
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
        Ok(picture)
    };

    // The prompts, frame by frame (each object's prompts on a frame at once).
    let mut ordered = t.prompts.clone();
    ordered.sort_by_key(|p| p.frame);
    for p in &ordered {
        let picture = read(p.frame)?;
        let prompt = Prompt {
            points: p.points.clone(),
            bbox: p.bbox,
            mask_input: None,
        };
        tracker
            .add_prompt(p.frame, &view(&picture)?, p.object_id, &prompt)
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
                    files[p.frame as usize].display(),
                    f.message
                );
                f
            })?;
    }

    // Forward from the first prompted frame to the end; backward to the start from the first
    // prompted frame (after a forward pass) or from the last one (backward alone).
    let first = ordered.first().map(|p| p.frame).unwrap_or(0);
    let last = ordered.last().map(|p| p.frame).unwrap_or(0);
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
    let mut output = TrackOutput::begin(&t.out, &files, frame_names(&files), &ids)?;
    let bar = progress::Bar::new(passes.iter().map(|(_, f)| f.len() as u64).sum(), "frames");
    let mut stopped: Option<(String, Failure)> = None;
    'passes: for (direction, frames) in &passes {
        let what = match direction {
            Direction::Forward => "forward",
            Direction::Backward => "backward",
        };
        for &k in frames {
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
            let tracked = read(k).and_then(|picture| {
                tracker.track(k, &view(&picture)?, *direction).map_err(|e| {
                    let mut f = Failure::of(e, exit::RUNTIME);
                    f.message =
                        format!("frame {k} ({}): {}", files[k as usize].display(), f.message);
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
    let head = head(&t, &files, &paths, &tracker, &ids);
    let json_path = t.out.join("track.json");
    match stopped {
        None => {
            output.commit(head, None)?;
            eprintln!(
                "sam2: {} object{} on {written} of {} frames → {}, {}",
                ids.len(),
                if ids.len() == 1 { "" } else { "s" },
                files.len(),
                t.out.join("masks").display(),
                json_path.display()
            );
            Ok(())
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
    files: &[PathBuf],
    paths: &VideoModelPaths,
    tracker: &Tracker,
    ids: &[u32],
) -> serde_json::Map<String, serde_json::Value> {
    let device = tracker.device();
    let prompts: Vec<serde_json::Value> = t
        .prompts
        .iter()
        .map(|p| {
            serde_json::json!({
                "object_id": p.object_id,
                "frame": p.frame,
                "points": p.points.iter().map(|q| serde_json::json!([q.x, q.y, if q.positive { 1 } else { 0 }])).collect::<Vec<_>>(),
                "box": p.bbox,
            })
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
        "frames": files.len(),
        "direction": match t.directions {
            Directions::Forward => "forward",
            Directions::Backward => "backward",
            Directions::Both => "both",
        },
        "prompts": prompts,
        "categories": [{ "id": 1, "name": "object" }],
        "objects": ids,
    });
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
