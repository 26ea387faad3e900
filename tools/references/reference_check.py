#!/usr/bin/env python3
"""Python reference client for the synthetic SAM2 models (and any real export).

    python tools/references/reference_check.py --models models --testdata testdata [--dump models/reference]

The Rust pipeline is compared with this file. Pre/post-processing is plain numpy,
written from the public SAM2 conventions (as used by samexporter's sam2_onnx.py,
ibaiGorordo's ONNX-SAM2 and ONNX Runtime's SAM2 predictor), and specified exactly
so that it can be reproduced bit for bit:

Pre-processing (image u8 RGB, H x W -> tensor [1,3,1024,1024]):
  per axis (source size S, destination size D = 1024), in float64:
      src = max((d + 0.5) * (S / D) - 0.5, 0)
      i0  = floor(src);  i1 = min(i0 + 1, S - 1);  i0 = min(i0, S - 1)
      w1  = src - floor(src);  w0 = 1 - w1          (then both cast to float32)
  value (float32, this exact order, no FMA):
      v = wy0 * (wx0 * p[y0,x0] + wx1 * p[y0,x1]) + wy1 * (wx0 * p[y1,x0] + wx1 * p[y1,x1])
  normalise (float32):  n = (v / 255 - mean[c]) / std[c],
      mean = (0.485, 0.456, 0.406), std = (0.229, 0.224, 0.225) as float32 constants
  layout NCHW; float16 models get n.astype(float16) (round to nearest even).
  This is bilinear with half-pixel centres and edge clamping (cv2.INTER_LINEAR /
  torch bilinear align_corners=False, no antialias), computed in float without
  rounding to u8 in between.

Prompts:
  point (x, y) in image pixels -> (float32(x) / float32(W)) * 1024, (float32(y) / float32(H)) * 1024
  (float32 arithmetic, the order samexporter uses); labels 1 positive, 0 negative;
  a box [x1,y1,x2,y2] becomes two points labelled 2 and 3 placed BEFORE the clicks
  (SAM2's own order); rows of a batch are padded to the longest with (0, 0) label -1.
  No extra padding point is appended by the client: every SAM2 exporter appends it
  inside the graph.

Post-processing:
  contract A: low-res logits [256,256] resized to H x W with the same bilinear formula
              (S = 256, D = H or W) in float32, mask = logits > 0
  contract B: masks from the graph (already H x W), mask = value > 0
  contract C: bool masks from the graph
  best candidate = argmax(iou_predictions) (first on ties).
"""

import argparse
import hashlib
import json
import os
import sys

import numpy as np
import onnxruntime as ort

MEAN = np.array([0.485, 0.456, 0.406], dtype=np.float32)
STD = np.array([0.229, 0.224, 0.225], dtype=np.float32)
MODEL_SIZE = 1024
LOWRES = 256

# names by contract
CONTRACTS = {
    "A": {"enc": ("high_res_feats_0", "high_res_feats_1", "image_embed"),
          "mask_in": "mask_input", "has_mask": "has_mask_input", "size": None},
    "B": {"enc": ("high_res_feats_0", "high_res_feats_1", "image_embed"),
          "mask_in": "mask_input", "has_mask": "has_mask_input", "size": "orig_im_size"},
    "C": {"enc": ("image_features_0", "image_features_1", "image_embeddings"),
          "mask_in": "input_masks", "has_mask": "has_input_masks", "size": "original_image_size"},
}


# ---------------------------------------------------------------------------
# Image I/O
# ---------------------------------------------------------------------------

def read_pnm(path):
    """Binary PPM (P6) / PGM (P5), maxval 255. Returns uint8 HxWx3 or HxW."""
    with open(path, "rb") as f:
        data = f.read()
    fields, i = [], 0
    while len(fields) < 4:
        while data[i:i + 1].isspace():
            i += 1
        if data[i:i + 1] == b"#":
            while data[i:i + 1] not in (b"\n", b""):
                i += 1
            continue
        j = i
        while not data[j:j + 1].isspace():
            j += 1
        fields.append(data[i:j])
        i = j
    i += 1  # exactly one whitespace byte after maxval
    magic, w, h, maxval = fields[0], int(fields[1]), int(fields[2]), int(fields[3])
    assert maxval == 255, "only 8-bit PNM"
    ch = {b"P6": 3, b"P5": 1}[magic]
    arr = np.frombuffer(data, dtype=np.uint8, count=w * h * ch, offset=i)
    return arr.reshape(h, w, ch) if ch == 3 else arr.reshape(h, w)


# ---------------------------------------------------------------------------
# Exact bilinear resize (half-pixel centres, edge clamp, no antialias)
# ---------------------------------------------------------------------------

def axis_table(src_size, dst_size):
    d = np.arange(dst_size, dtype=np.float64)
    src = (d + 0.5) * (float(src_size) / float(dst_size)) - 0.5
    src = np.maximum(src, 0.0)
    fl = np.floor(src)
    i0 = np.minimum(fl.astype(np.int64), src_size - 1)
    i1 = np.minimum(i0 + 1, src_size - 1)
    w1 = src - fl
    w0 = 1.0 - w1
    return i0, i1, w0.astype(np.float32), w1.astype(np.float32)


def resize_bilinear(planes, dst_h, dst_w):
    """planes: float32 [C, S_h, S_w] -> float32 [C, dst_h, dst_w]."""
    planes = np.asarray(planes, dtype=np.float32)
    _, sh, sw = planes.shape
    y0, y1, wy0, wy1 = axis_table(sh, dst_h)
    x0, x1, wx0, wx1 = axis_table(sw, dst_w)
    wy0, wy1 = wy0[:, None], wy1[:, None]
    out = np.empty((planes.shape[0], dst_h, dst_w), dtype=np.float32)
    for c in range(planes.shape[0]):
        p = planes[c]
        r0, r1 = p[y0], p[y1]                      # [dst_h, S_w]
        top = wx0 * r0[:, x0] + wx1 * r0[:, x1]     # float32, two products then one add
        bot = wx0 * r1[:, x0] + wx1 * r1[:, x1]
        out[c] = wy0 * top + wy1 * bot
    return out


def preprocess(rgb, dtype=np.float32):
    """uint8 HxWx3 RGB -> [1,3,1024,1024] normalised tensor."""
    planes = rgb.transpose(2, 0, 1).astype(np.float32)
    v = resize_bilinear(planes, MODEL_SIZE, MODEL_SIZE)
    # (v/255 - mean)/std as one multiply and one add per value, with the two constants of each
    # channel computed in float64 and rounded once to float32 (the library does the same).
    mean64 = np.array([0.485, 0.456, 0.406], dtype=np.float64)
    std64 = np.array([0.229, 0.224, 0.225], dtype=np.float64)
    scale = (1.0 / (255.0 * std64)).astype(np.float32)
    bias = (-mean64 / std64).astype(np.float32)
    n = v * scale[:, None, None] + bias[:, None, None]
    return n[None].astype(dtype)


def upsample_logits(lowres, h, w):
    """float32 [M,256,256] -> float32 [M,h,w]."""
    return resize_bilinear(lowres, h, w)


# ---------------------------------------------------------------------------
# Prompts
# ---------------------------------------------------------------------------

def build_prompt_rows(prompts, width, height):
    """prompts: list of {"points": [[x, y, label], ...], "box": [x1,y1,x2,y2] | None}.
    Returns coords float32 [L,N,2] (1024 frame), labels float32 [L,N]."""
    rows = []
    for p in prompts:
        pts = []
        if p.get("box") is not None:
            x1, y1, x2, y2 = p["box"]
            pts += [(x1, y1, 2), (x2, y2, 3)]
        pts += [tuple(q) for q in p.get("points", [])]
        rows.append(pts)
    n = max(len(r) for r in rows)
    coords = np.zeros((len(rows), n, 2), dtype=np.float32)
    labels = np.full((len(rows), n), -1.0, dtype=np.float32)
    for i, r in enumerate(rows):
        for j, (x, y, lab) in enumerate(r):
            coords[i, j, 0] = np.float32(x)
            coords[i, j, 1] = np.float32(y)
            labels[i, j] = lab
    # scale in float32: (x / W) * 1024, (y / H) * 1024
    coords[..., 0] = coords[..., 0] / np.float32(width) * np.float32(MODEL_SIZE)
    coords[..., 1] = coords[..., 1] / np.float32(height) * np.float32(MODEL_SIZE)
    return coords, labels


# ---------------------------------------------------------------------------
# Model pair
# ---------------------------------------------------------------------------

def detect_contract(dec_inputs, dec_outputs):
    names = set(dec_inputs)
    if "image_embeddings" in names and "original_image_size" in names:
        return "C"
    if "image_embed" in names and "orig_im_size" in names:
        return "B"
    if "image_embed" in names:
        return "A"
    raise ValueError("unknown decoder contract: inputs %s outputs %s" % (sorted(dec_inputs), dec_outputs))


class Pair:
    def __init__(self, models_dir, entry, threads=2):
        so = ort.SessionOptions()
        so.intra_op_num_threads = threads
        so.inter_op_num_threads = 1
        prov = ["CPUExecutionProvider"]
        self.name = entry["name"]
        self.enc = ort.InferenceSession(os.path.join(models_dir, entry["encoder"]), so, providers=prov)
        self.dec = ort.InferenceSession(os.path.join(models_dir, entry["decoder"]), so, providers=prov)
        self.dec_inputs = {i.name: i for i in self.dec.get_inputs()}
        self.dec_outputs = [o.name for o in self.dec.get_outputs()]
        self.contract = detect_contract(self.dec_inputs, self.dec_outputs)
        assert self.contract == entry["contract"], (self.contract, entry["contract"])
        img_in = self.enc.get_inputs()[0]
        self.image_dtype = np.float16 if img_in.type == "tensor(float16)" else np.float32
        assert (self.image_dtype == np.float16) == (entry.get("image_dtype") == "float16")
        self.has_lowres = self.contract in ("A", "C")

    def encode(self, rgb):
        x = preprocess(rgb, self.image_dtype)
        names = CONTRACTS[self.contract]["enc"]
        outs = self.enc.run(list(names), {self.enc.get_inputs()[0].name: x})
        return {"rgb_size": rgb.shape[:2], "feats": dict(zip(names, outs)), "input": x}

    def predict(self, emb, prompts, mask_input=None, has_mask=None):
        """Returns dict: masks bool [L,3,H,W], iou [L,3], lowres float32 [L,3,256,256] or None."""
        h, w = emb["rgb_size"]
        coords, labels = build_prompt_rows(prompts, w, h)
        n_obj = coords.shape[0]
        c = CONTRACTS[self.contract]
        if mask_input is None:
            mask_input = np.zeros((n_obj, 1, LOWRES, LOWRES), dtype=np.float32)
        if has_mask is None:
            has_mask = np.zeros((n_obj,), dtype=np.float32)
        feed = dict(emb["feats"])
        feed["point_coords"] = coords
        feed["point_labels"] = labels.astype(np.int32) if self.contract == "C" else labels
        feed[c["mask_in"]] = np.asarray(mask_input, dtype=np.float32)
        feed[c["has_mask"]] = np.asarray(has_mask, dtype=np.float32)
        if c["size"]:
            feed[c["size"]] = np.array([h, w], dtype=np.int32)
        outs = dict(zip(self.dec_outputs, self.dec.run(self.dec_outputs, feed)))
        iou = outs["iou_predictions"]
        if self.contract == "A":
            lowres = outs["masks"]
            masks = np.stack([upsample_logits(lowres[i], h, w) > 0 for i in range(n_obj)])
        elif self.contract == "B":
            lowres = None
            masks = outs["masks"] > 0
        else:
            lowres = outs["low_res_masks"]
            masks = outs["masks"].astype(bool)
        assert masks.shape == (n_obj, 3, h, w), masks.shape
        return {"masks": masks, "iou": iou, "lowres": lowres}


def best(result, i=0):
    k = int(np.argmax(result["iou"][i]))
    return k, result["masks"][i, k]


def iou_of(a, b):
    inter = np.logical_and(a, b).sum()
    union = np.logical_or(a, b).sum()
    return float(inter) / float(union) if union else 1.0


# ---------------------------------------------------------------------------
# Checks
# ---------------------------------------------------------------------------

class Report:
    def __init__(self):
        self.passed = 0
        self.failed = 0

    def check(self, ok, text):
        if ok:
            self.passed += 1
        else:
            self.failed += 1
        print("%s  %s" % ("PASS" if ok else "FAIL", text))
        return ok


def expanded_box(bbox, w, h, margin=6):
    x1, y1, x2, y2 = bbox
    return [max(x1 - margin, 0), max(y1 - margin, 0), min(x2 + margin, w - 1), min(y2 + margin, h - 1)]


def lowres_region(mask, h, w):
    """Ground-truth mask sampled at the low-res pixel centres -> bool [256,256]."""
    ys = np.minimum(np.floor((np.arange(LOWRES) + 0.5) * h / LOWRES).astype(np.int64), h - 1)
    xs = np.minimum(np.floor((np.arange(LOWRES) + 0.5) * w / LOWRES).astype(np.int64), w - 1)
    return mask[ys][:, xs]


def make_cases(meta):
    """The prompt cases (name, prompt, expected shape names) on shapes.ppm."""
    w, h = meta["width"], meta["height"]
    shapes = {s["name"]: s for s in meta["shapes"]}
    cases = []
    for s in meta["shapes"]:
        expect = [s["name"]] + ([s["twin_of"]] if s["twin_of"] else [])
        cases.append(("click_%s" % s["name"], {"points": [s["click"] + [1]], "box": None}, expect, "click"))
    for a, b in (("twin_left", "twin_right"), ("twin_right", "twin_left")):
        cases.append(("neg_%s" % a, {"points": [shapes[a]["click"] + [1], shapes[b]["click"] + [0]],
                                     "box": None}, [a], "negative"))
    for s in meta["shapes"]:
        cases.append(("box_%s" % s["name"], {"points": [], "box": expanded_box(s["bbox"], w, h)},
                      [s["name"]], "box"))
    for name in ("red_disc", "green_rect", "twin_right"):
        s = shapes[name]
        cases.append(("box_point_%s" % name, {"points": [s["click"] + [1]], "box": expanded_box(s["bbox"], w, h)},
                      [name], "box_point"))
    return cases


def run_pair(pair, rgb, meta, gt, report, dump=None):
    h, w = meta["height"], meta["width"]
    emb = pair.encode(rgb)
    tag = pair.name
    dumped = []

    def expected(names):
        m = np.zeros((h, w), dtype=bool)
        for n in names:
            m |= gt[n]
        return m

    cases = make_cases(meta)
    single = {}
    for cname, prompt, expect, kind in cases:
        r = pair.predict(emb, [prompt])
        k, m = best(r)
        v = iou_of(m, expected(expect))
        single[cname] = (r, k)
        report.check(v >= 0.9, "%-12s %-26s -> %-24s IoU %.4f best=%d iou_pred=%s" % (
            tag, cname, "+".join(expect), v, k, np.array2string(r["iou"][0], precision=4)))
        if dump is not None and kind in ("click", "negative", "box", "box_point"):
            if kind == "box" and cname not in ("box_twin_left", "box_yellow_triangle", "box_red_disc"):
                continue
            if kind == "negative" and cname != "neg_twin_left":
                continue
            if kind == "box_point" and cname != "box_point_green_rect":
                continue
            fname = "%s__%s.mask" % (tag, cname)
            with open(os.path.join(dump, fname), "wb") as f:
                f.write(m.astype(np.uint8).tobytes())
            mc, ml = build_prompt_rows([prompt], w, h)
            dumped.append({
                "pair": tag,
                "case": cname,
                "kind": kind,
                "image": meta["image"],
                "width": w,
                "height": h,
                "points": [list(map(int, p)) for p in prompt["points"]],
                "box": prompt["box"],
                "model_points": [[float(mc[0, j, 0]), float(mc[0, j, 1]), int(ml[0, j])] for j in range(mc.shape[1])],
                "iou_predictions": [float(x) for x in r["iou"][0]],
                "best": k,
                "mask_file": fname,
                "mask_area": int(m.sum()),
                "expected_shapes": expect,
            })

    # batching: several objects at once == one by one
    batch_names = ["click_red_disc", "neg_twin_left", "box_yellow_triangle", "box_point_green_rect"]
    by_name = {c[0]: c for c in cases}
    rb = pair.predict(emb, [by_name[n][1] for n in batch_names])
    for i, n in enumerate(batch_names):
        r1, k1 = single[n]
        kb = int(np.argmax(rb["iou"][i]))
        same = kb == k1 and np.array_equal(rb["masks"][i], r1["masks"][0]) and \
            np.allclose(rb["iou"][i], r1["iou"][0], rtol=0, atol=1e-5)
        report.check(same, "%-12s batch[%d] %-22s == single (best %d/%d, iou diff %.2e, mask diff px %d)" % (
            tag, i, n, kb, k1, float(np.abs(rb["iou"][i] - r1["iou"][0]).max()),
            int((rb["masks"][i] != r1["masks"][0]).sum())))

    # mask input
    red, green = gt["red_disc"], gt["green_rect"]
    click_red = by_name["click_red_disc"][1]
    region = lowres_region(green, h, w)
    r0, k0 = single["click_red_disc"]
    if pair.has_lowres:
        prev = r0["lowres"][0, k0][None, None].astype(np.float32)         # [1,1,256,256]
        r = pair.predict(emb, [click_red], prev, np.ones(1, np.float32))
        k, m = best(r)
        report.check(iou_of(m, red) >= 0.9, "%-12s refine with previous logits keeps red_disc: IoU %.4f" % (
            tag, iou_of(m, red)))
        strong = np.where(region[None, None], np.float32(20.0), prev).astype(np.float32)
    else:
        strong = np.where(region[None, None], np.float32(20.0), np.float32(0.0)).astype(np.float32)
    r = pair.predict(emb, [click_red], strong, np.ones(1, np.float32))
    k, m = best(r)
    v = iou_of(m, red | green)
    report.check(v >= 0.9, "%-12s mask_input +20 over green_rect adds it: IoU(red+green) %.4f" % (tag, v))
    r = pair.predict(emb, [click_red], strong, np.zeros(1, np.float32))
    k, m = best(r)
    v = iou_of(m, red)
    same = np.array_equal(m, best(r0)[1])
    report.check(v >= 0.9 and same, "%-12s has_mask_input=0 ignores mask_input: IoU(red) %.4f identical=%s" % (
        tag, v, same))
    return dumped


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--models", default="models")
    ap.add_argument("--testdata", default="testdata")
    ap.add_argument("--dump", default=None, help="write reference.json and mask files here")
    ap.add_argument("--pairs", default=None, help="comma-separated pair names (default: every tiny pair)")
    args = ap.parse_args()

    with open(os.path.join(args.models, "manifest.json")) as f:
        manifest = json.load(f)
    with open(os.path.join(args.testdata, "shapes.json")) as f:
        meta = json.load(f)
    rgb = read_pnm(os.path.join(args.testdata, meta["image"]))
    assert rgb.shape == (meta["height"], meta["width"], 3)
    gt = {s["name"]: read_pnm(os.path.join(args.testdata, s["mask"])) > 127 for s in meta["shapes"]}

    wanted = args.pairs.split(",") if args.pairs else None
    entries = [e for e in manifest if (e["name"] in wanted if wanted else e["kind"] == "tiny")]
    if args.dump:
        os.makedirs(args.dump, exist_ok=True)

    report = Report()
    cases = []
    for e in entries:
        pair = Pair(args.models, e)
        report.check(True, "%-12s loaded: contract %s, image %s" % (
            pair.name, pair.contract, np.dtype(pair.image_dtype).name))
        cases += run_pair(pair, rgb, meta, gt, report, args.dump)

    if args.dump:
        with open(os.path.join(args.dump, "reference.json"), "w") as f:
            json.dump(cases, f, indent=1)
            f.write("\n")
        pre = {}
        for dt in (np.float32, np.float16):
            x = preprocess(rgb, dt)
            pre[np.dtype(dt).name] = {
                "shape": list(x.shape),
                "sha256": hashlib.sha256(x.tobytes()).hexdigest(),
                "samples": {"[0,%d,%d,%d]" % idx: float(x[(0,) + idx]) for idx in
                            ((0, 0, 0), (1, 511, 700), (2, 1023, 1023), (0, 300, 77))},
            }
        with open(os.path.join(args.dump, "preprocess.json"), "w") as f:
            json.dump({"image": meta["image"], "tensors": pre}, f, indent=1)
            f.write("\n")
        print("wrote %d cases to %s" % (len(cases), os.path.join(args.dump, "reference.json")))

    print("%d passed, %d failed" % (report.passed, report.failed))
    return 1 if report.failed else 0


if __name__ == "__main__":
    sys.exit(main())
