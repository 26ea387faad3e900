//! The generated tracking clip of tools/track_clip.py, in its integer closed form: a red disc
//! moving right behind a bar (hidden on frames 11–14) and a blue square moving left, 320 × 240,
//! 24 frames. Used by tests/video.rs and tests/video_soak.rs.

pub const WIDTH: usize = 320;
pub const HEIGHT: usize = 240;
pub const FRAMES: u32 = 24;
const RADIUS: i64 = 22;
const TARGET: [u8; 3] = [214, 48, 52];
const DISTRACTOR: [u8; 3] = [48, 84, 200];
const BAR: [u8; 3] = [70, 76, 88];
const BAR_X: (i64, i64) = (150, 230);

pub fn target_centre(t: i64) -> (i64, i64) {
    let cx = match t {
        0..=9 => 34 + 10 * t,
        10 => 140,
        11..=14 => 174 + 10 * (t - 11),
        15 => 236,
        _ => 246 + 7 * (t - 16),
    };
    (cx, 96 + 4 * t)
}

pub fn distractor_left(t: i64) -> i64 {
    250 - 8 * t
}

/// Frame `t` of the clip (RGB) and the ground truth of the disc and of the square, in the closed
/// form tools/track_clip.py defines.
pub fn frame(t: u32) -> (Vec<u8>, Vec<u8>, Vec<u8>) {
    let t = t as i64;
    let mut rgb = vec![0u8; WIDTH * HEIGHT * 3];
    let mut disc = vec![0u8; WIDTH * HEIGHT];
    let mut square = vec![0u8; WIDTH * HEIGHT];
    let (cx, cy) = target_centre(t);
    let sx = distractor_left(t);
    for y in 0..HEIGHT as i64 {
        for x in 0..WIDTH as i64 {
            let s = x / 20 - y / 24;
            let mut px = [
                (168 + s + (3 * x + 5 * y) % 17 - 8) as u8,
                (162 + s + (5 * x + 2 * y) % 13 - 6) as u8,
                (146 + s + (2 * x + 7 * y) % 11 - 5) as u8,
            ];
            let bar = x >= BAR_X.0 && x < BAR_X.1;
            if bar {
                px = BAR;
            }
            let i = (y as usize) * WIDTH + x as usize;
            if (x - cx).pow(2) + (y - cy).pow(2) <= RADIUS * RADIUS && !bar {
                px = TARGET;
                disc[i] = 1;
            }
            if x >= sx && x < sx + 40 && (20..60).contains(&y) {
                px = DISTRACTOR;
                square[i] = 1;
            }
            rgb[i * 3..i * 3 + 3].copy_from_slice(&px);
        }
    }
    (rgb, disc, square)
}
