"""The deterministic synthetic clip of the tracking tests, demo and video benchmark, in closed form
(integer arithmetic only). This module is its one definition: tools/setup/setup.sh runs it to write
models/track/clip.bin, which the Rust, C and C# suites and the benchmarks read
(tests/common/track_clip.rs, examples/c/track_clip.c, csharp/Tests/TrackerTests.cs).

    320 x 240 pixels, 24 frames (t = 0..23), RGB u8; pixel (x, y) with integer x in 0..319,
    y in 0..239; "//" and "mod" are on non-negative integers.

  background:  s = x//20 - y//24
               R = 168 + s + ((3x + 5y) mod 17) - 8
               G = 162 + s + ((5x + 2y) mod 13) - 6
               B = 146 + s + ((2x + 7y) mod 11) - 5
  occluder:    the bar 150 <= x < 230 (all rows), colour (70, 76, 88), drawn over the background
  target:      the red disc (214, 48, 52), (x - cx)^2 + (y - cy)^2 <= 22^2, drawn only where the
               bar is not (it passes behind the bar); cy(t) = 96 + 4t;
               cx(t) = 34 + 10t (t <= 9), 140 (t = 10), 174 + 10(t - 11) (11 <= t <= 14),
                       236 (t = 15), 246 + 7(t - 16) (t >= 16)
  distractor:  the blue square (48, 84, 200), sx(t) <= x < sx(t) + 40, 20 <= y < 60,
               sx(t) = 250 - 8t, drawn last (over the bar)

  ground truth: the target's visible pixels (disc and not bar): fully visible on t = 0..9 and
  17..23 (1517 px), partly hidden by the bar on t = 10 (1162 px), 15 (1039 px) and 16 (1409 px),
  hidden on t = 11..14. The distractor's: its square, always fully visible (1600 px).
  Prompts: one positive click on frame 0 at (cx(0), cy(0)) = (34, 96) for the target,
  at (sx(0) + 20, 40) = (270, 40) for the distractor (a second object).

clip.bin (all integers little-endian):
    0   8 bytes  "SAM2CLIP"
    8   u32 x 5  version (1), width, height, frames, objects (2: the disc, the square)
    28  i32 x 2 x objects x frames  each object's centre (x, y) on each frame, frame by frame:
                 where a test clicks it (the disc's is its centre even where the bar hides it)
    then, frame by frame: width*height*3 bytes of RGB, then objects x width*height bytes of
    ground truth (1 where the object is visible, else 0)

    python tools/models/track_clip.py --out DIR     writes DIR/clip.bin
"""

import argparse
import os
import struct

import numpy as np

WIDTH, HEIGHT, FRAMES = 320, 240, 24
RADIUS = 22
TARGET = (214, 48, 52)
DISTRACTOR = (48, 84, 200)
BAR = (70, 76, 88)
BAR_X = (150, 230)


def target_centre(t):
    if t <= 9:
        cx = 34 + 10 * t
    elif t == 10:
        cx = 140
    elif t <= 14:
        cx = 174 + 10 * (t - 11)
    elif t == 15:
        cx = 236
    else:
        cx = 246 + 7 * (t - 16)
    return cx, 96 + 4 * t


def click():
    return target_centre(0)


def distractor_left(t):
    return 250 - 8 * t


def distractor_click():
    return distractor_left(0) + 20, 40


def frame(t):
    """Returns (rgb u8 [240,320,3], (target, distractor) ground truth, bool [240,320] each)."""
    y, x = np.mgrid[0:HEIGHT, 0:WIDTH].astype(np.int64)
    s = x // 20 - y // 24
    img = np.stack([168 + s + (3 * x + 5 * y) % 17 - 8,
                    162 + s + (5 * x + 2 * y) % 13 - 6,
                    146 + s + (2 * x + 7 * y) % 11 - 5], axis=-1)
    bar = (x >= BAR_X[0]) & (x < BAR_X[1])
    img[bar] = BAR
    cx, cy = target_centre(t)
    gt = ((x - cx) ** 2 + (y - cy) ** 2 <= RADIUS * RADIUS) & ~bar
    img[gt] = TARGET
    sx = distractor_left(t)
    square = (x >= sx) & (x < sx + 40) & (y >= 20) & (y < 60)
    img[square] = DISTRACTOR
    return img.astype(np.uint8), (gt, square)


MAGIC, VERSION = b"SAM2CLIP", 1


def distractor_centre(t):
    return distractor_left(t) + 20, 40


def write(path):
    """Writes the clip file (see the module's doc string) to `path`, replacing it atomically."""
    parts = [MAGIC, struct.pack("<5I", VERSION, WIDTH, HEIGHT, FRAMES, 2)]
    for t in range(FRAMES):
        parts.append(struct.pack("<4i", *target_centre(t), *distractor_centre(t)))
    for t in range(FRAMES):
        img, (disc, square) = frame(t)
        parts += [img.tobytes(), disc.astype(np.uint8).tobytes(), square.astype(np.uint8).tobytes()]
    tmp = path + ".tmp"
    with open(tmp, "wb") as f:
        f.write(b"".join(parts))
    os.replace(tmp, path)


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description="Writes the tracking clip to DIR/clip.bin.")
    ap.add_argument("--out", required=True, help="the directory (models/track)")
    write(os.path.join(ap.parse_args().out, "clip.bin"))
