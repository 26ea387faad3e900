"""Holds an export of sam2-export-sam3 to Meta's own SAM 3 code on the same weights: the image
encoder, language encoder and decoder run by ONNX Runtime against Meta's `Sam3Processor.set_image`
(on a 1008x1008 image, where its resize is the identity), `backbone.forward_text` and
`forward_grounding` with Meta's own prompt (its dummy prompt, boxes appended as
`add_geometric_prompt` appends them): a phrase alone, with a positive box, and with a positive and
a negative box. The raw heads (boxes, logits, mask logits, presence logit) must agree within
float32 noise. Writes DIR/check.json with the largest differences.

    sam3_export_check.py --models DIR
"""

import argparse
import json
import os
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "sam2-tools"))

from sam2_tools import export_sam3 as export  # noqa: E402

# A phrase and its ids ("a red car"), and the box cases (cx, cy, w, h normalised; positive).
PHRASE = "a red car"
TOKENS = [49406, 320, 736, 1615, 49407]
CASES = {
    "phrase": [],
    "phrase and a box": [([0.5, 0.5, 0.2, 0.3], True)],
    "phrase, a box and a negative box": [([0.5, 0.5, 0.2, 0.3], True), ([0.2, 0.7, 0.1, 0.1], False)],
}
# float32 noise of the masks' 288² logits after the decoder's layers, and of the rest. Random
# weights' sharpened scores (export.sharpen) turn a query's position into its logit with a gain of
# slope / sd per unit, which multiplies the float32 noise of the logits as much (main).
TOLERANCE = {"pred_masks": 2e-3, "pred_boxes": 1e-5, "pred_logits": 1e-5, "presence_logit_dec": 1e-5}


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", required=True)
    args = parser.parse_args()
    import onnxruntime as ort

    manifest = json.load(open(os.path.join(args.models, "manifest.json")))
    torch, model = export.build(manifest["config"], manifest["checkpoint"], manifest["seed"],
                                export.default_vocab(), manifest.get("sharpening"),
                                interactive=manifest.get("interactive", False))
    from sam3.model.sam3_image_processor import Sam3Processor

    tolerance = dict(TOLERANCE)
    if model.export_sharpening is not None:
        sharpening = model.export_sharpening
        tolerance["pred_logits"] *= max(1.0, sharpening["slope"] / sharpening["sd"])

    processor = Sam3Processor(model, device="cpu")
    image = torch.randint(0, 256, (3, export.SIDE, export.SIDE), dtype=torch.uint8,
                          generator=torch.Generator().manual_seed(5))
    session = {name: ort.InferenceSession(os.path.join(args.models, f"sam3_{name}.onnx"),
                                          providers=["CPUExecutionProvider"])
               for name in ("image_encoder", "language_encoder", "decoder")}
    features = session["image_encoder"].run(None, {"image": image.numpy()})
    tokens = np.zeros((1, export.CONTEXT_LENGTH), np.int64)
    tokens[0, :len(TOKENS)] = TOKENS
    mask, memory, _ = session["language_encoder"].run(None, {"tokens": tokens})
    report = {}
    failed = []
    with torch.inference_mode():
        state = processor.set_image(image)
        state["backbone_out"].update(model.backbone.forward_text([PHRASE], device="cpu"))
        for case, boxes in CASES.items():
            prompt = model._get_dummy_prompt()
            for box, positive in boxes:
                prompt.append_boxes(torch.tensor(box).view(1, 1, 4), torch.tensor([positive]).view(1, 1))
            meta = model.forward_grounding(backbone_out=state["backbone_out"],
                                           find_input=processor.find_stage, find_target=None,
                                           geometric_prompt=prompt)
            coords = np.zeros((export.MAX_BOXES, 1, 4), np.float32)
            labels = np.ones((export.MAX_BOXES, 1), np.int64)
            empty = np.ones((1, export.MAX_BOXES), bool)
            for i, (box, positive) in enumerate(boxes):
                coords[i, 0], labels[i, 0], empty[0, i] = box, int(positive), False
            # The six concept outputs come first (an --interactive export has three more).
            feeds = dict(zip(export.ImageEncoder.outputs, features))
            feeds.update(language_mask=mask, language_features=memory, box_coords=coords,
                         box_labels=labels, box_masks=empty)
            decoder = session["decoder"]
            ours = decoder.run(None, {i.name: feeds[i.name] for i in decoder.get_inputs()})
            report[case] = {}
            for name, value in zip(export.Decoder.outputs, ours):
                diff = float(np.abs(meta[name].numpy() - value).max())
                report[case][name] = diff
                if not diff <= tolerance[name]:
                    failed.append(f"{case}: {name} differs by {diff:.3g} (tolerance {tolerance[name]:.3g})")
            text = float(np.abs(state["backbone_out"]["language_features"].numpy() - memory).max())
            report[case]["language_features"] = text
            if not text <= 1e-5:
                failed.append(f"{case}: the text features differ by {text:.3g}")
    with open(os.path.join(args.models, "check.json"), "w") as f:
        json.dump(report, f, indent=1)
    for case, diffs in report.items():
        print(f"[sam3-check] {case}: " + ", ".join(f"{k} {v:.2g}" for k, v in diffs.items()))
    if failed:
        sys.exit("the export differs from Meta's code:\n" + "\n".join(failed))


if __name__ == "__main__":
    main()
