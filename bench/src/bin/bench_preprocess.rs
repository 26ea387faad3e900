//! Preprocessing alone (pixels → the encoder's 1024² normalised NCHW tensor) against its
//! memory-bandwidth floor, for the image path (torchvision's antialiased bilinear resize when
//! shrinking) and the video-frame path (PIL's bicubic resize of the 8-bit frame), contestants
//! interleaved round by round, medians with min and max, measured two ways in one run: the way
//! the `bench` binary measures its preprocessing row (each call after a 40 ms idle pause, as a
//! user opens an image), then back to back (as a tracker reads frames). The two differ where
//! waking an idle worker thread is slow: on a virtual machine whose idle vCPU reports itself
//! preempted, Linux wakes a worker on the caller's own vCPU, so after a pause the work ran on
//! about one thread until the library steered its helpers off the caller's CPU
//! (src/preprocess/helpers.rs, docs/performance.md).
//!
//!     cargo run --release -p sam2-bench --bin bench_preprocess [-- RUNS]

use sam2::{ImageView, PixelFormat};
use sam2_bench::bandwidth_floor;
use std::time::Duration;

use sam2_bench::stats::{interleaved, timed, SETTLE_ORT};

const SIZE: usize = 1024;

/// A deterministic photo-like RGB image: smooth gradients, a few hard edges, fine noise (so the
/// antialiasing has something to do).
fn make_image(w: usize, h: usize) -> Vec<u8> {
    let mut state = 0x2545_F491_4F6C_DD1Du64;
    let mut px = vec![0u8; w * h * 3];
    for y in 0..h {
        for x in 0..w {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            let noise = (state % 41) as f32 - 20.0;
            let (fx, fy) = (x as f32 / w as f32, y as f32 / h as f32);
            let edge = if ((x / 97) + (y / 61)) % 2 == 0 {
                40.0
            } else {
                0.0
            };
            let c = [
                60.0 + 150.0 * fx + edge + noise,
                90.0 + 100.0 * fy + noise,
                200.0 - 120.0 * fx * fy + edge * 0.5 + noise,
            ];
            for (i, v) in c.iter().enumerate() {
                px[(y * w + x) * 3 + i] = v.clamp(0.0, 255.0) as u8;
            }
        }
    }
    px
}

type Contestant<'a> = (String, Box<dyn FnMut() -> f64 + 'a>);

fn main() {
    let runs: usize = std::env::args()
        .nth(1)
        .and_then(|a| a.parse().ok())
        .unwrap_or(25);
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
    let cases = [(1920, 1080), (1080, 1920), (1280, 720), (640, 480)];
    let images: Vec<Vec<u8>> = cases.iter().map(|&(w, h)| make_image(w, h)).collect();
    for (settle, how) in [
        (SETTLE_ORT, "each call after a 40 ms idle pause"),
        (Duration::ZERO, "back to back"),
    ] {
        println!(
            "{:<44} {:>26} {:>26} {:>9}",
            format!("{how} (ms)"),
            "library",
            "floor",
            "lib/floor"
        );
        for (&(w, h), rgb) in cases.iter().zip(&images) {
            measure(settle, runs, threads, (w, h), rgb);
        }
    }
}

/// One image size: both paths and the floor, interleaved, one line per path.
fn measure(settle: Duration, runs: usize, threads: usize, (w, h): (usize, usize), rgb: &[u8]) {
    let view = ImageView::packed(rgb, w, h, PixelFormat::Rgb).unwrap();
    let mut image_out = vec![0.0f32; 3 * SIZE * SIZE];
    let mut video_out = vec![0.0f32; 3 * SIZE * SIZE];
    let mut floor1_out = vec![0.0f32; 3 * SIZE * SIZE];
    let mut floorn_out = vec![0.0f32; 3 * SIZE * SIZE];
    let mut contestants: Vec<Contestant> = vec![
        (
            format!("image path {w}×{h}"),
            Box::new(|| timed(|| sam2::test_support::preprocess_into(&view, SIZE, &mut image_out))),
        ),
        (
            format!("video-frame path {w}×{h}"),
            Box::new(|| {
                timed(|| {
                    sam2::test_support::preprocess_video_frame_into(&view, SIZE, &mut video_out)
                })
            }),
        ),
        (
            "floor, 1 thread".into(),
            Box::new(|| timed(|| bandwidth_floor(rgb, &mut floor1_out, 1))),
        ),
        (
            "floor, all threads".into(),
            Box::new(|| timed(|| bandwidth_floor(rgb, &mut floorn_out, threads))),
        ),
    ];
    let mut fs: Vec<&mut dyn FnMut() -> f64> = contestants
        .iter_mut()
        .map(|(_, f)| f.as_mut() as &mut dyn FnMut() -> f64)
        .collect();
    let st: Vec<(f64, f64, f64)> = interleaved(settle, 3, runs, &mut fs)
        .into_iter()
        .map(|s| s.map_or((f64::NAN, f64::NAN, f64::NAN), |s| (s.median, s.min, s.max)))
        .collect();
    let floor = if st[3].0 < st[2].0 { st[3] } else { st[2] };
    for (i, (name, _)) in contestants.iter().enumerate().take(2) {
        let (m, lo, hi) = st[i];
        println!(
            "{name:<44} {:>26} {:>26} {:>8.3}×",
            format!("{m:.3} [{lo:.3}–{hi:.3}]"),
            format!("{:.3} [{:.3}–{:.3}]", floor.0, floor.1, floor.2),
            m / floor.0
        );
    }
}
