"""What Meta's own image processor (sam3 0.1.4's `Sam3Processor`, threshold 0.5) finds on an image
with an export's weights: the reference the Rust pipeline is held to, from the image file to the
kept instances. The model is rebuilt as the export made it (`export.build` from its
manifest.json, sharpened scores included); each case goes through Meta's `set_text_prompt` and
`add_geometric_prompt` on one `set_image`, its prompts reset between cases.

    sam3_reference.py --models DIR --image demo.ppm --out reference.json

For each case the JSON holds the tokens Meta's tokenizer gave the text the model read ("visual"
when only boxes are given, as Meta's API does), the presence probability, every query's score
(sigmoid(logit) * presence, query order) and the kept instances: the query index (the position of
each true in Meta's `keep = scores > threshold`, which keeps the queries in order), the score,
the box in image pixels (x1, y1, x2, y2) and the mask at the image's size as row-major run
lengths, zeros first. `input_sha256` is the SHA-256 of the uint8 [3, 1008, 1008] image Meta's
transform makes before its conversion to float (its Resize, antialiased bilinear).

When the export is interactive (`"interactive": true` in its manifest.json), the JSON also holds
under "clicks" what Meta's click head makes of the same image: `Sam3Image.predict_inst` on the
same `set_image`, with Meta's defaults (points and boxes in image pixels, normalised by Meta,
multimask output, masks thresholded at 0) except its hole filling, which is turned off (see
`postprocessing`). Per case: the points (x, y, label: 1 positive, 0 negative), the box or null,
Meta's three IoU predictions in its order, the three masks at the image's size (area and run
lengths as above) and the SHA-256 of Meta's low-resolution logits (float32 [3, 288, 288], C order,
little-endian, clamped to +-32 as Meta returns them).
"""

import argparse
import hashlib
import json
import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "sam2-tools"))

from sam2_tools import export_sam3 as export  # noqa: E402

THRESHOLD = 0.5
# (name, phrase or None, boxes as x1, y1, x2, y2 in image pixels and positive)
CASES = [
    ("phrase", "purple star", []),
    ("another phrase", "a red car", []),
    ("a box alone", None, [(52, 82, 327, 257, True)]),
    ("a phrase, a box and a negative box", "shape", [(52, 82, 327, 257, True), (500, 100, 700, 300, False)]),
    ("a phrase of nothing drawn", "zebra", []),
]
# Clicks of an interactive export: (name, points as x, y in image pixels and label, box as
# x1, y1, x2, y2 in image pixels or None)
CLICK_CASES = [
    ("a click", [(580, 190, 1)], None),
    ("a click and a negative click", [(580, 190, 1), (100, 100, 0)], None),
    ("a box", [], (52, 82, 327, 257)),
    ("a box and a click", [(190, 170, 1)], (52, 82, 327, 257)),
]


def runs(mask):
    """Row-major run lengths of a boolean mask, alternating, starting with the zeros (maybe 0)."""
    import numpy as np

    flat = mask.reshape(-1).astype(np.int8)
    changes = np.flatnonzero(np.diff(flat)) + 1
    bounds = np.concatenate(([0], changes, [flat.size]))
    lengths = np.diff(bounds).tolist()
    return lengths if flat[0] == 0 else [0] + lengths


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", required=True)
    parser.add_argument("--image", required=True)
    parser.add_argument("--out", required=True)
    args = parser.parse_args()
    started = time.time()
    manifest = json.load(open(os.path.join(args.models, "manifest.json")))
    interactive = bool(manifest.get("interactive"))
    torch, model = export.build(manifest["config"], manifest["checkpoint"], manifest["seed"],
                                export.default_vocab(), manifest.get("sharpening"),
                                interactive=interactive)
    from PIL import Image
    from sam3.model.sam3_image_processor import Sam3Processor
    from torchvision.transforms import v2

    processor = Sam3Processor(model, device="cpu", confidence_threshold=THRESHOLD)
    # What Meta's calls give the model: the raw heads of the last grounding and the tokens of the
    # last text encoded (the processor keeps neither).
    seen = {}
    grounding = model.forward_grounding

    def recording_grounding(*a, **k):
        seen["out"] = grounding(*a, **k)
        return seen["out"]

    model.forward_grounding = recording_grounding
    text = model.backbone.language_backbone
    tokenizer = text.tokenizer

    def recording_tokenizer(*a, **k):
        seen["tokens"] = tokenizer(*a, **k)
        return seen["tokens"]

    text.tokenizer = recording_tokenizer

    image = Image.open(args.image).convert("RGB")
    width, height = image.size
    # Meta's transform up to its conversion to float: ToDtype(uint8), Resize(1008, 1008).
    uint8_steps = v2.Compose(processor.transform.transforms[:2])
    resized = uint8_steps(v2.functional.to_image(image))
    assert resized.dtype == torch.uint8 and tuple(resized.shape) == (3, export.SIDE, export.SIDE)
    input_sha256 = hashlib.sha256(resized.contiguous().numpy().tobytes()).hexdigest()

    cases = []
    state = processor.set_image(image)
    for name, phrase, boxes in CASES:
        processor.reset_all_prompts(state)
        seen.clear()
        if phrase is not None:
            processor.set_text_prompt(phrase, state)
        for x1, y1, x2, y2, positive in boxes:
            box = [(x1 + x2) / 2 / width, (y1 + y2) / 2 / height, (x2 - x1) / width, (y2 - y1) / height]
            processor.add_geometric_prompt(box, positive, state)
        out = seen["out"]
        presence = out["presence_logit_dec"].sigmoid()
        scores = (out["pred_logits"].sigmoid() * presence.unsqueeze(1)).squeeze(-1)[0]
        keep = scores > THRESHOLD
        queries = keep.nonzero().reshape(-1).tolist()
        assert torch.equal(state["scores"], scores[keep]), "the kept scores are not Meta's"
        masks = state["masks"][:, 0].numpy()
        instances = [{"query": q, "score": float(scores[q]), "box": [float(v) for v in state["boxes"][i]],
                      "area": int(masks[i].sum()), "runs": runs(masks[i])}
                     for i, q in enumerate(queries)]
        cases.append({"name": name, "phrase": phrase,
                      "boxes": [[x1, y1, x2, y2, positive] for x1, y1, x2, y2, positive in boxes],
                      "tokens": seen["tokens"][0].tolist(), "presence": float(presence.reshape(-1)[0]),
                      "scores_all": [float(s) for s in scores], "instances": instances})
        print(f"[sam3-reference] {name}: presence {float(presence.reshape(-1)[0]):.3f}, "
              f"{len(instances)} kept (scores {', '.join('%.3f' % i['score'] for i in instances)}), "
              f"the highest score not kept {max(scores[~keep].tolist(), default=float('nan')):.3f}")
    reference = {"image": args.image, "width": width, "height": height, "threshold": THRESHOLD,
                 "input_sha256": input_sha256,
                 "query_index": "the position of each true in Meta's keep = scores > threshold "
                                "(Sam3Processor._forward_grounding), in query order",
                 "cases": cases}
    if interactive:
        reference["postprocessing"], reference["clicks"] = clicks(torch, model, state)
    with open(args.out, "w") as f:
        json.dump(reference, f)
    click_cases = f" and {len(CLICK_CASES)} of clicks" if interactive else ""
    print(f"[sam3-reference] {len(cases)} cases{click_cases} on {args.image} ({width}x{height}) in "
          f"{time.time() - started:.1f} s")


def clicks(torch, model, state):
    """Meta's `predict_inst` on the processor's state for each of CLICK_CASES: what its
    postprocessing was, and the cases. Meta fills holes of up to max_hole_area low-resolution
    pixels before upsampling, through scikit-image on a CPU (and skips it with a warning where
    scikit-image is missing); the library does not, so it is turned off here, whatever the
    environment, and the masks are Meta's upsampled logits > mask_threshold."""
    import numpy as np

    predictor = model.inst_interactive_predictor
    transforms = predictor._transforms
    defaults = {"mask_threshold": predictor.mask_threshold,
                "max_hole_area": transforms.max_hole_area,
                "max_sprinkle_area": transforms.max_sprinkle_area}
    assert defaults["mask_threshold"] == transforms.mask_threshold == 0.0, defaults
    transforms.max_hole_area = 0.0
    transforms.max_sprinkle_area = 0.0
    postprocessing = (
        "Meta's SAM3InteractiveImagePredictor defaults: "
        + ", ".join(f"{k} {v:g}" for k, v in defaults.items())
        + "; max_hole_area and max_sprinkle_area set to 0 here (Meta's hole filling needs "
        "scikit-image on a CPU), so each mask is Meta's logits upsampled to the image (bilinear, "
        "half-pixel centres) > mask_threshold")
    cases = []
    for name, points, box in CLICK_CASES:
        kwargs = {"multimask_output": True}
        if points:
            kwargs["point_coords"] = np.array([[x, y] for x, y, _ in points], np.float32)
            kwargs["point_labels"] = np.array([label for _, _, label in points], np.int32)
        if box is not None:
            kwargs["box"] = np.array(box, np.float32)
        with torch.inference_mode():
            masks, scores, low_res = model.predict_inst(state, **kwargs)
        masks = masks > 0.5  # Meta's booleans, returned as float 0 and 1
        low_res = np.ascontiguousarray(low_res, "<f4")
        cases.append({"name": name, "points": [list(p) for p in points],
                      "box": list(box) if box is not None else None,
                      "scores": [float(s) for s in scores],
                      "masks": [{"area": int(m.sum()), "runs": runs(m)} for m in masks],
                      "low_res_sha256": hashlib.sha256(low_res.tobytes()).hexdigest()})
        print(f"[sam3-reference] {name}: IoU predictions "
              f"{', '.join('%.4f' % s for s in scores)}, areas "
              f"{', '.join(str(m['area']) for m in cases[-1]['masks'])}")
    return postprocessing, cases


if __name__ == "__main__":
    main()
