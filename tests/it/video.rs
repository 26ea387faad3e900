//! Video tracking on the generated four-module tracker (models/track/,
//! tools/models/gen_track_models.py): a red disc moves across the clip of
//! tools/models/track_clip.py, passes behind a bar (hidden on frames 11–14) and comes out; a blue
//! square moves the other way. The tracker is prompted with one click per object on frame 0 and
//! must follow both: IoU with the ground truth ≥ 0.9 on every frame an object is visible on, and
//! "absent" (with an empty mask) on every frame it is hidden.

use crate::common;

use common::track_clip::{distractor_centre, frame, target_centre, FRAMES, HEIGHT, WIDTH};
use common::*;
use sam2::models::Precision;
use sam2::video::{Direction, Tracker, TrackerOptions, VideoModelPaths};
use sam2::{ImageView, PixelFormat, Point, Prompt};

fn click_at((x, y): (i64, i64)) -> Prompt {
    click(x, y)
}

fn click(x: i64, y: i64) -> Prompt {
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

fn tracker(options: &TrackerOptions) -> Tracker {
    init_runtime();
    Tracker::new(&VideoModelPaths::in_dir(model("track"), ""), options).unwrap()
}

#[test]
fn both_objects_are_followed_and_the_disc_is_absent_behind_the_bar() {
    follow_both(&VideoModelPaths::in_dir(model("track"), ""));
}

/// The int8 and fp16 variants of the generated tracker (sam2-variant on
/// models/track: its image encoder converted, the three other modules copied; made by
/// tools/setup/setup.sh) say so, module by module, and follow both objects through the clip as the
/// original does.
#[test]
fn each_variant_follows_both_objects_as_the_original_does() {
    init_runtime();
    let original = Tracker::new(
        &VideoModelPaths::in_dir(model("track"), ""),
        &TrackerOptions::default(),
    )
    .unwrap();
    assert_eq!(original.variant().precision, Precision::Fp32);
    for (name, precision, tool) in [
        ("int8", Precision::Int8, "quantize_dynamic"),
        ("fp16", Precision::Fp16, "convert_float_to_float16"),
    ] {
        let paths = VideoModelPaths::find(model(&format!("variants/track_{name}"))).unwrap();
        let tracker = Tracker::new(&paths, &TrackerOptions::default()).unwrap();
        assert_eq!(tracker.variant().precision, precision);
        let made_by = tracker.variant().tool.clone().unwrap_or_default();
        assert!(made_by.contains(tool), "{made_by}");
        let roles: Vec<(&str, Precision)> = tracker
            .variants()
            .into_iter()
            .map(|(role, v)| (role, v.precision))
            .collect();
        assert_eq!(
            roles,
            [
                ("image encoder", precision),
                ("memory attention", Precision::Fp32),
                ("image decoder", Precision::Fp32),
                ("memory encoder", Precision::Fp32),
            ]
        );
        println!("{name} variant:");
        follow_both(&paths);
    }
}

/// Prompts the disc and the square on frame 0 and tracks the clip with the modules at `paths`:
/// each followed at IoU ≥ 0.9 with the truth, the disc absent (with no mask) behind the bar.
fn follow_both(paths: &VideoModelPaths) {
    let options = TrackerOptions {
        num_frames: Some(FRAMES),
        ..Default::default()
    };
    init_runtime();
    let tracker = Tracker::new(paths, &options).unwrap();
    let (rgb, disc, square) = frame(0);
    let image = ImageView::packed(&rgb, WIDTH, HEIGHT, PixelFormat::Rgb).unwrap();
    let (cx, cy) = target_centre(0);
    let first = tracker.add_prompt(0, &image, 1, &click(cx, cy)).unwrap();
    assert!(first.present);
    assert!(
        iou(&first.mask, &disc) >= 0.9,
        "prompted disc IoU {}",
        iou(&first.mask, &disc)
    );
    let second = tracker
        .add_prompt(0, &image, 2, &click_at(distractor_centre(0)))
        .unwrap();
    assert!(iou(&second.mask, &square) >= 0.9);
    assert_eq!(tracker.objects(), vec![1, 2]);

    println!("frame  disc IoU  score   square IoU  score");
    for t in 0..FRAMES {
        let (rgb, disc, square) = frame(t);
        let image = ImageView::packed(&rgb, WIDTH, HEIGHT, PixelFormat::Rgb).unwrap();
        let result = tracker.track(t, &image, Direction::Forward).unwrap();
        assert_eq!((result.width, result.height), (WIDTH, HEIGHT));
        let [d, s] = &result.objects[..] else {
            panic!("two objects expected, got {}", result.objects.len())
        };
        assert_eq!((d.object_id, s.object_id), (1, 2));
        let visible = disc.iter().any(|&v| v != 0);
        let (di, si) = (iou(&d.mask, &disc), iou(&s.mask, &square));
        println!(
            "{t:>5} {:>9} {:>6.2} {si:>12.3} {:>6.2}",
            if visible {
                format!("{di:.3}")
            } else {
                "hidden".into()
            },
            d.score,
            s.score
        );
        if visible {
            assert!(
                d.present,
                "frame {t}: the disc is visible but reported absent"
            );
            assert!(di >= 0.9, "frame {t}: disc IoU {di:.3}");
        } else {
            assert!(
                !d.present,
                "frame {t}: the disc is hidden but reported present"
            );
            assert!(
                d.mask.iter().all(|&v| v == 0),
                "frame {t}: an absent object has a mask"
            );
        }
        assert!(s.present && si >= 0.9, "frame {t}: square IoU {si:.3}");
    }
    // The bank keeps the prompted frame and at most `memory_frames` tracked frames per object.
    assert!(tracker.memory_frames() <= 2 * (1 + options.memory_frames));
}

#[test]
fn a_removed_object_is_no_longer_tracked_and_reset_forgets_everything() {
    let tracker = tracker(&TrackerOptions::default());
    let (rgb, _, square) = frame(0);
    let image = ImageView::packed(&rgb, WIDTH, HEIGHT, PixelFormat::Rgb).unwrap();
    let (cx, cy) = target_centre(0);
    tracker.add_prompt(0, &image, 7, &click(cx, cy)).unwrap();
    tracker
        .add_prompt(0, &image, 9, &click_at(distractor_centre(0)))
        .unwrap();
    assert!(tracker.remove_object(7));
    assert!(!tracker.remove_object(7));
    let (rgb1, _, square1) = frame(1);
    let image1 = ImageView::packed(&rgb1, WIDTH, HEIGHT, PixelFormat::Rgb).unwrap();
    let result = tracker.track(1, &image1, Direction::Forward).unwrap();
    assert_eq!(result.objects.len(), 1);
    assert_eq!(result.objects[0].object_id, 9);
    assert!(iou(&result.objects[0].mask, &square1) >= 0.9);
    let _ = square;
    tracker.reset();
    assert!(tracker.objects().is_empty());
    let err = tracker.track(2, &image1, Direction::Forward).unwrap_err();
    assert!(err.to_string().contains("no object"), "{err}");
}

#[test]
fn tracking_backwards_from_a_prompt_on_the_last_frame_follows_the_disc_to_the_start() {
    let tracker = tracker(&TrackerOptions {
        num_frames: Some(FRAMES),
        ..Default::default()
    });
    let last = FRAMES - 1;
    let (rgb, disc, _) = frame(last);
    let image = ImageView::packed(&rgb, WIDTH, HEIGHT, PixelFormat::Rgb).unwrap();
    let (cx, cy) = target_centre(last as i64);
    let prompted = tracker.add_prompt(last, &image, 1, &click(cx, cy)).unwrap();
    assert!(iou(&prompted.mask, &disc) >= 0.9);
    for t in (0..FRAMES).rev() {
        let (rgb, disc, _) = frame(t);
        let image = ImageView::packed(&rgb, WIDTH, HEIGHT, PixelFormat::Rgb).unwrap();
        let o = &tracker
            .track(t, &image, Direction::Backward)
            .unwrap()
            .objects[0];
        if disc.iter().any(|&v| v != 0) {
            assert!(
                o.present && iou(&o.mask, &disc) >= 0.9,
                "frame {t}: IoU {:.3}",
                iou(&o.mask, &disc)
            );
        } else {
            assert!(!o.present, "frame {t}: hidden but present");
        }
    }
}

#[test]
fn bad_prompts_and_frames_are_refused_and_change_nothing() {
    let tracker = tracker(&TrackerOptions {
        num_frames: Some(FRAMES),
        ..Default::default()
    });
    let (rgb, _, _) = frame(0);
    let image = ImageView::packed(&rgb, WIDTH, HEIGHT, PixelFormat::Rgb).unwrap();
    let err = tracker
        .add_prompt(0, &image, 1, &click(400, 10))
        .unwrap_err();
    assert!(err.to_string().contains("outside"), "{err}");
    let nan = Prompt {
        points: vec![Point {
            x: f32::NAN,
            y: 3.0,
            positive: true,
        }],
        bbox: None,
        mask_input: None,
    };
    assert!(tracker.add_prompt(0, &image, 1, &nan).is_err());
    let err = tracker
        .add_prompt(FRAMES, &image, 1, &click(10, 10))
        .unwrap_err();
    assert!(err.to_string().contains("outside the clip"), "{err}");
    assert!(
        tracker.objects().is_empty(),
        "a refused prompt created an object"
    );
    let err = tracker.track(0, &image, Direction::Forward).unwrap_err();
    assert!(err.to_string().contains("no object"), "{err}");
    assert!(Tracker::new(
        &VideoModelPaths::in_dir(model("track"), ""),
        &TrackerOptions {
            memory_frames: 3,
            ..Default::default()
        }
    )
    .is_err());
}

#[test]
fn an_image_pair_is_refused_as_a_video_model_naming_what_it_lacks() {
    init_runtime();
    let paths = VideoModelPaths {
        image_encoder: model("tiny_a_encoder.onnx"),
        ..VideoModelPaths::in_dir(model("track"), "")
    };
    let err = Tracker::new(&paths, &TrackerOptions::default()).unwrap_err();
    let text = err.to_string();
    assert!(
        text.contains("vision_feats") && text.contains("image encoder"),
        "{text}"
    );
}

fn view(rgb: &[u8]) -> ImageView<'_> {
    ImageView::packed(rgb, WIDTH, HEIGHT, PixelFormat::Rgb).unwrap()
}

/// The faulty and foreign module variants of tools/models/track_module_variants.py, written once
/// per test run under the target directory.
fn variant(name: &str) -> std::path::PathBuf {
    static WRITTEN: std::sync::OnceLock<std::path::PathBuf> = std::sync::OnceLock::new();
    let dir = WRITTEN.get_or_init(|| {
        let dir = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join("track_variants");
        let python = std::env::var_os("SAM2_PYTHON")
            .map(std::path::PathBuf::from)
            .unwrap_or_else(|| root().join(".venv/bin/python"));
        let status = std::process::Command::new(&python)
            .arg(root().join("tools/models/track_module_variants.py"))
            .arg("--track")
            .arg(model("track"))
            .arg("--out")
            .arg(&dir)
            .status()
            .unwrap_or_else(|e| panic!("{}: {e} (run tools/setup/setup.sh)", python.display()));
        assert!(
            status.success(),
            "tools/models/track_module_variants.py failed"
        );
        dir
    });
    dir.join(name)
}

/// Issue 28: the tracker reused the last encode whenever the frame index and size matched, so a
/// second picture under an index got the first one's result.
#[test]
fn a_different_picture_under_the_same_frame_index_is_encoded_afresh() {
    let (rgb0, _, _) = frame(0);
    let (cx, cy) = target_centre(0);
    let start = || {
        let t = tracker(&TrackerOptions::default());
        t.add_prompt(0, &view(&rgb0), 1, &click(cx, cy)).unwrap();
        t
    };
    // A: the clip's frame 1; B: the picture of frame 12, where the disc is behind the bar.
    let (a, _, _) = frame(1);
    let (b, _, _) = frame(12);
    let alone = start().track(1, &view(&b), Direction::Forward).unwrap();
    assert!(!alone.objects[0].present, "B alone should show no disc");
    let both = start();
    let first = both.track(1, &view(&a), Direction::Forward).unwrap();
    assert!(first.objects[0].present, "A shows the disc");
    let again = both.track(1, &view(&b), Direction::Forward).unwrap();
    let (got, want) = (&again.objects[0], &alone.objects[0]);
    assert_eq!(
        (got.present, got.score),
        (want.present, want.score),
        "frame 1 tracked with A then with B must give B's own result"
    );
    assert!(got.mask == want.mask && got.low_res == want.low_res);

    // A prompt for another object on frame 0 with another picture (frame 5's) is decoded on
    // that picture, as it is on a tracker that never saw picture 0.
    let (rgb5, disc5, _) = frame(5);
    let (x5, y5) = target_centre(5);
    let fresh = tracker(&TrackerOptions::default())
        .add_prompt(0, &view(&rgb5), 2, &click(x5, y5))
        .unwrap();
    assert!(iou(&fresh.mask, &disc5) >= 0.9);
    let second = start()
        .add_prompt(0, &view(&rgb5), 2, &click(x5, y5))
        .unwrap();
    assert_eq!(second.score, fresh.score);
    assert!(
        second.mask == fresh.mask,
        "object 2 was decoded on picture 0"
    );
}

/// Issue 28: a prompted frame kept its whole encoder output (~28 MiB) until the next track, and
/// the memory count said 0. Prompts on 20 frames must hold about 1 MiB each, be counted, and
/// tracking after them must work.
#[test]
fn prompts_on_many_frames_hold_about_a_megabyte_each_and_are_counted() {
    let tracker = tracker(&TrackerOptions::default());
    let prompted = 20u32;
    let mut after_first = 0;
    for t in 0..prompted {
        let (rgb, _, square) = frame(t);
        let r = tracker
            .add_prompt(t, &view(&rgb), 1, &click_at(distractor_centre(t as i64)))
            .unwrap();
        assert!(iou(&r.mask, &square) >= 0.9, "frame {t}");
        if t == 0 {
            after_first = tracker.memory_bytes();
        }
    }
    let held = tracker.memory_bytes();
    let per_frame = (held - after_first) as f64 / f64::from(prompted - 1) / 1048576.0;
    println!(
        "{prompted} prompted frames: {:.1} MiB held, {per_frame:.2} MiB a frame",
        held as f64 / 1048576.0
    );
    assert!(
        per_frame <= 1.5,
        "a prompted frame holds {per_frame:.2} MiB (about 1 MiB documented)"
    );
    assert_eq!(tracker.memory_frames(), prompted as usize);
    for t in prompted..FRAMES {
        let (rgb, _, square) = frame(t);
        let r = tracker.track(t, &view(&rgb), Direction::Forward).unwrap();
        assert!(iou(&r.objects[0].mask, &square) >= 0.9, "frame {t}");
    }
    assert_eq!(tracker.memory_frames(), FRAMES as usize);
}

/// Issue 28: prompts were taken out of the tracker before their memory was encoded, so a failure
/// there lost them and the next track said "prompt it first". A memory encoder that fails (its
/// temporal code has rows of 63 values) must fail the call that encodes the prompt's memory,
/// naming the module and the output, and leave nothing half-made.
#[test]
fn a_memory_encoder_that_fails_is_reported_at_the_prompt_and_loses_nothing() {
    init_runtime();
    let paths = VideoModelPaths {
        memory_encoder: variant("memory_encoder_bad_code.onnx"),
        ..VideoModelPaths::in_dir(model("track"), "")
    };
    let tracker = Tracker::new(&paths, &TrackerOptions::default()).unwrap();
    let (rgb, _, _) = frame(0);
    let (cx, cy) = target_centre(0);
    let err = tracker
        .add_prompt(0, &view(&rgb), 1, &click(cx, cy))
        .unwrap_err();
    let text = err.to_string();
    println!("{text}");
    assert!(matches!(err, sam2::Error::Model { .. }), "{err:?}");
    assert!(
        text.contains("temporal_code") && text.contains("memory_encoder_bad_code.onnx"),
        "{text}"
    );
    assert!(
        tracker.objects().is_empty(),
        "a failed prompt left an object"
    );
    assert_eq!(tracker.memory_frames(), 0);
}

/// Issue 28: a decoder whose `object_score_logits` is empty made `add_prompt` panic.
#[test]
fn a_decoder_with_an_empty_object_score_is_a_model_error_naming_the_output() {
    init_runtime();
    let paths = VideoModelPaths {
        image_decoder: variant("image_decoder_empty_score.onnx"),
        ..VideoModelPaths::in_dir(model("track"), "")
    };
    let tracker = Tracker::new(&paths, &TrackerOptions::default()).unwrap();
    let (rgb, _, _) = frame(0);
    let (cx, cy) = target_centre(0);
    let err = tracker
        .add_prompt(0, &view(&rgb), 1, &click(cx, cy))
        .unwrap_err();
    let text = err.to_string();
    println!("{text}");
    assert!(matches!(err, sam2::Error::Model { .. }), "{err:?}");
    assert!(
        text.contains("object_score_logits") && text.contains("image_decoder_empty_score.onnx"),
        "{text}"
    );
    assert!(tracker.objects().is_empty());
}

/// Issue 28: modules of different exports were accepted (the real memory attention with the
/// generated modules: every object absent, no error).
#[test]
fn modules_of_different_exports_are_refused_naming_both_and_what_differs() {
    init_runtime();
    let track = VideoModelPaths::in_dir(model("track"), "");
    let paths = VideoModelPaths {
        memory_encoder: variant("memory_encoder_mem32.onnx"),
        ..track.clone()
    };
    let err = Tracker::new(&paths, &TrackerOptions::default()).unwrap_err();
    let text = err.to_string();
    println!("{text}");
    assert!(matches!(err, sam2::Error::ModelMismatch(_)), "{err:?}");
    for needle in [
        "memory_encoder_mem32.onnx",
        "memory_attention.onnx",
        "maskmem_features",
        "memory_1",
        "[1, 32, 64, 64]",
    ] {
        assert!(text.contains(needle), "{needle:?} missing from: {text}");
    }
    let paths = VideoModelPaths {
        memory_attention: variant("memory_attention_unmarked.onnx"),
        ..track
    };
    let err = Tracker::new(&paths, &TrackerOptions::default()).unwrap_err();
    let text = err.to_string();
    println!("{text}");
    assert!(matches!(err, sam2::Error::ModelMismatch(_)), "{err:?}");
    assert!(
        text.contains("memory_attention_unmarked.onnx") && text.contains("sam2.synthetic"),
        "{text}"
    );
}

#[test]
fn a_tracker_follows_at_most_its_documented_number_of_objects() {
    use sam2::limits::MAX_TRACKED_OBJECTS;
    let tracker = tracker(&TrackerOptions::default());
    let (rgb, _, _) = frame(0);
    let image = ImageView::packed(&rgb, WIDTH, HEIGHT, PixelFormat::Rgb).unwrap();
    let (cx, cy) = target_centre(0);
    for id in 0..MAX_TRACKED_OBJECTS as u32 {
        tracker.add_prompt(0, &image, id, &click(cx, cy)).unwrap();
    }
    // One more is refused, naming the argument and the limit, and changes nothing; a known
    // object may still be prompted again, and a removed one makes room.
    let id = MAX_TRACKED_OBJECTS as u32;
    match tracker.add_prompt(0, &image, id, &click(cx, cy)) {
        Err(sam2::Error::InvalidArgument { name, reason }) => {
            assert_eq!(name, "object_id");
            assert!(
                reason.contains(&format!("at most {MAX_TRACKED_OBJECTS}")),
                "{reason}"
            );
        }
        other => panic!("object {} was taken: {other:?}", id + 1),
    }
    assert_eq!(tracker.objects().len(), MAX_TRACKED_OBJECTS);
    tracker.add_prompt(0, &image, 3, &click(cx, cy)).unwrap();
    assert!(tracker.remove_object(3));
    tracker.add_prompt(0, &image, id, &click(cx, cy)).unwrap();
    assert_eq!(tracker.objects().len(), MAX_TRACKED_OBJECTS);
}
