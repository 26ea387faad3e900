//! Video soak: two objects tracked through a long clip on the generated four-module tracker
//! (models/track/), while resident memory and glibc's heap in use are sampled. A tracker keeps
//! the memories of at most `memory_frames` tracked frames per object (and the pointers of the
//! frames within reach), so once that many frames are tracked its memory must stay flat: the
//! heap in use and resident memory at the end within 1.05× of their values after warm-up, and
//! the memory frames it reports exactly each object's conditioning frame plus `memory_frames`.
//!
//! The clip is the disc clip of tools/models/track_clip.py (tests/it/video.rs) played back and forth,
//! so the motion never jumps: the disc crosses behind the bar and comes out again and again, the
//! square moves left and right; the frame index keeps increasing (a stream: no `num_frames`).
//! Warm-up is the first fifth of the run, at least 100 frames: the memory bank is full from frame
//! 17 on, but ONNX Runtime's shared arena, which the tracker's sessions allocate from, takes its
//! last region later (measured: 7 extensions to 192 MiB, the last between frames 80 and 100;
//! flat from there to frame 1000; docs/reliability.md).
//!
//! `SAM2_VIDEO_SOAK_FRAMES` sets the length (default 160: `cargo test` runs that;
//! scripts/reliability.sh runs 1000). With `SAM2_REPORT_DIR` set the figures go to
//! video_soak.tsv, which the reliability report reads.

mod common;

use common::memory::{arena, heap, rss};
use common::*;
use sam2::video::{Direction, Tracker, TrackerOptions, VideoModelPaths};
use sam2::{ImageView, PixelFormat, Point, Predictor, Prompt};

use common::track_clip::{HEIGHT, WIDTH};
/// Goals: the most each measure may grow after warm-up.
const HEAP_GOAL: f64 = 1.05;
const RSS_GOAL: f64 = 1.05;

/// Frame `t` of the clip played back and forth.
fn frame(t: u32) -> Vec<u8> {
    track_clip::frame(track_clip::back_and_forth(t)).0
}

/// A click at an object's centre.
fn click((x, y): (i64, i64)) -> Prompt {
    Prompt {
        points: vec![Point {
            x: x as f32,
            y: y as f32,
            positive: true,
        }],
        bbox: None,
        mask_input: None,
    }
}

#[test]
fn memory_stays_flat_while_two_objects_are_tracked_through_a_long_clip() {
    let frames: u32 = std::env::var("SAM2_VIDEO_SOAK_FRAMES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(160)
        .max(120);
    init_runtime();
    let options = TrackerOptions::default();
    let tracker = Tracker::new(&VideoModelPaths::in_dir(model("track"), ""), &options).unwrap();
    let reader = Predictor::new(model("tiny_a_decoder.onnx"), &Default::default()).unwrap();
    let rgb = frame(0);
    let image = ImageView::packed(&rgb, WIDTH, HEIGHT, PixelFormat::Rgb).unwrap();
    assert!(
        tracker
            .add_prompt(0, &image, 1, &click(track_clip::target_centre(0)))
            .unwrap()
            .present
    );
    assert!(
        tracker
            .add_prompt(0, &image, 2, &click(track_clip::distractor_centre(0)))
            .unwrap()
            .present
    );

    let warm_up = (frames / 5).max(100);
    let expected_memory = 2 * (1 + options.memory_frames);
    let (mut warm_rss, mut warm_heap, mut warm_arena) = (0, 0, (0, 0));
    let mut samples = Vec::new();
    let mut failed: Vec<String> = Vec::new();
    let mut present = [0u32; 2];
    let mut held_wrong: Vec<(u32, usize)> = Vec::new();
    let start = std::time::Instant::now();
    for t in 1..frames {
        let rgb = frame(t);
        let image = ImageView::packed(&rgb, WIDTH, HEIGHT, PixelFormat::Rgb).unwrap();
        match tracker.track(t, &image, Direction::Forward) {
            Ok(result) => {
                for (n, o) in present.iter_mut().zip(&result.objects) {
                    *n += u32::from(o.present);
                }
            }
            Err(e) => failed.push(format!("frame {t}: {e}")),
        }
        let held = tracker.memory_frames();
        if t > options.memory_frames as u32 && held != expected_memory {
            held_wrong.push((t, held));
        }
        if t == warm_up {
            (warm_rss, warm_heap, warm_arena) = (rss(), heap().0, arena(&reader));
        }
        if t % (frames / 10).max(1) == 0 {
            samples.push((t, rss(), heap().0, arena(&reader), held));
        }
    }
    let (end_rss, end_heap, end_arena) = (rss(), heap().0, arena(&reader));
    let mib = |b: u64| b as f64 / (1 << 20) as f64;
    let elapsed = start.elapsed().as_secs_f64();
    println!(
        "video soak: 2 objects, {frames} frames ({WIDTH}×{HEIGHT}), {elapsed:.0} s \
         ({:.1} ms a frame), {} failed calls; present on {} and {} frames",
        elapsed * 1000.0 / (frames - 1) as f64,
        failed.len(),
        present[0],
        present[1]
    );
    println!(
        "  after frame   RSS MiB   heap in use MiB   arena MiB (extensions)   memory frames held"
    );
    for (t, r, h, (a, ext), held) in &samples {
        println!(
            "  {t:>11} {:>9.1} {:>17.1} {:>14.1} ({ext:>3}) {held:>20}",
            mib(*r),
            mib(*h),
            mib(*a)
        );
    }
    let growth = end_rss as f64 / warm_rss as f64;
    let heap_growth = end_heap as f64 / warm_heap as f64;
    println!(
        "  after warm-up (frame {warm_up}) → at the end: heap in use {:.1} → {:.1} MiB \
         ({heap_growth:.3}×), RSS {:.1} → {:.1} MiB ({growth:.3}×), ONNX Runtime's arena \
         {:.1} → {:.1} MiB ({} → {} extensions)",
        mib(warm_heap),
        mib(end_heap),
        mib(warm_rss),
        mib(end_rss),
        mib(warm_arena.0),
        mib(end_arena.0),
        warm_arena.1,
        end_arena.1
    );
    if let Some(dir) = std::env::var_os("SAM2_REPORT_DIR") {
        std::fs::write(
            std::path::PathBuf::from(dir).join("video_soak.tsv"),
            format!(
                "frames\tobjects\twarm_up\trss_warm\trss_end\tgrowth\trss_goal\theap_warm\theap_end\t\
                 heap_goal\tarena_warm\tarena_end\tmemory_frames\tmemory_frames_expected\tfailed\n\
                 {frames}\t2\t{warm_up}\t{warm_rss}\t{end_rss}\t{growth:.4}\t{RSS_GOAL}\t{warm_heap}\t\
                 {end_heap}\t{HEAP_GOAL}\t{}\t{}\t{}\t{expected_memory}\t{}\n",
                warm_arena.0,
                end_arena.0,
                tracker.memory_frames(),
                failed.len()
            ),
        )
        .unwrap();
    }
    assert!(
        failed.is_empty(),
        "{} calls failed, the first: {}",
        failed.len(),
        failed[0]
    );
    assert!(
        held_wrong.is_empty(),
        "the tracker held other than {expected_memory} memory frames on {} frames, the first: \
         {:?}",
        held_wrong.len(),
        held_wrong[0]
    );
    assert!(
        heap_growth <= HEAP_GOAL,
        "the heap in use grew {heap_growth:.3}× after warm-up ({:.1} → {:.1} MiB): a leak",
        mib(warm_heap),
        mib(end_heap)
    );
    assert!(
        growth <= RSS_GOAL,
        "resident memory grew {growth:.3}× after warm-up ({:.1} → {:.1} MiB)",
        mib(warm_rss),
        mib(end_rss)
    );
}
