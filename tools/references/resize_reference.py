#!/usr/bin/env python3
"""References for the resize Meta's predictors apply (issue 32), on sizes where it matters.

`image`: two generated photo-like images larger than the model's input, a 1920x1080 landscape
and a 1080x1920 portrait (so both axes shrink, one by 1.875, the other by 1.05), through

* `SAM2ImagePredictor`'s own transforms (`predictor._transforms`: ToTensor, torchvision's
  antialiased bilinear `Resize((1024, 1024))`, `Normalize`): the 1024x1024 tensor the encoder
  sees (`<name>_input.npy`, [3,1024,1024] float32), and
* the predictor itself on the checkpoint of the real exports (`--models`, SAM2.1 tiny):
  `set_image` (its image embedding, `<name>_embed.npy`, [256,64,64]) and two prompts (a click and
  a box; best of three candidates), each mask run-length encoded with its score.

`video`: a generated 640x480 clip of 4 frames (a disc moving over a textured background),
written as the folder of JPEGs `init_state` reads, and the RGB PIL decodes from them
(`frames_rgb.u8`, [4,480,640,3]); then

* Meta's own frame loader (`sam2.utils.misc.load_video_frames`, PIL's bicubic resize of each
  8-bit frame to 1024x1024, then normalisation): frames 0 and 3 of its tensor
  (`frame<k>_input.npy`), and
* `SAM2VideoPredictor` on the video export's checkpoint (`--models`, tools/models/export_video.py's
  output): a click on frame 0 and `propagate_in_video` over the clip; per frame the low-res
  logits (256x256), the object score logit and the object pointer, as tools/references/video_reference.py
  records them.

Each writes `reference.json` (the index) into `--out`. About a minute on 2 cores for both.

    python tools/references/resize_reference.py image --models REAL_MODELS --out DIR
    python tools/references/resize_reference.py video --models VIDEO_MODELS --out DIR
"""

import argparse
import json
import os
import sys
import time

import numpy as np
import torch
from PIL import Image

IMAGE_SIZES = {"landscape": (1920, 1080), "portrait": (1080, 1920)}
VIDEO_SIZE = (640, 480)
VIDEO_FRAMES = 4
VIDEO_CLICK = {"frame": 0, "obj_id": 1, "points": [[200, 240]], "labels": [1]}
VIDEO_CONFIG = "configs/sam2.1/sam2.1_hiera_t.yaml"


def say(msg):
    print(f"[resize-reference] {msg}", file=sys.stderr, flush=True)


def photo(w, h, seed):
    """uint8 [h,w,3]: smooth colour waves, hard-edged shapes and per-pixel noise, so a resize
    without antialiasing aliases visibly."""
    rng = np.random.default_rng(seed)
    yy, xx = np.mgrid[0:h, 0:w].astype(np.float64)
    img = np.stack([
        110 + 60 * np.sin(xx / 41.0) * np.cos(yy / 67.0),
        120 + 50 * np.sin((xx + 2 * yy) / 93.0),
        100 + 45 * np.cos(xx / 23.0 - yy / 37.0),
    ], axis=-1)
    # Fine stripes (period 3 px) in one corner: what antialiasing averages away.
    stripes = (xx < w / 3) & (yy < h / 3)
    img[stripes] += (60 * ((xx[stripes].astype(int) % 3) == 0))[:, None]
    for cx, cy, r, colour in [(0.62, 0.55, 0.18, (225, 120, 40)), (0.25, 0.7, 0.12, (60, 70, 160)),
                              (0.8, 0.25, 0.1, (240, 60, 180))]:
        disc = (xx - cx * w) ** 2 + (yy - cy * h) ** 2 <= (r * min(w, h)) ** 2
        img[disc] = colour
    img += rng.normal(0, 10, size=img.shape)
    return np.clip(np.rint(img), 0, 255).astype(np.uint8)


def rle(mask):
    flat = mask.reshape(-1).astype(np.uint8)
    change = np.flatnonzero(np.diff(flat)) + 1
    bounds = np.concatenate([[0], change, [flat.size]])
    counts = np.diff(bounds).tolist()
    if flat[0] == 1:
        counts = [0] + counts
    return counts


def image_reference(args):
    from sam2.build_sam import build_sam2
    from sam2.sam2_image_predictor import SAM2ImagePredictor

    manifest = json.load(open(os.path.join(args.models, "manifest.json")))
    pair = next(p for p in manifest["pairs"]
                if p["model"] == "sam2.1_hiera_tiny" and p["family"] == "samexporter")
    model = build_sam2(pair["config"], ckpt_path=os.path.join(args.models, pair["checkpoint"]),
                       device="cpu")
    predictor = SAM2ImagePredictor(model)
    index = {"model": pair["model"], "encoder": pair["encoder"], "decoder": pair["decoder"],
             "images": []}
    for seed, (name, (w, h)) in enumerate(IMAGE_SIZES.items()):
        t0 = time.time()
        rgb = photo(w, h, 20261202 + seed)
        rgb.tofile(os.path.join(args.out, f"{name}.u8"))
        with torch.inference_mode():
            x = predictor._transforms(rgb)
        np.save(os.path.join(args.out, f"{name}_input.npy"), x.numpy().astype(np.float32))
        predictor.set_image(rgb)
        embed = predictor._features["image_embed"][0].float().numpy()
        np.save(os.path.join(args.out, f"{name}_embed.npy"), np.ascontiguousarray(embed))
        cases = [
            {"name": "click", "points": [[int(0.62 * w), int(0.55 * h), 1]]},
            {"name": "box", "box": [int(0.1 * w), int(0.55 * h), int(0.42 * w), int(0.85 * h)]},
        ]
        for case in cases:
            kwargs = {}
            if "points" in case:
                kwargs["point_coords"] = np.array([p[:2] for p in case["points"]], np.float32)
                kwargs["point_labels"] = np.array([p[2] for p in case["points"]], np.int32)
            if "box" in case:
                kwargs["box"] = np.array(case["box"], np.float32)
            masks, scores, _ = predictor.predict(multimask_output=True, **kwargs)
            k = int(np.argmax(scores))
            mask = masks[k] > 0
            case.update(score=float(scores[k]), rle=rle(mask), area=int(mask.sum()))
        index["images"].append({"name": name, "width": w, "height": h, "pixels": f"{name}.u8",
                                "input": f"{name}_input.npy", "embed": f"{name}_embed.npy",
                                "cases": cases})
        say(f"{name} {w}x{h}: transforms, embedding, {len(cases)} prompts ({time.time() - t0:.0f} s)")
    return index


def video_clip():
    """uint8 [4,480,640,3]: a textured background and a red disc moving right."""
    w, h = VIDEO_SIZE
    rng = np.random.default_rng(20261203)
    yy, xx = np.mgrid[0:h, 0:w].astype(np.float64)
    base = np.stack([
        120 + 40 * np.sin(xx / 17.0) * np.cos(yy / 23.0),
        110 + 35 * np.sin((xx + yy) / 29.0),
        100 + 30 * np.cos(xx / 13.0 - yy / 19.0),
    ], axis=-1)
    noise = rng.normal(0, 12, size=(h, w, 3))
    frames = np.empty((VIDEO_FRAMES, h, w, 3), np.uint8)
    for t in range(VIDEO_FRAMES):
        img = base + noise
        disc = (xx - (200 + 25 * t)) ** 2 + (yy - 240) ** 2 <= 70 ** 2
        img[disc] = [210, 40, 40] + 0.25 * noise[disc]
        frames[t] = np.clip(np.rint(img), 0, 255).astype(np.uint8)
    return frames


def video_reference(args):
    from sam2.build_sam import build_sam2_video_predictor
    from sam2.utils.misc import load_video_frames

    w, h = VIDEO_SIZE
    jpeg_dir = os.path.join(args.out, "frames")
    os.makedirs(jpeg_dir, exist_ok=True)
    decoded = np.empty((VIDEO_FRAMES, h, w, 3), np.uint8)
    for t, frame in enumerate(video_clip()):
        path = os.path.join(jpeg_dir, f"{t:05d}.jpg")
        Image.fromarray(frame).save(path, quality=95)
        decoded[t] = np.array(Image.open(path).convert("RGB"))
    decoded.tofile(os.path.join(args.out, "frames_rgb.u8"))

    # Meta's loader, as init_state calls it (CPU, no async loading).
    images, vh, vw = load_video_frames(jpeg_dir, image_size=1024, offload_video_to_cpu=True,
                                       compute_device=torch.device("cpu"))
    assert (vh, vw) == (h, w), (vh, vw)
    inputs = {}
    for k in (0, VIDEO_FRAMES - 1):
        inputs[k] = f"frame{k}_input.npy"
        np.save(os.path.join(args.out, inputs[k]), images[k].numpy().astype(np.float32))

    checkpoint = os.path.join(args.models, "sam2.1_hiera_tiny_video.pt")
    predictor = build_sam2_video_predictor(VIDEO_CONFIG, ckpt_path=checkpoint, device="cpu")
    t0 = time.time()
    with torch.inference_mode():
        state = predictor.init_state(jpeg_dir)
        c = VIDEO_CLICK
        predictor.add_new_points_or_box(state, frame_idx=c["frame"], obj_id=c["obj_id"],
                                        points=np.array(c["points"], np.float32),
                                        labels=np.array(c["labels"], np.int32))
        for _ in predictor.propagate_in_video(state, start_frame_idx=0):
            pass
    od = state["output_dict_per_obj"][0]
    logits = np.zeros((VIDEO_FRAMES, 256, 256), np.float32)
    scores = np.zeros(VIDEO_FRAMES, np.float32)
    ptrs = np.zeros((VIDEO_FRAMES, 256), np.float32)
    kinds = []
    for t in range(VIDEO_FRAMES):
        kind = "cond" if t in od["cond_frame_outputs"] else "non_cond"
        out = od[f"{kind}_frame_outputs"][t]
        logits[t] = out["pred_masks"][0, 0].float().numpy()
        scores[t] = float(out["object_score_logits"].reshape(-1)[0])
        ptrs[t] = out["obj_ptr"][0].float().numpy()
        kinds.append(kind)
    for name, array in [("logits", logits), ("scores", scores), ("ptrs", ptrs)]:
        np.save(os.path.join(args.out, f"{name}.npy"), array)
    say(f"{w}x{h} clip: loader and {VIDEO_FRAMES} tracked frames ({time.time() - t0:.0f} s)")
    return {"video_size": [w, h], "num_frames": VIDEO_FRAMES, "jpeg_dir": "frames",
            "frames_rgb": "frames_rgb.u8", "inputs": {str(k): v for k, v in inputs.items()},
            "click": VIDEO_CLICK, "kinds": kinds, "logits": "logits.npy", "scores": "scores.npy",
            "ptrs": "ptrs.npy"}


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("kind", choices=["image", "video"])
    parser.add_argument("--models", required=True)
    parser.add_argument("--out", required=True)
    args = parser.parse_args()
    os.makedirs(args.out, exist_ok=True)
    torch.set_num_threads(os.cpu_count() or 1)
    index = image_reference(args) if args.kind == "image" else video_reference(args)
    with open(os.path.join(args.out, "reference.json"), "w") as f:
        json.dump(index, f, indent=1)
    say(f"wrote {os.path.join(args.out, 'reference.json')}")


if __name__ == "__main__":
    main()
