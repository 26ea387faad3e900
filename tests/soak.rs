//! Soak: encode and predict in a loop, as a desktop tool does all day, while resident memory and
//! ONNX Runtime's shared CPU arena are sampled. After warm-up, memory must stay flat: what the C
//! heap has handed out and not had back (glibc's count, which a leak raises call after call)
//! within 1.05× of its value after warm-up, ONNX Runtime's arena within 1.1×, and resident memory
//! within 1.25×. Resident memory also counts the free memory glibc keeps in its per-thread heaps,
//! which depends on which thread freed what first: over runs of this soak it ended between 0.95×
//! and 1.12× of its warm-up value while the heap in use stayed within 1.5%, so it gets the looser
//! bound, there to catch run-away fragmentation, and the heap in use the tight one.
//!
//! Every image has a new size (as in a real session: photos, scans, screenshots) and every
//! prompt a different shape (points, objects, boxes, multimask), so ONNX Runtime sees new input
//! and output shapes all the time — what makes per-shape caches and arena fragmentation grow.
//!
//! Warm-up is each model pair once at the largest image size and batch the loop uses, then the
//! first fifth of the loop: ONNX Runtime's arena reserves its regions from the system as it
//! meets bigger requests, and their pages become resident when first touched, so the
//! comparison starts once the biggest request has been met. The arena's own size is checked
//! too, from ONNX Runtime's statistics.
//!
//! `SAM2_SOAK_ENCODES` (default 200) and `SAM2_SOAK_PREDICTS` (default 2000) set the length;
//! `SAM2_SOAK_PAIRS` the model pairs (default `tiny_a,tiny_b,tiny_c`; `bench_a` for the
//! SAM2-sized model; `real_samexporter` and `real_onnxruntime` for the real SAM2.1 tiny exports
//! of `$SAM2_REAL_MODELS`, tools/setup/setup-real.sh). With `SAM2_REPORT_DIR` set the figures go to
//! soak.tsv, or the file `SAM2_SOAK_REPORT` names. scripts/test.sh and scripts/reliability.sh
//! run it on the real pair too; `scripts/reliability.sh --long` on the bench model as well.

mod common;

use std::path::PathBuf;
use std::sync::Arc;

use common::memory::{arena, heap, rss};
use common::*;
use sam2::{
    Embedding, Encoder, ImageView, PixelFormat, Point, PredictOptions, Predictor, PredictorOptions,
    Prompt,
};

fn env_or(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// Images are up to this size, predicts up to this many objects.
const MAX_WIDTH: usize = 1464;
const MAX_HEIGHT: usize = 1064;
const MAX_OBJECTS: usize = 3;
/// Most points of a random prompt (besides its box).
const MAX_POINTS: usize = 6;

/// Goals: the most each measure may grow after warm-up (see the module comment).
const HEAP_GOAL: f64 = 1.05;
const ARENA_GOAL: f64 = 1.1;
const RSS_GOAL: f64 = 1.25;

/// Deterministic pseudo-random numbers (xorshift64*).
struct Rng(u64);

impl Rng {
    fn below(&mut self, n: u64) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d) % n
    }
    fn coord(&mut self, side: u32) -> f32 {
        self.below(side as u64 * 16) as f32 / 16.0
    }
}

/// An image of a new size, resampled (nearest) from the test image.
fn image_of_size(src: &Image, width: usize, height: usize) -> Vec<u8> {
    let mut out = vec![0u8; width * height * 3];
    for y in 0..height {
        let sy = y * src.height / height;
        for x in 0..width {
            let sx = x * src.width / width;
            let s = (sy * src.width + sx) * 3;
            out[(y * width + x) * 3..][..3].copy_from_slice(&src.data[s..s + 3]);
        }
    }
    out
}

fn prompt(rng: &mut Rng, width: u32, height: u32) -> Prompt {
    let points = (0..rng.below(MAX_POINTS as u64) as usize + usize::from(rng.below(4) != 0))
        .map(|_| Point {
            x: rng.coord(width),
            y: rng.coord(height),
            positive: rng.below(3) != 0,
        })
        .collect::<Vec<_>>();
    let bbox = (points.is_empty() || rng.below(3) == 0).then(|| {
        let (x1, y1) = (rng.coord(width / 2), rng.coord(height / 2));
        [
            x1,
            y1,
            x1 + rng.coord(width / 2),
            y1 + rng.coord(height / 2),
        ]
    });
    Prompt {
        points,
        bbox,
        mask_input: None,
    }
}

/// The encoder and decoder files of a pair: a generated one (`tiny_a`, `bench_a`, ...) or the
/// real SAM2.1 tiny export of an exporter (`real_samexporter`, `real_onnxruntime`, whose
/// single-mask decoder is taken), from `$SAM2_REAL_MODELS/manifest.json`.
fn pair_files(pair: &str) -> (PathBuf, PathBuf) {
    let Some(family) = pair.strip_prefix("real_") else {
        return (
            model(&format!("{pair}_encoder.onnx")),
            model(&format!("{pair}_decoder.onnx")),
        );
    };
    real_pair(family)
}

#[test]
fn memory_stays_flat_over_a_long_run_of_encodes_and_predicts() {
    let encodes = env_or("SAM2_SOAK_ENCODES", 200).max(10);
    let predicts = env_or("SAM2_SOAK_PREDICTS", 2000);
    let pairs_text = std::env::var("SAM2_SOAK_PAIRS").unwrap_or("tiny_a,tiny_b,tiny_c".into());
    init_runtime();
    let pairs: Vec<(Encoder, Predictor)> = pairs_text
        .split(',')
        .map(|pair| {
            let (encoder_path, decoder_path) = pair_files(pair);
            let encoder = Encoder::new(&encoder_path, &Default::default()).unwrap();
            let options = PredictorOptions {
                encoder_fingerprint: Some(encoder.fingerprint()),
                pool_size: Some(2),
                ..Default::default()
            };
            let predictor = Predictor::new(&decoder_path, &options).unwrap();
            (encoder, predictor)
        })
        .collect();
    let source = read_pnm(&testdata("demo.ppm"));
    let mut rng = Rng(0x50a4);
    // Warm-up, part 1: each pair once at the largest image and the largest batch the loop will
    // ask for, so the arena has met its biggest requests; part 2: the first fifth of the loop.
    for (encoder, predictor) in &pairs {
        let (w, h) = (MAX_WIDTH - 1, MAX_HEIGHT - 1);
        let pixels = image_of_size(&source, w, h);
        let image = ImageView::packed(&pixels, w, h, PixelFormat::Rgb).unwrap();
        let embedding = encoder.encode(&image).unwrap();
        // Every object of the largest shape (most points and a box): prompts of one shape run as
        // one batch, so this is the largest single run the loop can ask for.
        let prompts: Vec<Prompt> = (0..MAX_OBJECTS)
            .map(|_| {
                let mut p = prompt(&mut rng, w as u32, h as u32);
                while p.points.len() < MAX_POINTS {
                    p.points.push(Point {
                        x: rng.coord(w as u32 / 2),
                        y: rng.coord(h as u32 / 2),
                        positive: true,
                    });
                }
                p.bbox = Some([1.0, 1.0, (w - 2) as f32, (h - 2) as f32]);
                p
            })
            .collect();
        for multimask in [false, true] {
            predictor
                .predict(&embedding, &prompts, PredictOptions { multimask })
                .unwrap();
        }
    }
    // A host keeps the last few images' embeddings (undo, tabs) and drops older ones.
    let mut recent: Vec<(usize, Arc<Embedding>)> = Vec::new();
    let warm_up = (encodes / 5).max(5);
    let (mut warm_rss, mut warm_arena, mut warm_extensions, mut warm_heap) = (0, 0, 0, 0);
    let mut samples = Vec::new();
    let mut predicted = 0usize;
    // Calls that failed (the goal is none): counted and reported rather than stopping the soak.
    let mut failed: Vec<String> = Vec::new();
    let start = std::time::Instant::now();
    for i in 0..encodes {
        let (w, h) = (
            64 + rng.below(MAX_WIDTH as u64 - 64) as usize,
            64 + rng.below(MAX_HEIGHT as u64 - 64) as usize,
        );
        let pixels = image_of_size(&source, w, h);
        let image = ImageView::packed(&pixels, w, h, PixelFormat::Rgb).unwrap();
        let pair = i % pairs.len();
        match pairs[pair].0.encode(&image) {
            Ok(embedding) => recent.push((pair, Arc::new(embedding))),
            Err(e) => failed.push(format!("encode {i} ({w}×{h}): {e}")),
        }
        if recent.is_empty() {
            continue;
        }
        if recent.len() > 4 {
            recent.remove(0);
        }
        // Spread the predicts evenly over the encodes.
        let due = predicts * (i + 1) / encodes;
        while predicted < due {
            let (pair, embedding) = &recent[rng.below(recent.len() as u64) as usize];
            let (width, height) = embedding.image_size();
            let objects = 1 + rng.below(MAX_OBJECTS as u64) as usize;
            let prompts: Vec<Prompt> = (0..objects)
                .map(|_| prompt(&mut rng, width, height))
                .collect();
            let options = PredictOptions {
                multimask: rng.below(2) == 0,
            };
            match pairs[*pair].1.predict(embedding, &prompts, options) {
                Ok(prediction) => assert_eq!(prediction.objects, objects),
                Err(e) => failed.push(format!("predict {predicted}: {e}")),
            }
            predicted += 1;
        }
        if i + 1 == warm_up {
            (warm_rss, (warm_arena, warm_extensions), (warm_heap, _)) =
                (rss(), arena(&pairs[0].1), heap());
        }
        if (i + 1) % (encodes / 10).max(1) == 0 {
            samples.push((i + 1, predicted, rss(), arena(&pairs[0].1).0, heap()));
        }
    }
    // Measured while the host still holds its recent embeddings, as after warm-up.
    let (end_rss, (end_arena, end_extensions), (end_heap, _)) = (rss(), arena(&pairs[0].1), heap());
    drop(recent);
    let mib = |b: u64| b as f64 / (1 << 20) as f64;
    println!(
        "soak ({pairs_text}): {encodes} encodes of new image sizes, {predicted} predicts, {:.0} s, \
         {} failed calls",
        start.elapsed().as_secs_f64(),
        failed.len()
    );
    println!("  after encodes   predicts   RSS MiB   arena MiB   heap in use   heap held");
    for (e, p, r, a, (u, h)) in &samples {
        println!(
            "  {e:>13} {p:>10} {:>9.1} {:>11.1} {:>13.1} {:>11.1}",
            mib(*r),
            mib(*a),
            mib(*u),
            mib(*h)
        );
    }
    let growth = end_rss as f64 / warm_rss as f64;
    let heap_growth = end_heap as f64 / warm_heap as f64;
    println!(
        "  after warm-up → at the end: heap in use {:.1} → {:.1} MiB ({heap_growth:.3}×), \
         RSS {:.1} → {:.1} MiB ({growth:.3}×), arena {:.1} → {:.1} MiB ({warm_extensions} → \
         {end_extensions} extensions)",
        mib(warm_heap),
        mib(end_heap),
        mib(warm_rss),
        mib(end_rss),
        mib(warm_arena),
        mib(end_arena)
    );
    if let Some(dir) = std::env::var_os("SAM2_REPORT_DIR") {
        let file = std::env::var("SAM2_SOAK_REPORT").unwrap_or("soak.tsv".into());
        std::fs::write(
            std::path::PathBuf::from(dir).join(file),
            format!(
                "pairs\tencodes\tpredicts\trss_warm\trss_end\tgrowth\trss_goal\theap_warm\theap_end\t\
                 heap_goal\tarena_warm\tarena_end\tarena_goal\tfailed\n\
                 {pairs_text}\t{encodes}\t{predicted}\t{warm_rss}\t{end_rss}\t{growth:.4}\t{RSS_GOAL}\t\
                 {warm_heap}\t{end_heap}\t{HEAP_GOAL}\t{warm_arena}\t{end_arena}\t{ARENA_GOAL}\t{}\n",
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
        heap_growth <= HEAP_GOAL,
        "the heap in use grew {heap_growth:.3}× after warm-up ({:.1} → {:.1} MiB): a leak",
        mib(warm_heap),
        mib(end_heap)
    );
    assert!(
        end_arena as f64 <= warm_arena as f64 * ARENA_GOAL,
        "ONNX Runtime's arena grew after warm-up: {:.1} → {:.1} MiB",
        mib(warm_arena),
        mib(end_arena)
    );
    assert!(
        growth <= RSS_GOAL,
        "resident memory grew {growth:.3}× after warm-up ({:.1} → {:.1} MiB)",
        mib(warm_rss),
        mib(end_rss)
    );
}
