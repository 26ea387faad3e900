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
    torch, model = export.build(manifest["config"], manifest["checkpoint"], manifest["seed"],
                                export.default_vocab(), manifest.get("sharpening"))
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
    with open(args.out, "w") as f:
        json.dump(reference, f)
    print(f"[sam3-reference] {len(cases)} cases on {args.image} ({width}x{height}) in "
          f"{time.time() - started:.1f} s")


if __name__ == "__main__":
    main()
