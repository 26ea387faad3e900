#!/usr/bin/env python3
"""Generate the bundled synthetic test images under testdata/.

Run once; the outputs are committed. Deterministic: the same bytes on every run
(seeded numpy, no floating-point decisions that depend on the platform beyond
IEEE arithmetic).

Outputs
  testdata/shapes.ppm            512x384 RGB (binary P6): flat-coloured shapes on a
                                 textured beige background
  testdata/shapes_<name>.pgm     ground-truth mask per shape (binary P5, 0/255)
  testdata/shapes.json           per shape: name, colour, click (x, y), bbox
                                 [x1, y1, x2, y2] (inclusive), twin_of
  testdata/demo.ppm              800x600 RGB demo picture
  testdata/demo.json             suggested click, box and negative click for the demo

Usage: python tools/models/make_testdata.py [--out testdata]
"""

import argparse
import json
import os

import numpy as np

SEED = 20240917


# ---------------------------------------------------------------------------
# Image I/O (binary Netpbm)
# ---------------------------------------------------------------------------

def write_ppm(path, rgb):
    h, w, c = rgb.shape
    assert c == 3 and rgb.dtype == np.uint8
    with open(path, "wb") as f:
        f.write(b"P6\n%d %d\n255\n" % (w, h))
        f.write(np.ascontiguousarray(rgb).tobytes())


def write_pgm(path, gray):
    h, w = gray.shape
    assert gray.dtype == np.uint8
    with open(path, "wb") as f:
        f.write(b"P5\n%d %d\n255\n" % (w, h))
        f.write(np.ascontiguousarray(gray).tobytes())


# ---------------------------------------------------------------------------
# Shape rasterisers: a pixel belongs to a shape when its centre (x+0.5, y+0.5)
# is inside. No anti-aliasing, so the ground truth is exactly the drawn region.
# ---------------------------------------------------------------------------

def pixel_centres(w, h):
    ys, xs = np.mgrid[0:h, 0:w].astype(np.float64)
    return xs + 0.5, ys + 0.5


def disc(w, h, cx, cy, r):
    x, y = pixel_centres(w, h)
    return (x - cx) ** 2 + (y - cy) ** 2 <= r * r


def ellipse(w, h, cx, cy, rx, ry):
    x, y = pixel_centres(w, h)
    return ((x - cx) / rx) ** 2 + ((y - cy) / ry) ** 2 <= 1.0


def rect(w, h, x1, y1, x2, y2):
    """Pixels x1..x2-1, y1..y2-1 (half-open in pixel indices)."""
    m = np.zeros((h, w), dtype=bool)
    m[y1:y2, x1:x2] = True
    return m


def rounded_rect(w, h, x1, y1, x2, y2, r):
    x, y = pixel_centres(w, h)
    cx = np.clip(x, x1 + r, x2 - r)
    cy = np.clip(y, y1 + r, y2 - r)
    return (x >= x1) & (x <= x2) & (y >= y1) & (y <= y2) & ((x - cx) ** 2 + (y - cy) ** 2 <= r * r)


def polygon(w, h, verts):
    """Even-odd point-in-polygon test at pixel centres."""
    x, y = pixel_centres(w, h)
    inside = np.zeros((h, w), dtype=bool)
    n = len(verts)
    for i in range(n):
        x0, y0 = verts[i]
        x1, y1 = verts[(i + 1) % n]
        if y0 == y1:
            continue
        crosses = ((y0 > y) != (y1 > y))
        xint = x0 + (y - y0) * (x1 - x0) / (y1 - y0)
        inside ^= crosses & (x < xint)
    return inside


def star(w, h, cx, cy, r_out, r_in, points=5, rot=-np.pi / 2):
    verts = []
    for k in range(2 * points):
        r = r_out if k % 2 == 0 else r_in
        a = rot + k * np.pi / points
        verts.append((cx + r * np.cos(a), cy + r * np.sin(a)))
    return polygon(w, h, verts)


# ---------------------------------------------------------------------------
# Background texture
# ---------------------------------------------------------------------------

def textured_background(rng, w, h, base, grad, noise_sigma, wave_amp):
    x, y = pixel_centres(w, h)
    xn = x / w - 0.5
    yn = y / h - 0.5
    base = np.asarray(base, dtype=np.float64)
    img = np.empty((h, w, 3), dtype=np.float64)
    for c in range(3):
        img[..., c] = base[c] + grad[0] * xn + grad[1] * yn
    # low-frequency "paper" waves, the same on all channels (a luminance texture)
    wave = wave_amp * (np.sin(2 * np.pi * (3.0 * xn + 1.3 * yn)) * 0.6
                       + np.sin(2 * np.pi * (-1.7 * xn + 2.9 * yn) + 1.0) * 0.4)
    img += wave[..., None]
    # fine grain noise (independent per channel, low amplitude)
    img += rng.normal(0.0, noise_sigma, size=(h, w, 3))
    return img


def finish(img):
    return np.clip(np.rint(img), 0, 255).astype(np.uint8)


def bbox_of(mask):
    ys, xs = np.nonzero(mask)
    return [int(xs.min()), int(ys.min()), int(xs.max()), int(ys.max())]


# ---------------------------------------------------------------------------
# shapes.ppm
# ---------------------------------------------------------------------------

SHAPES_W, SHAPES_H = 512, 384

SHAPES = [
    # name, colour, mask builder, click point, twin_of
    ("red_disc", (205, 45, 50), lambda w, h: disc(w, h, 100.0, 112.0, 56.0), (100, 112), None),
    ("green_rect", (45, 150, 75), lambda w, h: rect(w, h, 200, 45, 316, 141), (258, 93), None),
    ("yellow_triangle", (235, 205, 45),
     lambda w, h: polygon(w, h, [(430.0, 28.0), (500.0, 172.0), (360.0, 172.0)]), (430, 118), None),
    ("twin_left", (45, 85, 190), lambda w, h: rect(w, h, 60, 236, 152, 328), (106, 282), "twin_right"),
    ("twin_right", (45, 85, 190), lambda w, h: rect(w, h, 364, 236, 456, 328), (410, 282), "twin_left"),
]


def make_shapes(rng, out):
    w, h = SHAPES_W, SHAPES_H
    img = textured_background(rng, w, h, base=(176, 166, 146), grad=(14.0, -10.0),
                              noise_sigma=3.0, wave_amp=4.0)
    entries = []
    union = np.zeros((h, w), dtype=bool)
    for name, colour, build, click, twin in SHAPES:
        m = build(w, h)
        assert not (m & union).any(), name
        union |= m
        img[m] = np.asarray(colour, dtype=np.float64)
        write_pgm(os.path.join(out, "shapes_%s.pgm" % name), (m * 255).astype(np.uint8))
        cx, cy = click
        assert m[cy, cx], name
        entries.append({
            "name": name,
            "colour": list(colour),
            "click": [cx, cy],
            "bbox": bbox_of(m),
            "area": int(m.sum()),
            "twin_of": twin,
            "mask": "shapes_%s.pgm" % name,
        })
    # shapes must be well apart: no two within 20 px of each other
    from itertools import combinations
    masks = {e["name"]: b(w, h) for (e, (_, _, b, _, _)) in zip(entries, SHAPES)}
    for a, b in combinations(masks, 2):
        ba, bb = bbox_of(masks[a]), bbox_of(masks[b])
        gapx = max(bb[0] - ba[2], ba[0] - bb[2])
        gapy = max(bb[1] - ba[3], ba[1] - bb[3])
        assert max(gapx, gapy) >= 20, (a, b, gapx, gapy)
    write_ppm(os.path.join(out, "shapes.ppm"), finish(img))
    meta = {
        "image": "shapes.ppm",
        "width": w,
        "height": h,
        "coordinates": "image pixels; click is a pixel index (x, y) well inside the shape; "
                       "bbox is [x1, y1, x2, y2] with inclusive pixel bounds",
        "shapes": entries,
    }
    with open(os.path.join(out, "shapes.json"), "w") as f:
        json.dump(meta, f, indent=2)
        f.write("\n")


# ---------------------------------------------------------------------------
# demo.ppm
# ---------------------------------------------------------------------------

DEMO_W, DEMO_H = 800, 600


def make_demo(rng, out):
    w, h = DEMO_W, DEMO_H
    img = textured_background(rng, w, h, base=(150, 160, 168), grad=(-16.0, 18.0),
                              noise_sigma=3.5, wave_amp=5.0)
    shapes = [
        ("orange_ellipse", (240, 140, 40), ellipse(w, h, 190.0, 170.0, 130.0, 80.0), (190, 170)),
        ("purple_star", (130, 60, 170), star(w, h, 580.0, 180.0, 120.0, 52.0), (580, 190)),
        ("teal_left", (30, 150, 140), rounded_rect(w, h, 70.0, 360.0, 250.0, 520.0, 24.0), (160, 440)),
        ("teal_right", (30, 150, 140), rounded_rect(w, h, 540.0, 380.0, 720.0, 540.0, 24.0), (630, 460)),
        ("pink_disc", (235, 110, 170), disc(w, h, 395.0, 430.0, 70.0), (395, 430)),
    ]
    union = np.zeros((h, w), dtype=bool)
    entries = {}
    for name, colour, m, click in shapes:
        assert not (m & union).any(), name
        assert m[click[1], click[0]], name
        union |= m
        img[m] = np.asarray(colour, dtype=np.float64)
        entries[name] = {"name": name, "colour": list(colour), "click": list(click), "bbox": bbox_of(m)}
    write_ppm(os.path.join(out, "demo.ppm"), finish(img))
    eb = entries["orange_ellipse"]["bbox"]
    meta = {
        "image": "demo.ppm",
        "width": w,
        "height": h,
        "coordinates": "image pixels",
        "click": {"point": entries["purple_star"]["click"], "label": 1, "target": "purple_star"},
        "box": {"box": [eb[0] - 8, eb[1] - 8, eb[2] + 8, eb[3] + 8], "target": "orange_ellipse"},
        "negative": {
            "positive": entries["teal_left"]["click"],
            "negative": entries["teal_right"]["click"],
            "target": "teal_left",
            "note": "teal_left and teal_right have the same colour: the positive click alone selects "
                    "both, the negative click removes teal_right",
        },
        "shapes": list(entries.values()),
    }
    with open(os.path.join(out, "demo.json"), "w") as f:
        json.dump(meta, f, indent=2)
        f.write("\n")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    here = os.path.dirname(os.path.abspath(__file__))
    ap.add_argument("--out", default=os.path.join(here, "..", "..", "testdata"))
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)
    rng = np.random.default_rng(SEED)
    make_shapes(rng, args.out)
    make_demo(rng, args.out)
    for name in sorted(os.listdir(args.out)):
        p = os.path.join(args.out, name)
        print("%-32s %9d bytes" % (name, os.path.getsize(p)))


if __name__ == "__main__":
    main()
