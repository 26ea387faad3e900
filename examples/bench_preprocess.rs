//! Preprocessing alone (pixels → the encoder's 1024² normalised NCHW tensor) against its
//! memory-bandwidth floor, for the image path (torchvision's antialiased bilinear resize when
//! shrinking) and the video-frame path (PIL's bicubic resize of the 8-bit frame), measured the
//! way `examples/bench.rs` measures its preprocessing row: each call after a 40 ms idle pause,
//! contestants interleaved round by round, medians with min and max.
//!
//!     cargo run --release --example bench_preprocess [-- RUNS]

use std::hint::black_box;
use std::time::{Duration, Instant};

use sam2::{ImageView, PixelFormat};

const SIZE: usize = 1024;
const SETTLE: Duration = Duration::from_millis(40);

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

/// One read of the input and one write of the output, split over `threads` threads.
fn bandwidth_floor(input: &[u8], out: &mut [f32], threads: usize) {
    let run = |inp: &[u8], o: &mut [f32]| {
        let mut acc = 0u64;
        for c in inp.chunks_exact(8) {
            acc = acc.wrapping_add(u64::from_ne_bytes(c.try_into().unwrap()));
        }
        black_box(acc);
        o.fill(black_box(0.5));
        black_box(&o[0]);
    };
    if threads <= 1 {
        run(input, out);
        return;
    }
    let ic = input.len().div_ceil(threads).next_multiple_of(8);
    let oc = out.len().div_ceil(threads);
    std::thread::scope(|s| {
        for (i, o) in input.chunks(ic).zip(out.chunks_mut(oc)) {
            s.spawn(move || run(i, o));
        }
    });
}

fn timed(f: impl FnOnce()) -> f64 {
    let t = Instant::now();
    f();
    t.elapsed().as_secs_f64() * 1e3
}

fn stats(mut v: Vec<f64>) -> (f64, f64, f64) {
    v.sort_by(f64::total_cmp);
    (v[v.len() / 2], v[0], v[v.len() - 1])
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
    println!(
        "{:<44} {:>26} {:>26} {:>9}",
        "measurement (ms)", "library", "floor", "lib/floor"
    );
    for (&(w, h), rgb) in cases.iter().zip(&images) {
        let view = ImageView::packed(rgb, w, h, PixelFormat::Rgb).unwrap();
        let mut image_out = vec![0.0f32; 3 * SIZE * SIZE];
        let mut video_out = vec![0.0f32; 3 * SIZE * SIZE];
        let mut floor1_out = vec![0.0f32; 3 * SIZE * SIZE];
        let mut floorn_out = vec![0.0f32; 3 * SIZE * SIZE];
        let mut contestants: Vec<Contestant> = vec![
            (
                format!("image path {w}×{h}"),
                Box::new(|| {
                    timed(|| sam2::test_support::preprocess_into(&view, SIZE, &mut image_out))
                }),
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
        let k = contestants.len();
        for (_, f) in contestants.iter_mut() {
            for _ in 0..3 {
                std::thread::sleep(SETTLE);
                f();
            }
        }
        let mut times = vec![Vec::with_capacity(runs); k];
        for round in 0..runs {
            for j in 0..k {
                let i = (j + round) % k;
                std::thread::sleep(SETTLE);
                times[i].push((contestants[i].1)());
            }
        }
        let st: Vec<(f64, f64, f64)> = times.into_iter().map(stats).collect();
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
}
