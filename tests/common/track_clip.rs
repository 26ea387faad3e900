//! The tracking clip, read from the file tools/models/track_clip.py writes
//! (`$SAM2_MODELS/track/clip.bin`, made by tools/setup/setup.sh; its layout is in track_clip.py's
//! doc string): a red disc moving right behind a bar (hidden on frames 11–14) and a blue square
//! moving left, 320 × 240, 24 frames. Used by tests/it/video.rs, tests/video_soak.rs, cli/tests/cli.rs
//! and the video benchmark.

use std::path::PathBuf;
use std::sync::OnceLock;

pub const WIDTH: usize = 320;
pub const HEIGHT: usize = 240;
pub const FRAMES: u32 = 24;
const OBJECTS: usize = 2;
const HEADER: usize = 28;
const CENTRES: usize = FRAMES as usize * OBJECTS * 8;
const PLANE: usize = WIDTH * HEIGHT;
const FRAME_BYTES: usize = PLANE * (3 + OBJECTS);

/// `$SAM2_MODELS/track/clip.bin`, or `models/track/clip.bin` in the first directory above this
/// package that has one.
pub fn path() -> PathBuf {
    let file = |models: PathBuf| models.join("track").join("clip.bin");
    if let Some(models) = std::env::var_os("SAM2_MODELS") {
        return file(PathBuf::from(models));
    }
    let package = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    package
        .ancestors()
        .map(|dir| file(dir.join("models")))
        .find(|p| p.is_file())
        .unwrap_or_else(|| file(package.join("models")))
}

/// The whole file, read and checked once.
fn bytes() -> &'static [u8] {
    static CLIP: OnceLock<Vec<u8>> = OnceLock::new();
    CLIP.get_or_init(|| {
        let p = path();
        let b = std::fs::read(&p).unwrap_or_else(|e| {
            panic!(
                "{}: {e} (run tools/setup/setup.sh: it writes the clip)",
                p.display()
            )
        });
        let word = |i: usize| u32::from_le_bytes(b[8 + 4 * i..12 + 4 * i].try_into().unwrap());
        assert!(
            b.len() == HEADER + CENTRES + FRAMES as usize * FRAME_BYTES
                && &b[..8] == b"SAM2CLIP"
                && [word(0), word(1), word(2), word(3), word(4)]
                    == [1, WIDTH as u32, HEIGHT as u32, FRAMES, OBJECTS as u32],
            "{} is not the clip of tools/models/track_clip.py (run tools/setup/setup.sh)",
            p.display()
        );
        b
    })
}

/// Object `k`'s centre (x, y) on frame `t`: 0 the disc, 1 the square.
fn centre(t: i64, k: usize) -> (i64, i64) {
    let i = HEADER + ((t as usize) * OBJECTS + k) * 8;
    let b = bytes();
    let at = |i: usize| i32::from_le_bytes(b[i..i + 4].try_into().unwrap()) as i64;
    (at(i), at(i + 4))
}

/// Where the disc is on frame `t` (its centre, also where the bar hides it).
pub fn target_centre(t: i64) -> (i64, i64) {
    centre(t, 0)
}

/// Where the square is on frame `t` (its centre).
pub fn distractor_centre(t: i64) -> (i64, i64) {
    centre(t, 1)
}

/// Frame `t` of the clip (RGB) and the ground truth of the disc and of the square (0/1 bytes).
pub fn frame(t: u32) -> (Vec<u8>, Vec<u8>, Vec<u8>) {
    assert!(t < FRAMES, "the clip has {FRAMES} frames, not {}", t + 1);
    let f = &bytes()[HEADER + CENTRES + t as usize * FRAME_BYTES..][..FRAME_BYTES];
    let (rgb, truth) = f.split_at(PLANE * 3);
    let (disc, square) = truth.split_at(PLANE);
    (rgb.to_vec(), disc.to_vec(), square.to_vec())
}

/// The clip played back and forth, for runs longer than 24 frames: frame `t` of the long clip
/// is frame 0, 1, ..., 23, 22, ..., 1, 0, 1, ... of this one, so the motion never jumps.
pub fn back_and_forth(t: u32) -> u32 {
    let period = 2 * (FRAMES - 1);
    let k = t % period;
    if k < FRAMES {
        k
    } else {
        period - k
    }
}
