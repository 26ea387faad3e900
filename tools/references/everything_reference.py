#!/usr/bin/env python3
"""Reference masks for segment everything (issue 20): Meta's `SAM2AutomaticMaskGenerator` on the
checkpoint the real exports were made from (seeded random weights, sam2-export-image), with
the parameters tests/it/everything_real.rs gives the library; or, for EdgeTAM's export
(sam2-export-edgetam, whose manifest says `"family": "edgetam"`), EdgeTAM's own
`SAM2AutomaticMaskGenerator` (its fork of the same code) on the weights of that export, run in
EdgeTAM's venv (tools/setup/setup-edgetam.sh), with the same parameters.

Random weights predict IoUs around 0.5, so SAM2's default thresholds (0.8, 0.95) keep almost
nothing; CONFIGS lowers them so that the reference keeps a few hundred masks, and uses a 16 x 16
grid to keep the run short. Everything else is SAM2's default (batches of 64, stability offset
1.0, no crops, multimask).

Cached by content: the result goes to `<models>/everything-reference-<hash>.json`, the hash
covering this script, the image and the manifest; when that file exists nothing is imported or
computed. Prints the path of the JSON on its last line.

    python tools/references/everything_reference.py --models "$SAM2_REAL_MODELS" --image testdata/demo.ppm
    "$SAM2_EDGETAM_PYTHON" tools/references/everything_reference.py --models "$SAM2_EDGETAM_MODELS" --image testdata/demo.ppm

`--bench` instead times Meta's generator with SAM2's default parameters on an image (for
scripts/bench.sh; nothing cached) and prints one JSON line.
"""

import argparse
import hashlib
import json
import os
import sys
import time

MODEL = "sam2.1_hiera_tiny"
# Two runs: `many` keeps a few hundred masks (box NMS off: random-weight masks cover most of the
# image, so their boxes coincide and any NMS below 1 keeps a handful); `nms` is the same with
# SAM2's box NMS, to compare what the NMS keeps. With one crop the box NMS is the generator's last
# step over the masks (`_process_crop`: `batched_nms` on the masks' boxes, scored by predicted
# IoU; an NMS at 1.0 keeps every mask and only orders them), so `nms` is computed from `many`'s
# masks by that same call instead of a second generator run (89 s on 2 cores). Random-weight logits seldom leave [-1, 1], so
# the stability score (pixels above +1 over pixels above -1) is near 0 for every mask: its filter
# is off, and the scores are compared instead.
COMMON = {
    "points_per_side": 16,
    "points_per_batch": 64,
    "pred_iou_thresh": 0.5,
    "stability_score_thresh": 0.0,
    "stability_score_offset": 1.0,
    "mask_threshold": 0.0,
    "crop_n_layers": 0,
    "multimask_output": True,
}
CONFIGS = {
    "many": dict(COMMON, box_nms_thresh=1.0),
    "nms": dict(COMMON, box_nms_thresh=0.7),
}
# EdgeTAM: `many` alone (its masks cover the image even more alike than SAM2's: SAM2's box NMS
# keeps one of them, which tells nothing `many` does not, at the cost of a second generator run).
EDGETAM_CONFIGS = ["many"]


def say(msg):
    print(f"[everything-reference] {msg}", file=sys.stderr, flush=True)


def digest(*paths):
    h = hashlib.sha256()
    for p in paths:
        with open(p, "rb") as f:
            h.update(f.read())
    return h.hexdigest()[:16]


def generator(models, params):
    """The model's pair (the decoder the library runs) and Meta's generator on its checkpoint."""
    import torch
    from sam2.automatic_mask_generator import SAM2AutomaticMaskGenerator

    torch.set_num_threads(os.cpu_count() or 1)
    manifest = json.load(open(os.path.join(models, "manifest.json")))
    if manifest.get("family") == "edgetam":
        from sam2_tools import edgetam_model  # EdgeTAM as its own builder makes it, without downloads

        # the multimask decoder of ONNX Runtime's tools (the generator asks for three masks)
        pair = next(p for p in manifest["pairs"] if p["decoder"].endswith("_multi.onnx"))
        model = edgetam_model.build(video=False, checkpoint=os.path.join(models, manifest["checkpoint"]))
    else:
        from sam2.build_sam import build_sam2

        pair = next(p for p in manifest["pairs"] if p["model"] == MODEL and p["family"] == "samexporter")
        model = build_sam2(pair["config"], ckpt_path=os.path.join(models, pair["checkpoint"]), device="cpu")
    return pair, SAM2AutomaticMaskGenerator(model, output_mode="uncompressed_rle", **params)


def box_nms(many, params):
    """A run that differs from `many` only in its box NMS threshold, from `many`'s masks: the
    `batched_nms` call of Meta's `_process_crop` on the same boxes (x0, y0, x1, y1 from the
    records' integer x, y, w, h) and float32 scores, keeping its order (highest score first)."""
    import torch
    from torchvision.ops.boxes import batched_nms

    masks = many["masks"]
    boxes = torch.tensor([[x, y, x + w, y + h] for x, y, w, h in (m["bbox_xywh"] for m in masks)])
    scores = torch.tensor([m["predicted_iou"] for m in masks], dtype=torch.float32)
    t0 = time.time()
    keep = batched_nms(boxes.float(), scores, torch.zeros(len(masks)), iou_threshold=params["box_nms_thresh"])
    seconds = many["seconds"] + time.time() - t0
    return {"params": params, "seconds": seconds, "derived_from": "many", "masks": [masks[i] for i in keep.tolist()]}


def read_image(path):
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    from reference_check import read_pnm  # the project's one PPM reader in Python

    return read_pnm(path)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--models", required=True)
    parser.add_argument("--image", required=True)
    parser.add_argument("--bench", action="store_true")
    parser.add_argument("--repeat", type=int, default=1)
    args = parser.parse_args()

    if args.bench:
        rgb = read_image(args.image)
        _, gen = generator(args.models, {})  # SAM2's defaults
        import torch

        with torch.inference_mode():
            gen.predictor.set_image(rgb)  # warm-up: the first call builds caches
        times = []
        for _ in range(args.repeat):
            t0 = time.perf_counter()
            anns = gen.generate(rgb)
            times.append(time.perf_counter() - t0)
        print(json.dumps({"seconds": times, "masks": len(anns), "threads": torch.get_num_threads()}))
        return

    key = digest(os.path.abspath(__file__), args.image, os.path.join(args.models, "manifest.json"))
    path = os.path.join(args.models, f"everything-reference-{key}.json")
    if os.path.exists(path):
        print(path)
        return
    rgb = read_image(args.image)
    h, w = rgb.shape[:2]
    out = {"image": os.path.basename(args.image), "width": w, "height": h, "runs": {}}
    edgetam = json.load(open(os.path.join(args.models, "manifest.json"))).get("family") == "edgetam"
    for name, params in CONFIGS.items():
        if edgetam and name not in EDGETAM_CONFIGS:
            continue
        if name != "many" and params == dict(CONFIGS["many"], box_nms_thresh=params["box_nms_thresh"]):
            out["runs"][name] = box_nms(out["runs"]["many"], params)
            say(f"{name}: {len(out['runs'][name]['masks'])} masks by box NMS of `many`'s")
            continue
        pair, gen = generator(args.models, params)
        out["model"] = pair["model"]
        say(f"{pair['model']} ({pair['checkpoint']}), {w}x{h}, {name}: {params}")
        t0 = time.time()
        anns = gen.generate(rgb)
        seconds = time.time() - t0
        say(f"{name}: {len(anns)} masks in {seconds:.1f} s")
        out["encoder"], out["decoder"] = pair["encoder"], pair["decoder"]
        out["runs"][name] = {
            "params": params,
            "seconds": seconds,
            "masks": [
                {
                    "counts": a["segmentation"]["counts"],
                    "bbox_xywh": a["bbox"],
                    "area": int(a["area"]),
                    "predicted_iou": a["predicted_iou"],
                    "stability_score": a["stability_score"],
                    "point": a["point_coords"][0],
                    "crop_box_xywh": a["crop_box"],
                }
                for a in anns
            ],
        }
    with open(path + ".tmp", "w") as f:
        json.dump(out, f)
    os.replace(path + ".tmp", path)
    print(path)


if __name__ == "__main__":
    main()
