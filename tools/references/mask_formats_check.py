#!/usr/bin/env python3
"""Checks libsam2's mask formats against pycocotools, through the C ABI (ctypes).

    python tools/references/mask_formats_check.py --lib target/release/libsam2.so --models models --testdata testdata

For every shape of testdata/shapes.ppm, a click predicts a mask with the generated tiny model;
then, for each mask and for random masks made by the tests below:
  - sam2_masks_rle_string, decoded by pycocotools.mask.decode, equals the dense mask
    (sam2_masks_mask); pycocotools.mask.encode of the dense mask gives the same string;
  - sam2_masks_rle's uncompressed counts, turned into a compressed RLE by pycocotools
    (frPyObjects), decode to the same mask;
  - sam2_masks_polygons at tolerance 0, rasterised back here (a pixel is inside when its centre
    is inside an odd number of rings), give the mask exactly (IoU 1.0, required >= 0.99), and at
    tolerance 1 give no more points (and, on the predicted shapes, still IoU >= 0.9);
  - sam2_masks_copy_mask and sam2_masks_crop give the mask and its box.
Prints one line per check and exits non-zero on the first failure.
"""
import argparse
import ctypes as C
import json
import os
import sys

import numpy as np
import pycocotools.mask as cocomask


class Point(C.Structure):
    _fields_ = [("x", C.c_float), ("y", C.c_float), ("label", C.c_int32)]


class Prompt(C.Structure):
    _fields_ = [("points", C.POINTER(Point)), ("point_count", C.c_size_t), ("has_box", C.c_int32),
                ("box", C.c_float * 4), ("mask_input", C.POINTER(C.c_float)), ("mask_input_len", C.c_size_t)]


class Ring(C.Structure):
    _fields_ = [("point_count", C.c_uint32), ("is_hole", C.c_uint32)]


BUFFER_TOO_SMALL = 3


def read_ppm(path):
    with open(path, "rb") as f:
        data = f.read()
    parts = data.split(maxsplit=4)
    assert parts[0] == b"P6", path
    w, h = int(parts[1]), int(parts[2])
    return np.frombuffer(parts[4][: w * h * 3], np.uint8).reshape(h, w, 3), w, h


def rasterize(points, rings, w, h):
    """Even-odd fill at pixel centres of rings given as (flat x,y floats, [(count, is_hole)])."""
    edges = []
    at = 0
    for count, _ in rings:
        ring = points[at: at + count]
        at += count
        for i in range(count):
            edges.append((ring[i], ring[(i + 1) % count]))
    mask = np.zeros((h, w), np.uint8)
    centres = np.arange(w) + 0.5
    for y in range(h):
        cy = y + 0.5
        xs = sorted(a[0] + (cy - a[1]) / (b[1] - a[1]) * (b[0] - a[0])
                    for a, b in edges if (a[1] <= cy) != (b[1] <= cy))
        for x0, x1 in zip(xs[0::2], xs[1::2]):
            mask[y, (centres >= x0) & (centres < x1)] = 1
    return mask


class Lib:
    def __init__(self, path):
        self.lib = C.CDLL(path)
        self.lib.sam2_last_error_message.argtypes = [C.c_char_p, C.c_size_t, C.POINTER(C.c_size_t)]

    def __getattr__(self, name):
        return getattr(self.lib, name)

    def check(self, status, what):
        if status != 0:
            buf = C.create_string_buffer(4096)
            self.lib.sam2_last_error_message(buf, 4096, None)
            raise SystemExit(f"FAIL {what}: status {status}: {buf.value.decode()}")


def check_mask(lib, masks, index, w, h, name, smooth=True):
    data, length = C.POINTER(C.c_uint8)(), C.c_size_t()
    lib.check(lib.sam2_masks_mask(masks, C.c_size_t(index), C.byref(data), C.byref(length)), "mask")
    dense = np.ctypeslib.as_array(data, shape=(length.value,)).reshape(h, w).copy()

    needed = C.c_size_t()
    status = lib.sam2_masks_rle_string(masks, C.c_size_t(index), None, C.c_size_t(0), C.byref(needed))
    assert status == BUFFER_TOO_SMALL, status
    buf = C.create_string_buffer(needed.value)
    lib.check(lib.sam2_masks_rle_string(masks, C.c_size_t(index), buf, needed, C.byref(needed)), "rle_string")
    rle = {"size": [h, w], "counts": buf.value}
    decoded = cocomask.decode(rle)
    assert decoded.shape == (h, w) and np.array_equal(decoded, dense), f"{name}: pycocotools decodes another mask"
    ours = cocomask.encode(np.asfortranarray(dense))
    assert ours["counts"] == buf.value, f"{name}: pycocotools encodes {ours['counts'][:40]!r}, sam2 {buf.value[:40]!r}"
    assert int(cocomask.area(rle)) == int(dense.sum())

    count = C.c_size_t()
    assert lib.sam2_masks_rle(masks, C.c_size_t(index), None, C.c_size_t(0), C.byref(count)) == BUFFER_TOO_SMALL
    counts = (C.c_uint32 * count.value)()
    lib.check(lib.sam2_masks_rle(masks, C.c_size_t(index), counts, count, C.byref(count)), "rle")
    uncompressed = cocomask.frPyObjects({"size": [h, w], "counts": list(counts)}, h, w)
    assert np.array_equal(cocomask.decode(uncompressed), dense), f"{name}: uncompressed counts"

    box = (C.c_uint32 * 4)()
    crop_size = C.c_size_t()
    assert lib.sam2_masks_crop(masks, C.c_size_t(index), None, C.c_size_t(0), box, C.byref(crop_size)) in (0, BUFFER_TOO_SMALL)
    crop = (C.c_uint8 * max(crop_size.value, 1))()
    lib.check(lib.sam2_masks_crop(masks, C.c_size_t(index), crop, crop_size, box, C.byref(crop_size)), "crop")
    if dense.any():
        x0, y0, x1, y1 = list(box)
        got = np.frombuffer(crop, np.uint8)[: crop_size.value].reshape(y1 - y0 + 1, x1 - x0 + 1)
        assert np.array_equal(got, dense[y0: y1 + 1, x0: x1 + 1]), f"{name}: crop"
        bx, by, bw, bh = cocomask.toBbox(rle)
        assert (bx, by, bw, bh) == (x0, y0, x1 - x0 + 1, y1 - y0 + 1), f"{name}: box {list(box)} vs COCO {bx, by, bw, bh}"
    copy = (C.c_uint8 * (w * h))()
    lib.check(lib.sam2_masks_copy_mask(masks, C.c_size_t(index), copy, C.c_size_t(w * h)), "copy_mask")
    assert np.array_equal(np.frombuffer(copy, np.uint8).reshape(h, w), dense), f"{name}: copy"

    results = []
    for tolerance in (0.0, 1.0):
        n_points, n_rings = C.c_size_t(), C.c_size_t()
        st = lib.sam2_masks_polygons(masks, C.c_size_t(index), C.c_float(tolerance), None, C.c_size_t(0), None,
                                     C.c_size_t(0), C.byref(n_points), C.byref(n_rings))
        assert st in (0, BUFFER_TOO_SMALL), st
        pts = (C.c_float * (2 * n_points.value + 2))()
        rings = (Ring * (n_rings.value + 1))()
        lib.check(lib.sam2_masks_polygons(masks, C.c_size_t(index), C.c_float(tolerance), pts, n_points, rings,
                                          n_rings, C.byref(n_points), C.byref(n_rings)), "polygons")
        flat = list(pts)[: 2 * n_points.value]
        points = list(zip(flat[0::2], flat[1::2]))
        ring_list = [(r.point_count, r.is_hole) for r in list(rings)[: n_rings.value]]
        back = rasterize(points, ring_list, w, h)
        union = np.logical_or(back, dense).sum()
        iou = 1.0 if union == 0 else np.logical_and(back, dense).sum() / union
        results.append((tolerance, n_points.value, len(ring_list), sum(h for _, h in ring_list), iou))
    (t0, p0, r0, holes0, iou0), (t1, p1, _, _, iou1) = results
    assert iou0 >= 0.99, f"{name}: polygons at tolerance 0 give IoU {iou0}"
    assert p1 <= p0 and (iou1 >= 0.9 or not smooth), f"{name}: polygons at tolerance 1 give IoU {iou1} with {p1} points"
    print(f"ok {name}: {int(dense.sum())} px, RLE {len(buf.value)} chars = pycocotools; "
          f"polygons {r0} rings ({holes0} holes) {p0} points IoU {iou0:.4f}; tolerance 1: {p1} points IoU {iou1:.4f}")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--lib", required=True)
    ap.add_argument("--models", required=True)
    ap.add_argument("--testdata", required=True)
    ap.add_argument("--onnxruntime", default=os.environ.get("SAM2_ONNXRUNTIME_PATH"))
    a = ap.parse_args()
    lib = Lib(a.lib)
    lib.check(lib.sam2_runtime_init(a.onnxruntime.encode() if a.onnxruntime else None), "runtime_init")
    enc, pred, emb, masks = C.c_void_p(), C.c_void_p(), C.c_void_p(), C.c_void_p()
    lib.check(lib.sam2_encoder_new(os.path.join(a.models, "tiny_a_encoder.onnx").encode(), None, C.byref(enc)), "encoder")
    lib.check(lib.sam2_predictor_new(enc, os.path.join(a.models, "tiny_a_decoder.onnx").encode(), None, C.byref(pred)),
              "predictor")
    pixels, w, h = read_ppm(os.path.join(a.testdata, "shapes.ppm"))
    buf = pixels.tobytes()
    lib.check(lib.sam2_encode(enc, buf, C.c_size_t(len(buf)), C.c_uint32(w), C.c_uint32(h), C.c_size_t(w * 3),
                              C.c_uint32(0), C.byref(emb)), "encode")
    shapes = json.load(open(os.path.join(a.testdata, "shapes.json")))["shapes"]
    points = [Point(s["click"][0], s["click"][1], 1) for s in shapes]
    prompts = (Prompt * len(shapes))(*[Prompt(C.pointer(points[i]), 1, 0, (C.c_float * 4)(), None, 0)
                                       for i in range(len(shapes))])
    lib.check(lib.sam2_predict(pred, emb, prompts, C.c_size_t(len(shapes)), None, C.byref(masks)), "predict")
    for i, s in enumerate(shapes):
        check_mask(lib, masks, i, w, h, s["name"])
    lib.sam2_masks_free(masks)
    lib.sam2_embedding_free(emb)
    lib.sam2_predictor_free(pred)
    lib.sam2_encoder_free(enc)
    checked = len(shapes)

    # Shapes no model draws: a ring with a hole holding an island, pixels touching at corners,
    # a mask touching every border, random noise, an empty and a full mask.
    if not hasattr(lib.lib, "sam2_test_masks_from_bytes"):
        raise SystemExit("FAIL: the library lacks sam2_test_masks_from_bytes: build it with --features test-support")
    yy, xx = np.mgrid[0:60, 0:80]
    r = np.hypot(xx - 40, yy - 30)
    rng = np.random.default_rng(7)
    samples = {
        "ring with an island": ((r < 25) & (r >= 12)) | (r < 5),
        "diagonal touches": (xx + yy) % 2 == 0,
        "frame on the borders": (xx == 0) | (yy == 0) | (xx == 79) | (yy == 59),
        "random noise": rng.random((60, 80)) < 0.45,
        "empty": np.zeros((60, 80), bool),
        "full": np.ones((60, 80), bool),
    }
    for name, sample in samples.items():
        data = np.ascontiguousarray(sample.astype(np.uint8))
        one = C.c_void_p()
        lib.check(lib.sam2_test_masks_from_bytes(data.ctypes.data_as(C.POINTER(C.c_uint8)), C.c_uint32(80),
                                                 C.c_uint32(60), C.byref(one)), "test_masks_from_bytes")
        check_mask(lib, one, 0, 80, 60, name, smooth=False)
        lib.sam2_masks_free(one)
        checked += 1
    print(f"{checked} passed, 0 failed")


if __name__ == "__main__":
    main()
