"""Image encode of Meta's PyTorch SAM 3 on the CPU, for bench_sam3 (bench/src/bin/).

The model is rebuilt from an export's manifest.json (`--models`: sam2-export-sam3's folder; its
seed and sharpening record, so the weights are the export's) by the exporter's own `build`, as
tools/references/sam3_export_check.py does; then `Sam3Processor(model, device="cpu").set_image`
is timed on the image bench_sam3 encodes: `--side` × `--side` RGB, pixel i (row-major, three bytes
a pixel) = (i × 7919) mod 251, given as a uint8 [3, H, W] tensor. set_image runs Meta's transform
(resize to 1008², normalise) and the backbone's image path (the ViT and its neck): what the
library's `ConceptModel::encode` runs. One warm-up call, then `--repeat` timed calls.

Runs with SAM 3's venv (tools/setup/setup-sam3.sh). Prints one JSON line:
{"seconds": [...], "threads": n, "build_seconds": s, "side": n}.
"""

import argparse
import json
import os
import sys
import time
import warnings

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "sam2-tools"))

from sam2_tools import export_sam3 as export  # noqa: E402


def bench_image(side):
    """bench_sam3's image (bench/src/bin/bench_sam3.rs, `bench_image`), as a [3, H, W] array."""
    i = np.arange(side * side * 3, dtype=np.int64)
    hwc = ((i * 7919) % 251).astype(np.uint8).reshape(side, side, 3)
    return np.ascontiguousarray(hwc.transpose(2, 0, 1))


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", required=True)
    parser.add_argument("--side", type=int, default=1008)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    warnings.filterwarnings("ignore")
    manifest = json.load(open(os.path.join(args.models, "manifest.json")))
    start = time.perf_counter()
    torch, model = export.build(manifest["config"], manifest["checkpoint"], manifest["seed"],
                                export.default_vocab(), manifest.get("sharpening"))
    build_seconds = time.perf_counter() - start
    torch.set_num_threads(os.cpu_count() or 1)
    from sam3.model.sam3_image_processor import Sam3Processor

    processor = Sam3Processor(model, device="cpu")
    image = torch.from_numpy(bench_image(args.side))
    seconds = []
    with torch.inference_mode():
        for i in range(args.repeat + 1):
            time.sleep(0.04)
            t = time.perf_counter()
            state = processor.set_image(image)
            elapsed = time.perf_counter() - t
            del state
            if i > 0:
                seconds.append(elapsed)
    print(json.dumps({"seconds": seconds, "threads": torch.get_num_threads(),
                      "build_seconds": build_seconds, "side": args.side}))


if __name__ == "__main__":
    main()
