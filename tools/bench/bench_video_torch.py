"""Per-frame cost of Meta's PyTorch SAM2VideoPredictor, for bench_video (bench/src/bin/).

On the checkpoint sam2-export-video writes beside its four modules (`--models`:
sam2.1_hiera_tiny_video.pt, the same weights as the ONNX export), built by
`build_sam2_video_predictor` on the CPU; or, when `--models` is EdgeTAM's export
(sam2-export-edgetam, its manifest's `"family": "edgetam"`; run with EdgeTAM's venv,
tools/setup/setup-edgetam.sh), EdgeTAM's own `SAM2VideoPredictor` on that export's checkpoint. The clip is bench_video's (bench/src/bin/bench_video/compare.rs): the disc clip of
tools/models/track_clip.py played back and forth, resampled (nearest) to --width x --height, written as
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

# tools/models: the tracking clip.
sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "models"))
import track_clip as clip  # noqa: E402

CONFIG = "configs/sam2.1/sam2.1_hiera_t.yaml"
WARM_FRAMES = 17


def clip_frame(t, width, height):
    """Frame t of bench_video's clip (compare.rs): tools/models/track_clip.py's played back and forth, resampled
    (nearest) to width x height."""
    k = t % (2 * (clip.FRAMES - 1))
    img, _ = clip.frame(k if k < clip.FRAMES else 2 * (clip.FRAMES - 1) - k)
    y = np.arange(height) * clip.HEIGHT // height
    x = np.arange(width) * clip.WIDTH // width
    return np.ascontiguousarray(img[y[:, None], x[None, :]])


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--models", required=True)
    ap.add_argument("--width", type=int, default=1280)
    ap.add_argument("--height", type=int, default=720)
    ap.add_argument("--timed", type=int, default=3)
    args = ap.parse_args()
    warnings.filterwarnings("ignore")
    torch.set_num_threads(os.cpu_count() or 1)
    manifest_path = os.path.join(args.models, "manifest.json")
    manifest = json.load(open(manifest_path)) if os.path.exists(manifest_path) else {}
    if manifest.get("family") == "edgetam":
        from sam2_tools import edgetam_model  # EdgeTAM as its own builder makes it, without downloads

        checkpoint = os.path.join(args.models, manifest["checkpoint"])
        predictor = edgetam_model.build(video=True, checkpoint=checkpoint)
    else:
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
            cx, cy = clip.click()
            click = np.array(
                [[cx * args.width / clip.WIDTH, cy * args.height / clip.HEIGHT]], np.float32
            )
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
                "model": manifest.get("model", "sam2.1_hiera_tiny"),
                "torch": torch.__version__,
                "frame": [args.width, args.height],
                "warm_frames": WARM_FRAMES,
            }
        )
    )


if __name__ == "__main__":
    main()
