#!/usr/bin/env python3
"""Reference masks for the real-architecture exports (issue 16), from the two pipelines users
compare the library against:

* `python`: the pipeline SAM2 users run today from Python, with samexporter's exact arithmetic
  (its `sam2_onnx.py`): cv2.resize (INTER_LINEAR, stretch) of the uint8 RGB image to 1024²,
  `(x / 255.0 - mean) / std` in float64, then float32; points scaled by 1024/W and 1024/H in
  float32; onnxruntime's Python API with default session options; the best of the decoder's
  candidates by predicted IoU; its 256² logits resized to the image with cv2.resize and
  thresholded at 0. ONNX Runtime's own decoders (family `onnxruntime`) return the full-size mask
  themselves, which is taken as it is.
* `meta`: Meta's PyTorch `SAM2ImagePredictor` on the checkpoint the exports were made from.

Runs in the exporters' venv (scripts/setup-real.sh); reads `manifest.json` in the models
directory and writes `reference.json` there: the prompts of every case and, per pair and case,
each pipeline's mask (run-length encoded, row-major, starting with a run of zeros) and score.
The Rust test tests/it/real_models.rs replays the cases through the library and compares.

    python tools/references/real_reference.py --models DIR --image testdata/demo.ppm
"""

import argparse
import json
import os
import sys
import time

import cv2
import numpy as np
import onnxruntime as ort
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from reference_check import read_pnm  # noqa: E402  (the project's one PPM reader in Python)

MEAN = np.array([0.485, 0.456, 0.406])
STD = np.array([0.229, 0.224, 0.225])
SIZE = 1024


def say(msg):
    print(f"[real-reference] {msg}", file=sys.stderr, flush=True)


def cases(w, h):
    """The prompts, in image pixels. `refine` feeds back the low-res logits of `click`."""
    return [
        {"name": "click", "points": [[580, 190, 1]]},
        {"name": "box", "box": [52, 82, 327, 257]},
        {"name": "negative", "points": [[160, 440, 1], [630, 460, 0]]},
        {"name": "box_and_click", "box": [420, 60, 760, 330], "points": [[580, 190, 1]]},
        {"name": "corner", "points": [[12, 10, 1]]},
        {"name": "centre", "points": [[w // 2, h // 2, 1]]},
        {"name": "three_clicks", "points": [[300, 300, 1], [340, 320, 1], [700, 520, 0]]},
        {"name": "refine", "points": [[580, 190, 1]], "mask_from": "click"},
    ]


def rle(mask):
    flat = mask.reshape(-1).astype(np.uint8)
    change = np.flatnonzero(np.diff(flat)) + 1
    bounds = np.concatenate([[0], change, [flat.size]])
    counts = np.diff(bounds).tolist()
    if flat[0] == 1:
        counts = [0] + counts
    return counts


def prompt_arrays(case, w, h):
    """samexporter's prepare_points arithmetic: float32 arrays, x / W * 1024, y / H * 1024."""
    coords, labels = [], []
    if "box" in case:
        x1, y1, x2, y2 = case["box"]
        coords += [[x1, y1], [x2, y2]]
        labels += [2, 3]
    for x, y, positive in case.get("points", []):
        coords.append([x, y])
        labels.append(1 if positive else 0)
    c = np.asarray(coords, dtype=np.float32)[np.newaxis].copy()
    c[..., 0] = c[..., 0] / w * SIZE
    c[..., 1] = c[..., 1] / h * SIZE
    return c, np.asarray(labels, dtype=np.float32)[np.newaxis]


class PythonPipeline:
    def __init__(self, encoder, decoder, family):
        self.family = family
        self.encoder = ort.InferenceSession(encoder, providers=["CPUExecutionProvider"])
        self.decoder = ort.InferenceSession(decoder, providers=["CPUExecutionProvider"])

    def encode(self, rgb):
        self.h, self.w = rgb.shape[:2]
        resized = cv2.resize(rgb, (SIZE, SIZE))
        x = ((resized / 255.0 - MEAN) / STD).transpose(2, 0, 1)[np.newaxis].astype(np.float32)
        names = [o.name for o in self.encoder.get_outputs()]
        self.features = dict(zip(names, self.encoder.run(names, {self.encoder.get_inputs()[0].name: x})))

    def predict(self, case, mask_input=None):
        coords, labels = prompt_arrays(case, self.w, self.h)
        mask = np.zeros((1, 1, 256, 256), np.float32) if mask_input is None else mask_input[None, None]
        has = np.array([0.0 if mask_input is None else 1.0], np.float32)
        feeds = dict(self.features)
        if self.family == "samexporter":
            feeds.update(point_coords=coords, point_labels=labels, mask_input=mask, has_mask_input=has)
            masks, iou = self.decoder.run(["masks", "iou_predictions"], feeds)
            k = int(np.argmax(iou[0]))
            logits = masks[0, k]
            full = cv2.resize(logits, (self.w, self.h)) > 0.0
        else:
            feeds.update(point_coords=coords, point_labels=labels.astype(np.int32), input_masks=mask,
                         has_input_masks=has, original_image_size=np.array([self.h, self.w], np.int32))
            masks, iou, low = self.decoder.run(["masks", "iou_predictions", "low_res_masks"], feeds)
            k = int(np.argmax(iou[0]))
            logits = low[0, k]
            full = masks[0, k]
        return full, float(iou[0, k]), logits


class MetaPipeline:
    def __init__(self, config, checkpoint, multimask):
        from sam2.build_sam import build_sam2
        from sam2.sam2_image_predictor import SAM2ImagePredictor

        self.multimask = multimask
        self.predictor = SAM2ImagePredictor(build_sam2(config, ckpt_path=checkpoint, device="cpu"))

    def encode(self, rgb):
        self.predictor.set_image(rgb)

    def predict(self, case, mask_input=None):
        points = case.get("points", [])
        kwargs = {}
        if points:
            kwargs["point_coords"] = np.array([[x, y] for x, y, _ in points], np.float32)
            kwargs["point_labels"] = np.array([1 if p else 0 for _, _, p in points], np.int32)
        if "box" in case:
            kwargs["box"] = np.array(case["box"], np.float32)
        if mask_input is not None:
            kwargs["mask_input"] = mask_input[None]
        masks, scores, low = self.predictor.predict(multimask_output=self.multimask, **kwargs)
        k = int(np.argmax(scores))
        return masks[k] > 0, float(scores[k]), low[k]


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--models", required=True)
    parser.add_argument("--image", required=True)
    args = parser.parse_args()
    torch.set_num_threads(os.cpu_count() or 1)
    manifest = json.load(open(os.path.join(args.models, "manifest.json")))
    rgb = read_pnm(args.image)
    h, w = rgb.shape[:2]
    all_cases = cases(w, h)
    out = {"image": os.path.basename(args.image), "width": w, "height": h, "cases": all_cases, "pairs": []}
    meta_cache = {}
    for pair in manifest["pairs"]:
        t0 = time.time()
        enc = os.path.join(args.models, pair["encoder"])
        dec = os.path.join(args.models, pair["decoder"])
        pipelines = {"python": PythonPipeline(enc, dec, pair["family"])}
        # SAM2ImagePredictor's multimask_output=True returns three candidates, as the samexporter
        # decoder and ONNX Runtime's `_multi` decoder do; False returns the one chosen by
        # stability, as ONNX Runtime's default decoder does.
        key = (pair["model"], pair["multimask_decoder"])
        if key not in meta_cache:
            meta_cache[key] = MetaPipeline(pair["config"], os.path.join(args.models, pair["checkpoint"]),
                                           pair["multimask_decoder"])
        pipelines["meta"] = meta_cache[key]
        results = {}
        for source, pipeline in pipelines.items():
            pipeline.encode(rgb)
            logits_of = {}
            for case in all_cases:
                mask_input = logits_of.get(case.get("mask_from"))
                mask, score, logits = pipeline.predict(case, mask_input)
                logits_of[case["name"]] = np.asarray(logits, np.float32)
                results.setdefault(case["name"], {})[source] = {"score": score, "rle": rle(mask),
                                                                "area": int(mask.sum())}
        out["pairs"].append({"encoder": pair["encoder"], "decoder": pair["decoder"], "family": pair["family"],
                             "model": pair["model"], "results": results})
        say(f"{pair['decoder']}: {len(all_cases)} cases ({time.time() - t0:.0f} s)")
    path = os.path.join(args.models, "reference.json")
    with open(path + ".tmp", "w") as f:
        json.dump(out, f)
    os.replace(path + ".tmp", path)
    say(f"wrote {path}")


if __name__ == "__main__":
    main()
