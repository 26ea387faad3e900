"""Holds the click head of an export of `sam2-export-sam3 --interactive` to Meta's own SAM 3 code
on the same weights: the image encoder's three click outputs and `sam3_interactive_decoder.onnx`,
run by ONNX Runtime, against Meta's `Sam3Processor.set_image` and `Sam3Image.predict_inst`
(multimask output) on a 1008x1008 image: a click, two clicks with a negative, a box, a box and a
click, a click with the mask of the first case as mask input, and two prompts in one run (L = 2).
Compared: the features, the low-resolution logits and the IoU predictions (largest absolute
differences), and the masks Meta upsamples to the image against the graph's logits upsampled the
same way (bilinear, half-pixel centres, > 0): their IoU. With --plain DIR (a plain export of the
same configuration and seed) the concept graphs' outputs of both exports are compared too: they
must be equal. Writes DIR/interactive-check.json.

    sam3_interactive_check.py --models DIR [--plain DIR]
"""

import argparse
import importlib.util
import json
import os
import sys
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "sam2-tools"))

from sam2_tools import export_sam3 as export  # noqa: E402

# Prompts in image pixels (the image is 1008x1008, so the input frame is the image's).
CLICK = ([[400.0, 300.0]], [1])
CASES = {
    "a click": {"point_coords": CLICK[0], "point_labels": CLICK[1]},
    "two clicks, one negative": {"point_coords": [[400.0, 300.0], [620.0, 700.0]], "point_labels": [1, 0]},
    "a box": {"box": [250.0, 200.0, 750.0, 640.0]},
    "a box and a click": {"box": [250.0, 200.0, 750.0, 640.0], "point_coords": [[500.0, 420.0]],
                          "point_labels": [1]},
}
# float32 noise: of the 288² logits after the two-way transformer and the upscaling, of the
# sigmoid IoU predictions, and the least IoU of a mask upsampled from the graph's logits.
TOLERANCE = {"features": 1e-4, "masks": 1e-4, "iou_predictions": 1e-5, "mask_iou": 0.999}


def graph_feeds(case, width, height):
    """The case as the decoder graph takes it: a box's corners (labels 2, 3) before the clicks,
    coordinates scaled to the 1008x1008 input frame."""
    coords, labels = [], []
    if "box" in case:
        x1, y1, x2, y2 = case["box"]
        coords += [[x1, y1], [x2, y2]]
        labels += [2, 3]
    coords += case.get("point_coords", [])
    labels += case.get("point_labels", [])
    scale = np.array([export.SIDE / width, export.SIDE / height], np.float32)
    return (np.array(coords, np.float32)[None] * scale, np.array(labels, np.float32)[None])


def mask_iou(a, b):
    union = np.logical_or(a, b).sum()
    return 1.0 if union == 0 else float(np.logical_and(a, b).sum() / union)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", required=True)
    parser.add_argument("--plain", help="a plain export of the same configuration and seed")
    args = parser.parse_args()
    import onnxruntime as ort

    manifest = json.load(open(os.path.join(args.models, "manifest.json")))
    if not manifest.get("interactive"):
        sys.exit(f"{args.models} is not an --interactive export (manifest.json)")
    torch, model = export.build(manifest["config"], manifest["checkpoint"], manifest["seed"],
                                export.default_vocab(), manifest.get("sharpening"), interactive=True)
    import torch.nn.functional as F
    from sam3.model.sam3_image_processor import Sam3Processor

    processor = Sam3Processor(model, device="cpu")
    image = torch.randint(0, 256, (3, export.SIDE, export.SIDE), dtype=torch.uint8,
                          generator=torch.Generator().manual_seed(5))
    height, width = image.shape[1:]

    def session(folder, name):
        return ort.InferenceSession(os.path.join(folder, name), providers=["CPUExecutionProvider"])

    def timed(sess, feeds, runs=3):
        sess.run(None, feeds)
        started = time.perf_counter()
        for _ in range(runs):
            out = sess.run(None, feeds)
        return out, (time.perf_counter() - started) / runs

    encoder = session(args.models, "sam3_image_encoder.onnx")
    decoder = session(args.models, "sam3_interactive_decoder.onnx")
    encoded, encode_s = timed(encoder, {"image": image.numpy()}, runs=1)
    features = dict(zip([o.name for o in encoder.get_outputs()], encoded))
    report = {"hole_filling": importlib.util.find_spec("skimage") is not None, "features": {},
              "cases": {}, "seconds": {"image_encoder": encode_s}}
    failed = []

    def held(name, value, tolerance, at_least=False):
        if not (value >= tolerance if at_least else value <= tolerance):
            failed.append(f"{name}: {value:.3g} (tolerance {tolerance:.3g})")

    # Meta's features, as predict_inst hands them to the predictor.
    predictor = model.inst_interactive_predictor
    predict = predictor.predict
    captured = {}

    def capturing_predict(*a, **k):
        captured.update(predictor._features)
        return predict(*a, **k)

    predictor.predict = capturing_predict
    meta = {}
    with torch.inference_mode():
        state = processor.set_image(image)
        for name, case in CASES.items():
            kwargs = {k: np.array(v, np.float32) for k, v in case.items()}
            meta[name] = model.predict_inst(state, multimask_output=True, **kwargs)
        masks, iou, low = meta["a click"]
        best = int(np.argmax(iou))
        with_mask = {"point_coords": [[560.0, 380.0]], "point_labels": [1]}
        meta["a click and the first mask"] = model.predict_inst(
            state, point_coords=np.array(with_mask["point_coords"], np.float32),
            point_labels=np.array(with_mask["point_labels"]), mask_input=low[best][None],
            multimask_output=True)
    for name, value in (("image_embed", captured["image_embed"]),
                        ("high_res_feats_0", captured["high_res_feats"][0]),
                        ("high_res_feats_1", captured["high_res_feats"][1])):
        diff = float(np.abs(value.numpy() - features[name]).max())
        report["features"][name] = diff
        held(f"feature {name}", diff, TOLERANCE["features"])

    def run_graph(coords, labels, mask_input=None):
        count = coords.shape[0]
        feeds = {k: features[k] for k in ("image_embed", "high_res_feats_0", "high_res_feats_1")}
        feeds.update(point_coords=coords, point_labels=labels,
                     mask_input=np.zeros((count, 1, 288, 288), np.float32) if mask_input is None
                     else mask_input.astype(np.float32).reshape(count, 1, 288, 288),
                     has_mask_input=np.array([0.0 if mask_input is None else 1.0], np.float32))
        return timed(decoder, feeds)

    def compare(name, ours_masks, ours_iou, theirs, seconds=None):
        their_masks, their_iou, their_low = theirs
        upsampled = F.interpolate(torch.from_numpy(ours_masks)[None], (height, width),
                                  mode="bilinear", align_corners=False)[0].numpy() > 0
        entry = {"masks": float(np.abs(ours_masks - their_low).max()),
                 "iou_predictions": float(np.abs(ours_iou - their_iou).max()),
                 "mask_iou": min(mask_iou(a, b) for a, b in zip(upsampled, their_masks)),
                 "logit_range": [float(their_low.min()), float(their_low.max())]}
        if seconds is not None:
            entry["seconds"] = seconds
        report["cases"][name] = entry
        held(f"{name}: masks", entry["masks"], TOLERANCE["masks"])
        held(f"{name}: iou_predictions", entry["iou_predictions"], TOLERANCE["iou_predictions"])
        held(f"{name}: mask IoU", entry["mask_iou"], TOLERANCE["mask_iou"], at_least=True)

    for name, case in CASES.items():
        coords, labels = graph_feeds(case, width, height)
        (masks, iou), seconds = run_graph(coords, labels)
        compare(name, masks[0], iou[0], meta[name], seconds)
    coords, labels = graph_feeds(with_mask, width, height)
    (masks, iou), seconds = run_graph(coords, labels, meta["a click"][2][best])
    compare("a click and the first mask", masks[0], iou[0], meta["a click and the first mask"],
            seconds)
    # Two prompts of as many points in one run: each row is its own case.
    first, second = graph_feeds(CASES["a click"], width, height), graph_feeds(
        {"point_coords": [[620.0, 700.0]], "point_labels": [1]}, width, height)
    (masks, iou), seconds = run_graph(np.concatenate([first[0], second[0]]),
                                      np.concatenate([first[1], second[1]]))
    with torch.inference_mode():
        theirs = model.predict_inst(state, point_coords=np.array([[620.0, 700.0]], np.float32),
                                    point_labels=np.array([1]), multimask_output=True)
    compare("two prompts in one run (row 1)", masks[0], iou[0], meta["a click"], seconds)
    compare("two prompts in one run (row 2)", masks[1], iou[1], theirs)

    if args.plain:
        report["plain"] = compare_plain(args.plain, args.models, image.numpy(), failed)
        report["seconds"]["plain_image_encoder"] = report["plain"].pop("plain_encode_seconds")
    with open(os.path.join(args.models, "interactive-check.json"), "w") as f:
        json.dump(report, f, indent=1)
    print("[sam3-click-check] features: "
          + ", ".join(f"{k} {v:.2g}" for k, v in report["features"].items()))
    for case, diffs in report["cases"].items():
        print(f"[sam3-click-check] {case}: masks {diffs['masks']:.2g}, iou_predictions "
              f"{diffs['iou_predictions']:.2g}, mask IoU {diffs['mask_iou']:.6f}")
    if "plain" in report:
        print("[sam3-click-check] against the plain export: " + ", ".join(
            f"{k} {v:.2g}" for k, v in report["plain"].items()))
    holes = "ran" if report["hole_filling"] else "skipped (no scikit-image)"
    print(f"[sam3-click-check] Meta's hole filling {holes}; seconds: "
          + ", ".join(f"{k} {v:.3f}" for k, v in report["seconds"].items()))
    if failed:
        sys.exit("the click head differs from Meta's code:\n" + "\n".join(failed))


def compare_plain(plain, interactive, image, failed):
    """The concept graphs of both exports on the same image, phrase and box: the largest
    difference of each output (the six features, the text, the decoder's heads)."""
    import onnxruntime as ort

    def sessions(folder):
        return {name: ort.InferenceSession(os.path.join(folder, f"sam3_{name}.onnx"),
                                           providers=["CPUExecutionProvider"])
                for name in ("image_encoder", "language_encoder", "decoder")}

    tokens = np.zeros((1, export.CONTEXT_LENGTH), np.int64)
    tokens[0, :5] = [49406, 320, 736, 1615, 49407]
    coords = np.zeros((export.MAX_BOXES, 1, 4), np.float32)
    coords[0, 0] = [0.5, 0.5, 0.2, 0.3]
    labels = np.ones((export.MAX_BOXES, 1), np.int64)
    empty = np.ones((1, export.MAX_BOXES), bool)
    empty[0, 0] = False
    outputs = {}
    for folder in (plain, interactive):
        s = sessions(folder)
        s["image_encoder"].run(export.ImageEncoder.outputs, {"image": image})
        started = time.perf_counter()  # the second run (the first warms up)
        encoded = s["image_encoder"].run(export.ImageEncoder.outputs, {"image": image})
        seconds = time.perf_counter() - started
        text = s["language_encoder"].run(None, {"tokens": tokens})
        feeds = dict(zip(export.ImageEncoder.outputs, encoded))
        feeds.update(language_mask=text[0], language_features=text[1], box_coords=coords,
                     box_labels=labels, box_masks=empty)
        heads = s["decoder"].run(export.Decoder.outputs, feeds)
        outputs[folder] = (dict(zip(export.ImageEncoder.outputs, encoded))
                           | dict(zip(export.LanguageEncoder.outputs, text))
                           | dict(zip(export.Decoder.outputs, heads)) | {"seconds": seconds})
    a, b = outputs[plain], outputs[interactive]
    diffs = {k: float(np.abs(a[k].astype(np.float64) - b[k].astype(np.float64)).max())
             for k in a if k != "seconds"}
    for k, v in diffs.items():
        if v != 0.0:
            failed.append(f"the concept output {k} differs from the plain export's by {v:.3g}")
    diffs["plain_encode_seconds"] = a["seconds"]
    return diffs


if __name__ == "__main__":
    main()
