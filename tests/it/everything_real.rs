//! Segment everything on the real architecture: the library's generator on the
//! samexporter export of SAM2.1 hiera-tiny (seeded random weights) against Meta's
//! `SAM2AutomaticMaskGenerator` on the checkpoint the export was made from
//! (tools/references/everything_reference.py, cached by content in `$SAM2_REAL_MODELS`); and the
//! same on EdgeTAM's image pair (sam2-export-edgetam, `$SAM2_EDGETAM_MODELS`) against
//! EdgeTAM's own generator on the weights of that export.
//!
//! Parameters (both sides, read from the reference): `testdata/demo.ppm` (800×600), a 16×16 grid
//! (not SAM2's 32×32, to keep the test short), batches of 64, multimask, no crops, predicted
//! IoU above 0.5 (random weights predict 0.48–0.56), stability filter off (random-weight logits seldom
//! leave [-1, 1], so every stability score is near 0; the scores are compared instead), and two
//! box NMS thresholds: 1.0 (off: the masks cover most of the image, so their boxes coincide and
//! any lower threshold keeps a handful), which keeps a few hundred masks, and SAM2's 0.7.
//! Required for each: ≥ 95% of the reference's masks have a library mask with IoU ≥ 0.9, and the
//! counts agree within 5%. The figures are printed. EdgeTAM's reference has the first run alone
//! (its box NMS keeps a single mask: nothing the first run does not show).

use crate::common;

use std::path::PathBuf;
use std::process::Command;

use common::*;
use sam2::everything::{segment_everything_embedding, EverythingOptions};
use sam2::masks::Rle;
use sam2::{Encoder, ImageView, PixelFormat, Predictor, PredictorOptions};

const MATCH_IOU: f64 = 0.9;
const MATCHED_SHARE: f64 = 0.95;
const COUNT_TOLERANCE: f64 = 0.05;

/// The models a run compares: SAM2.1 tiny's real exports, or EdgeTAM's.
struct Family {
    /// The report's name of the model.
    label: &'static str,
    /// The models' directory and the Python that runs the reference, by variable.
    models_var: &'static str,
    python_var: &'static str,
    /// The set-up script that sets both.
    setup: &'static str,
    /// The reliability report's file for the figures.
    report: &'static str,
}

const SAM2: Family = Family {
    label: "real SAM2.1 tiny, samexporter",
    models_var: "SAM2_REAL_MODELS",
    python_var: "SAM2_REAL_PYTHON",
    setup: "tools/setup/setup-real.sh",
    report: "everything_parity.txt",
};

const EDGETAM: Family = Family {
    label: "EdgeTAM, ONNX Runtime's tools",
    models_var: "SAM2_EDGETAM_MODELS",
    python_var: "SAM2_EDGETAM_PYTHON",
    setup: "tools/setup/setup-edgetam.sh",
    report: "edgetam_everything_parity.txt",
};

/// A mask as a bit set, for the all-pairs matching: hundreds of masks on each side, each pair's IoU
/// a popcount over 60 KB instead of a merge of two run lists (`Rle::iou`, which random weights'
/// ragged masks make long). The same value as `Rle::iou`.
struct Bits {
    words: Vec<u64>,
    area: u64,
}

impl Bits {
    fn of(rle: &Rle) -> Bits {
        let mask = rle.decode().unwrap();
        let words: Vec<u64> = mask
            .chunks(64)
            .map(|c| {
                c.iter()
                    .enumerate()
                    .fold(0u64, |w, (i, &v)| w | (u64::from(v != 0) << i))
            })
            .collect();
        Bits {
            area: words.iter().map(|w| u64::from(w.count_ones())).sum(),
            words,
        }
    }

    fn iou(&self, other: &Bits) -> f64 {
        let both: u64 = self
            .words
            .iter()
            .zip(&other.words)
            .map(|(a, b)| u64::from((a & b).count_ones()))
            .sum();
        let union = self.area + other.area - both;
        if union == 0 {
            0.0
        } else {
            both as f64 / union as f64
        }
    }
}

fn var(name: &str, setup: &str) -> PathBuf {
    std::env::var_os(name)
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            panic!("{name} is not set: run {setup} (the README's test command does)")
        })
}

/// The reference's JSON: computed by the family's Python the first time, then read from the
/// cache (the script prints its path either way).
fn reference(family: &Family) -> serde_json::Value {
    let output = Command::new(var(family.python_var, family.setup))
        .arg(root().join("tools/references/everything_reference.py"))
        .arg("--models")
        .arg(var(family.models_var, family.setup))
        .arg("--image")
        .arg(testdata("demo.ppm"))
        .output()
        .expect("run tools/references/everything_reference.py");
    assert!(
        output.status.success(),
        "tools/references/everything_reference.py failed:\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let stdout = String::from_utf8_lossy(&output.stdout);
    let path = stdout.lines().last().expect("the reference's path").trim();
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

#[test]
fn the_generator_matches_metas_on_the_real_architecture() {
    matches_the_reference(&SAM2);
}

/// EdgeTAM's image pair (issue 31) against EdgeTAM's own generator on the same weights, with the
/// same parameters and requirements.
#[test]
fn the_generator_matches_edgetam_s_on_edgetam() {
    matches_the_reference(&EDGETAM);
}

fn matches_the_reference(family: &Family) {
    let reference = reference(family);
    init_runtime();
    let dir = var(family.models_var, family.setup);
    let encoder = Encoder::new(
        dir.join(reference["encoder"].as_str().unwrap()),
        &Default::default(),
    )
    .unwrap();
    let predictor = Predictor::new(
        dir.join(reference["decoder"].as_str().unwrap()),
        &PredictorOptions {
            encoder_fingerprint: Some(encoder.fingerprint()),
            ..Default::default()
        },
    )
    .unwrap();
    let img = read_pnm(&testdata("demo.ppm"));
    let view = ImageView::packed(&img.data, img.width, img.height, PixelFormat::Rgb).unwrap();
    let embedding = encoder.encode(&view).unwrap();
    let mut report = Vec::new();
    let mut failures = Vec::new();
    let runs = reference["runs"].as_object().unwrap();
    assert!(runs.contains_key("many"), "the reference has no `many` run");
    for (name, run) in runs {
        let params = &run["params"];
        let f = |key: &str| params[key].as_f64().unwrap();
        let options = EverythingOptions {
            points_per_side: f("points_per_side") as u32,
            points_per_batch: f("points_per_batch") as usize,
            pred_iou_thresh: f("pred_iou_thresh") as f32,
            stability_score_thresh: f("stability_score_thresh") as f32,
            stability_score_offset: f("stability_score_offset") as f32,
            mask_threshold: f("mask_threshold") as f32,
            box_nms_thresh: f("box_nms_thresh") as f32,
            crop_n_layers: f("crop_n_layers") as u32,
            multimask: params["multimask_output"].as_bool().unwrap(),
            ..Default::default()
        };
        let started = std::time::Instant::now();
        let ours = segment_everything_embedding(&embedding, &predictor, &options).unwrap();
        let seconds = started.elapsed().as_secs_f64();

        let (w, h) = (img.width, img.height);
        let masks = run["masks"].as_array().unwrap();
        let theirs: Vec<Rle> = masks
            .iter()
            .map(|m| Rle {
                width: w,
                height: h,
                counts: m["counts"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|c| c.as_u64().unwrap() as u32)
                    .collect(),
            })
            .collect();
        let (mut matched, mut score_diff) = (0usize, 0.0f64);
        let our_bits: Vec<Bits> = ours.masks.iter().map(|o| Bits::of(&o.rle)).collect();
        for (t, m) in theirs.iter().zip(masks) {
            let t_bits = Bits::of(t);
            let best = ours
                .masks
                .iter()
                .zip(&our_bits)
                .map(|(o, bits)| (bits.iou(&t_bits), o))
                .max_by(|a, b| a.0.total_cmp(&b.0));
            if let Some((iou, o)) = best {
                if iou >= MATCH_IOU {
                    assert!(
                        (iou - o.rle.iou(t)).abs() < 1e-12,
                        "the bit sets' IoU is Rle's"
                    );
                    matched += 1;
                    let d_iou =
                        (o.predicted_iou as f64 - m["predicted_iou"].as_f64().unwrap()).abs();
                    let d_stability = (o.stability_score as f64
                        - m["stability_score"].as_f64().unwrap_or(0.0))
                    .abs();
                    score_diff = score_diff.max(d_iou).max(d_stability);
                }
            }
        }
        let share = matched as f64 / theirs.len().max(1) as f64;
        let count_diff =
            (ours.masks.len() as f64 - theirs.len() as f64).abs() / theirs.len().max(1) as f64;
        let line = format!(
            "segment everything `{name}` ({}, {w}x{h}, {} clicks, IoU > {}, \
             box NMS {}): reference {} masks ({:.1} s in PyTorch), library {} masks ({seconds:.1} s); \
             {matched} of the reference's ({:.1}%) have a library mask with IoU >= {MATCH_IOU}; \
             counts differ by {:.1}%; scores of matched masks differ by at most {score_diff:.4}",
            family.label,
            options.points_per_side.pow(2),
            options.pred_iou_thresh,
            options.box_nms_thresh,
            theirs.len(),
            run["seconds"].as_f64().unwrap_or(0.0),
            ours.masks.len(),
            share * 100.0,
            count_diff * 100.0
        );
        println!("{line}");
        if share < MATCHED_SHARE || count_diff > COUNT_TOLERANCE {
            failures.push(line.clone());
        }
        report.push(line);
    }
    if let Some(dir) = std::env::var_os("SAM2_REPORT_DIR") {
        let _ = std::fs::write(PathBuf::from(dir).join(family.report), report.join("\n"));
    }
    let kept = reference["runs"]["many"]["masks"].as_array().unwrap().len();
    assert!(
        kept >= 100,
        "the thresholds should keep a few hundred reference masks, kept {kept}"
    );
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}
