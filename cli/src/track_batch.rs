//! `sam2 track` over a list file of clips (video files or folders of frames): each clip's result
//! in `-o DIR/<name>/`, the same prompts on every clip, the video model loaded once.

use std::path::{Component, Path};

use sam2::video::{Tracker, TrackerOptions, VideoModelPaths};

use crate::args::Track;
use crate::batch::{self, Source};
use crate::common::{init_runtime, session_options};
use crate::failure::{exit, Failure};
use crate::track::Clip;
use crate::{progress, track_out, video_file};

pub(crate) fn run(t: &Track, list: &Path) -> Result<(), Failure> {
    // Each clip's overlay goes into its own folder, under the name given.
    if let Some(overlay) = &t.overlay {
        let mut parts = overlay.components();
        if !matches!(
            (parts.next(), parts.next()),
            (Some(Component::Normal(_)), None)
        ) {
            return Err(Failure::new(
                exit::USAGE,
                format!(
                    "--overlay {} with a list of clips: give a file name (overlay.mp4), written \
                     into each clip's folder",
                    overlay.display()
                ),
            ));
        }
    }
    let plan = batch::plan(&Source::List(list.to_path_buf()), &t.out, t.shard)?;
    let paths = VideoModelPaths::find(&t.model).map_err(|e| Failure::of(e, exit::MODEL))?;
    let folder = |input: &batch::Input| t.out.join(&input.name);
    let overlay = |input: &batch::Input| t.overlay.as_ref().map(|o| folder(input).join(o));
    batch::run(
        plan,
        "clips",
        |input| complete(&folder(input), overlay(input).as_deref()),
        || {
            init_runtime(t.onnxruntime.as_deref())?;
            let _p = progress::step("loading the video model");
            // Each clip sets its own frame count when it starts.
            Tracker::new(
                &paths,
                &TrackerOptions {
                    session: session_options(t.device),
                    ..TrackerOptions::default()
                },
            )
            .map_err(|e| Failure::of(e, exit::MODEL))
        },
        |tracker, input| {
            if t.selection != video_file::Selection::default() && !video_file::is_video(&input.path)
            {
                return Err(Failure::new(
                    exit::INPUT,
                    "--start, --end and --every choose frames of a video file, and this entry is \
                     not one",
                ));
            }
            let out = folder(input);
            let clip = Clip::prepare(t, std::slice::from_ref(&input.path), &out)?;
            tracker
                .start_clip(Some(clip.count() as u32))
                .map_err(|e| Failure::of(e, exit::INPUT))?;
            clip.track(t, &paths, tracker, &out, overlay(input).as_deref())
                .map(drop)
        },
        || track_out::stop_requested().map(|signal| 128u8.saturating_add(signal as u8)),
    )
}

/// A clip is done when its `track.json` says `"complete": true` (a run stopped early writes a
/// partial one, which is tracked again) and its overlay video, when one is asked for, is there:
/// both are renamed into place whole, the overlay last.
fn complete(folder: &Path, overlay: Option<&Path>) -> bool {
    let Ok(file) = std::fs::File::open(folder.join("track.json")) else {
        return false;
    };
    let whole = serde_json::from_reader::<_, serde_json::Value>(std::io::BufReader::new(file))
        .is_ok_and(|doc| doc["complete"] == serde_json::Value::Bool(true));
    whole && overlay.is_none_or(batch::exists)
}
