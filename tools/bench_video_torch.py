"""Per-frame cost of Meta's PyTorch SAM2VideoPredictor, for examples/bench_video.rs.

On the checkpoint tools/export_video.py writes beside its four modules (`--models`:
sam2.1_hiera_tiny_video.pt, the same weights as the ONNX export), built by
`build_sam2_video_predictor` on the CPU. The clip is bench_video.rs's: the disc clip of
tools/track_clip.py played back and forth, resampled (nearest) to --width x --height, written as
the folder of JPEGs `init_state` reads (init_state decodes, resizes to 1024 and normalises every
frame up front: not timed). One click on the disc on frame 0, then `propagate_in_video`; each
frame's time is from the previous yield to its own, which covers the image encoder (run lazily
per frame), memory attention, the decoder, the memory encoder and the masks upsampled to the
video's size. Frames 1..17 are warm-up (from frame 16 on a frame attends to 7 memory frames and
16 pointers, as in the ONNX bench); the next --timed frames are reported.

Prints one JSON line: {"seconds": [...], "threads": n, ...}.
"""

import argparse
import json
import os
import sys
import tempfile
import time
import warnings

import numpy as np
import torch
from PIL import Image

CONFIG = "configs/sam2.1/sam2.1_hiera_t.yaml"
WARM_FRAMES = 17


def clip_frame(t, width, height):
    """Frame t of bench_video.rs's clip (the same closed form, integer arithmetic)."""
    k = t % 46
    t = k if k < 24 else 46 - k
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
    cy, sx = 96 + 4 * t, 250 - 8 * t
    y = (np.arange(height) * 240 // height)[:, None].astype(np.int64)
    x = (np.arange(width) * 320 // width)[None, :].astype(np.int64)
    s = x // 20 - y // 24
    rgb = np.stack(
        [
            168 + s + (3 * x + 5 * y) % 17 - 8,
            162 + s + (5 * x + 2 * y) % 13 - 6,
            146 + s + (2 * x + 7 * y) % 11 - 5,
        ],
        axis=-1,
    ).astype(np.uint8)
    bar = np.broadcast_to((x >= 150) & (x < 230), (height, width))
    rgb[bar] = (70, 76, 88)
    disc = ((x - cx) ** 2 + (y - cy) ** 2 <= 22 * 22) & ~bar
    rgb[disc] = (214, 48, 52)
    square = np.broadcast_to((x >= sx) & (x < sx + 40) & (y >= 20) & (y < 60), (height, width))
    rgb[square] = (48, 84, 200)
    return rgb


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--models", required=True)
    ap.add_argument("--width", type=int, default=1280)
    ap.add_argument("--height", type=int, default=720)
    ap.add_argument("--timed", type=int, default=3)
    args = ap.parse_args()
    warnings.filterwarnings("ignore")
    torch.set_num_threads(os.cpu_count() or 1)
    from sam2.build_sam import build_sam2_video_predictor

    checkpoint = os.path.join(args.models, "sam2.1_hiera_tiny_video.pt")
    predictor = build_sam2_video_predictor(CONFIG, ckpt_path=checkpoint, device="cpu")
    frames = WARM_FRAMES + args.timed + 1
    with tempfile.TemporaryDirectory() as tmp:
        for t in range(frames):
            Image.fromarray(clip_frame(t, args.width, args.height)).save(
                os.path.join(tmp, f"{t:05d}.jpg"), quality=95
            )
        with torch.inference_mode():
            state = predictor.init_state(tmp)
            click = np.array([[34.0 * args.width / 320, 96.0 * args.height / 240]], np.float32)
            predictor.add_new_points_or_box(
                state, frame_idx=0, obj_id=1, points=click, labels=np.array([1], np.int32)
            )
            seconds = []
            last = time.perf_counter()
            for frame_idx, _, masks in predictor.propagate_in_video(state, start_frame_idx=0):
                now = time.perf_counter()
                if frame_idx > WARM_FRAMES:
                    seconds.append(now - last)
                print(f"[bench-video-torch] frame {frame_idx}: {now - last:.2f} s", file=sys.stderr)
                last = now
    print(
        json.dumps(
            {
                "seconds": seconds,
                "threads": torch.get_num_threads(),
                "torch": torch.__version__,
                "frame": [args.width, args.height],
                "warm_frames": WARM_FRAMES,
            }
        )
    )


if __name__ == "__main__":
    main()
