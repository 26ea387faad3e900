#!/usr/bin/env python3
"""Expected bytes of SAM 3's resize, for the library's bit-exact port (`src/preprocess/torchvision_u8.rs`).

Meta's `Sam3Processor` (PyPI `sam3`) squashes the RGB image to 1008x1008 with torchvision's
`v2.Resize(size=(1008, 1008))` on the uint8 CHW tensor `v2.functional.to_image` makes of it:
bilinear, antialiased, and (on an x86 CPU whose ATen capability is AVX2 or AVX512) computed on
the uint8 tensor itself by ATen's fixed-point kernel. This script runs that resize on generated
images of many sizes and writes the SHA-256 of each [3, 1008, 1008] output (C order) to
`testdata/sam3_resize.json`, which the Rust unit test regenerates and compares.

The generated images (height H, width W, RGB, row-major, 3 bytes a pixel; byte index i over the
H*W*3 bytes, y = i / (3W), x = (i / 3) % W, c = i % 3), all arithmetic on unsigned 32 bits:

* `noise`: byte i is the top 8 bits of mix(i * 0x9E3779B1 + H * 65536 + W), where
  mix(v): v ^= v >> 16; v *= 0x7FEB352D; v ^= v >> 15; v *= 0x846CA68B; v ^= v >> 16;
* `gradient`: c = 0: 255 x / max(W - 1, 1); c = 1: 255 y / max(H - 1, 1);
  c = 2: 255 (x + y) / max(W + H - 2, 1) (integer division);
* `stripes`: 255 if (x / 3 + y / 5 + c) is odd else 0 (hard edges, values at the ends of the range).

Run with the SAM 3 virtual environment (torch 2.10, torchvision 0.25):

    python tools/references/sam3_resize.py            # rewrite testdata/sam3_resize.json
    python tools/references/sam3_resize.py --check    # compare against it, write nothing
"""

import argparse
import hashlib
import json
import os
import sys

import numpy as np
import torch
import torchvision
from torchvision.transforms import v2

SIZE = 1008

# (height, width): shrinking and growing axes, one axis kept, by one pixel either way, exact 2x,
# one pixel, slivers, a 12 MP photo.
SIZES = [
    (480, 640),
    (600, 800),
    (1200, 1600),
    (333, 517),
    (2000, 1500),
    (1008, 1008),
    (700, 1300),
    (1, 1),
    (5, 3000),
    (3000, 5),
    (1009, 1007),
    (2016, 2016),
    (1008, 500),
    (3000, 1008),
    (3000, 4000),
]
PATTERNS = ["noise", "gradient", "stripes"]
# The 12 MP photo only as noise (the other patterns add nothing there but time).
ONLY_NOISE = {(3000, 4000)}

HERE = os.path.dirname(os.path.abspath(__file__))
JSON_PATH = os.path.join(HERE, "..", "..", "testdata", "sam3_resize.json")


def mix(v):
    v = v ^ (v >> np.uint32(16))
    v = v * np.uint32(0x7FEB352D)
    v = v ^ (v >> np.uint32(15))
    v = v * np.uint32(0x846CA68B)
    v = v ^ (v >> np.uint32(16))
    return v


def generate(pattern, h, w):
    """The H x W x 3 uint8 image the module doc describes."""
    if pattern == "noise":
        i = np.arange(h * w * 3, dtype=np.uint32)
        with np.errstate(over="ignore"):
            v = mix(i * np.uint32(0x9E3779B1) + np.uint32((h * 65536 + w) & 0xFFFFFFFF))
        return (v >> np.uint32(24)).astype(np.uint8).reshape(h, w, 3)
    y = np.arange(h, dtype=np.int64)[:, None]
    x = np.arange(w, dtype=np.int64)[None, :]
    if pattern == "gradient":
        r = 255 * x // max(w - 1, 1) + 0 * y
        g = 255 * y // max(h - 1, 1) + 0 * x
        b = 255 * (x + y) // max(w + h - 2, 1)
        return np.stack([r, g, b], axis=-1).astype(np.uint8)
    if pattern == "stripes":
        chans = [((x // 3 + y // 5 + c) % 2) * 255 for c in range(3)]
        return np.stack(chans, axis=-1).astype(np.uint8)
    raise ValueError(pattern)


def sha(a):
    return hashlib.sha256(np.ascontiguousarray(a).tobytes()).hexdigest()


def resize(hwc):
    """`Sam3Processor`'s resize on the CPU: to_image (a CHW view of the HWC array), v2.Resize."""
    out = v2.Resize(size=(SIZE, SIZE))(v2.functional.to_image(hwc))
    return out.contiguous().numpy()


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--check", action="store_true", help="compare with the committed JSON")
    args = ap.parse_args()

    capability = torch.backends.cpu.get_cpu_capability()
    if capability not in ("AVX2", "AVX512"):
        # Elsewhere torchvision resizes a float copy and rounds: another algorithm.
        sys.exit(f"ATen CPU capability {capability}: torchvision would not take the uint8 kernel")
    torch.set_num_threads(1)

    cases = []
    for h, w in SIZES:
        for pattern in PATTERNS:
            if (h, w) in ONLY_NOISE and pattern != "noise":
                continue
            img = generate(pattern, h, w)
            out = resize(img)
            assert out.shape == (3, SIZE, SIZE) and out.dtype == np.uint8
            # The memory layout the kernel sees must not matter: a contiguous CHW tensor gives
            # the same bytes as to_image's channels-last view.
            chw = torch.from_numpy(np.ascontiguousarray(img.transpose(2, 0, 1)))
            same = v2.Resize(size=(SIZE, SIZE))(chw).contiguous().numpy()
            assert np.array_equal(out, same), (h, w, pattern)
            cases.append(
                {
                    "height": h,
                    "width": w,
                    "pattern": pattern,
                    "input_sha256": sha(img),
                    "output_sha256": sha(out),
                }
            )
            print(f"{h}x{w} {pattern}: {cases[-1]['output_sha256'][:16]}", flush=True)

    doc = {
        "what": "SHA-256 of torchvision v2.Resize(size=(1008, 1008)) of generated uint8 RGB images "
        "(to_image of the HWC array, output [3, 1008, 1008] in C order); the generators are "
        "described in tools/references/sam3_resize.py",
        "torch": torch.__version__,
        "torchvision": torchvision.__version__,
        "cpu_capability": capability,
        "size": SIZE,
        "cases": cases,
    }
    if args.check:
        with open(JSON_PATH) as f:
            old = json.load(f)
        bad = [a for a, b in zip(cases, old["cases"]) if a != b] + (
            ["count"] if len(cases) != len(old["cases"]) else []
        )
        if bad:
            sys.exit(f"{len(bad)} case(s) differ from {JSON_PATH}: {bad[:3]}")
        print(f"all {len(cases)} cases as in {JSON_PATH}")
        return
    with open(JSON_PATH, "w") as f:
        json.dump(doc, f, indent=1)
        f.write("\n")
    print(f"wrote {len(cases)} cases to {JSON_PATH}")


if __name__ == "__main__":
    main()
