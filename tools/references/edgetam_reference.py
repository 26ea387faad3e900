#!/usr/bin/env python3
"""Reference run of EdgeTAM's own PyTorch predictors (issue 31), on the weights
sam2-export-edgetam exported (`--models`: its manifest.json and checkpoint).

* Image cases, as tools/references/real_reference.py runs them for SAM2 (its cases, on
  testdata/demo.ppm), for each image pair of the export: EdgeTAM's `SAM2ImagePredictor` (built by EdgeTAM's
  `build_sam2`) and real_reference.py's Python pipeline on the ONNX pair. Written as
  `image_reference.json` in real_reference.py's format (masks run-length encoded, scores, areas)
  with each case's low-res logits beside it (`image_<pair>_<case>_<source>.npy`); a third
  source, `onnx`, is the ONNX pair on the predictor's own input tensor (its float resize, as the
  library resizes), so that it differs from `meta` by the export alone (real_reference.py's
  Python pipeline rounds the resized image to uint8 first, as OpenCV does).
* The video clip of tools/references/video_reference.py (11 generated frames, two objects
  prompted on frame 0, a correction click on frame 8 where the shapes cross), through EdgeTAM's
  `SAM2VideoPredictor` (built by EdgeTAM's `build_sam2_video_predictor`): pass 1 forward 0-8;
  then, from one copy of the state each, `correct_as_cond` (the corrected frame a conditioning
  frame: pass 2 forward 8-10, pass 3 backward 8-5, as video_reference.py's) and `default`
  (pass 2 forward 8-9). The same
  arrays and `reference.json` index as video_reference.py's.

EdgeTAM's video predictor is SAM2's first one (before SAM2.1's per-object rewrite): it tracks
the objects as one batch and consolidates them on a prompted frame. What that changes, beside
EdgeTAM's network: a correction on one object makes that frame a prompted frame of every object
(each object's memory there is encoded again from its mask, binarised as a mask from clicks, and
stored as a conditioning frame under add_all_frames_to_correct_as_cond), and a corrected
non-conditioning frame is kept, not tracked again, when propagation passes over it.

The memory must matter (the export scales memory attention's cross attention, see
sam2_tools.edgetam_model): frame 8 of pass 1 is tracked again with its whole memory and with one
memory frame (frame 7, its memory and its pointer) dropped, and the change is recorded
(`memory_matters` in reference.json) and printed; with `--show-unscaled`, also with the
cross-attention scales undone, to show what they buy (two more frames; no test reads it, so the
set-up leaves it out).

    python tools/references/edgetam_reference.py --models DIR --image testdata/demo.ppm --out DIR
"""

import argparse
import contextlib
import copy
import json
import os
import sys
import time
import warnings

import numpy as np
import torch

from sam2_tools import edgetam_model  # EdgeTAM's builder

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import real_reference  # noqa: E402  (the image cases and the Python pipeline on an ONNX pair)
import video_reference  # noqa: E402  (the clip, its prompts and the predictor's calls)
from reference_check import read_pnm  # noqa: E402

DROP_FRAME = 7  # the memory frame dropped when frame CORRECTION["frame"] is tracked again


def say(msg):
    print(f"[edgetam-reference] {msg}", file=sys.stderr, flush=True)


class Saver:
    def __init__(self, out_dir, index):
        self.out_dir, self.index = out_dir, index

    def __call__(self, name, array):
        np.save(os.path.join(self.out_dir, name + ".npy"), np.ascontiguousarray(array))
        self.index["arrays"][name] = {"file": name + ".npy", "dtype": str(array.dtype),
                                      "shape": list(array.shape)}


# ----------------------------------------------------------------------------------------------
# image cases


class EdgeTamImagePipeline(real_reference.MetaPipeline):
    """real_reference.py's MetaPipeline (SAM2ImagePredictor.predict, best candidate by score)
    on EdgeTAM's build_sam2, without timm's pretrained download."""

    def __init__(self, checkpoint, multimask):
        from sam2.sam2_image_predictor import SAM2ImagePredictor

        self.multimask = multimask
        self.predictor = SAM2ImagePredictor(edgetam_model.build(video=False, checkpoint=checkpoint))


class ExactInputPipeline(real_reference.PythonPipeline):
    """The ONNX pair on the very input tensor SAM2ImagePredictor makes of the image (its own
    float resize and normalisation, as the library resizes), so that what differs from the
    predictor is the export alone; prompts and outputs as real_reference.py's Python pipeline."""

    def __init__(self, encoder, decoder, family, predictor):
        super().__init__(encoder, decoder, family)
        self.transforms = predictor._transforms

    def encode(self, rgb):
        self.h, self.w = rgb.shape[:2]
        x = self.transforms(rgb)[None].numpy().astype(np.float32)
        names = [o.name for o in self.encoder.get_outputs()]
        self.features = dict(zip(names, self.encoder.run(names, {self.encoder.get_inputs()[0].name: x})))


def image_cases(models, manifest, image_path, out_dir):
    rgb = read_pnm(image_path)
    h, w = rgb.shape[:2]
    cases = real_reference.cases(w, h)
    out = {"image": os.path.basename(image_path), "width": w, "height": h, "cases": cases,
           "pairs": []}
    checkpoint = os.path.join(models, manifest["checkpoint"])
    for pair in manifest["pairs"]:
        t0 = time.time()
        encoder = os.path.join(models, pair["encoder"])
        decoder = os.path.join(models, pair["decoder"])
        meta = EdgeTamImagePipeline(checkpoint, pair["multimask_decoder"])
        pipelines = {
            "python": real_reference.PythonPipeline(encoder, decoder, pair["family"]),
            "onnx": ExactInputPipeline(encoder, decoder, pair["family"], meta.predictor),
            "meta": meta,
        }
        stem = os.path.splitext(pair["decoder"])[0]
        results = {}
        for source, pipeline in pipelines.items():
            pipeline.encode(rgb)
            logits_of = {}
            for case in cases:
                mask_input = logits_of.get(case.get("mask_from"))
                mask, score, logits = pipeline.predict(case, mask_input)
                logits = np.asarray(logits, np.float32)
                logits_of[case["name"]] = logits
                name = f"image_{stem}_{case['name']}_{source}.npy"
                np.save(os.path.join(out_dir, name), logits)
                results.setdefault(case["name"], {})[source] = {
                    "score": score, "rle": real_reference.rle(mask), "area": int(mask.sum()),
                    "low_res_logits": name}
        out["pairs"].append({"encoder": pair["encoder"], "decoder": pair["decoder"],
                             "family": pair["family"], "model": pair["model"],
                             "multimask_decoder": pair["multimask_decoder"], "results": results})
        say(f"{pair['decoder']}: {len(cases)} cases ({time.time() - t0:.0f} s)")
    with open(os.path.join(out_dir, "image_reference.json"), "w") as f:
        json.dump(out, f)


# ----------------------------------------------------------------------------------------------
# video


@contextlib.contextmanager
def fill_holes_as_installed():
    """The predictor's fill-holes step (fill_hole_area 8) as EdgeTAM's own install runs it on a
    CPU: skipped. Its connected components need SAM2's CUDA extension or, in edgetam-dimos, an
    OpenCV fallback; edgetam-dimos does not require OpenCV, and SAM2 has no fallback, so both
    skip the step on a CPU (and so does the library). Our venv has OpenCV for
    real_reference.py's pipeline: the fallback is made to fail as it fails without OpenCV, and
    the predictor warns and returns the logits unchanged."""
    import sam2.utils.misc as misc

    original = misc._get_connected_components_cv2

    def no_opencv(mask):
        raise ImportError("OpenCV is not among edgetam-dimos's requirements")

    misc._get_connected_components_cv2 = no_opencv
    try:
        yield
    finally:
        misc._get_connected_components_cv2 = original


def track_frame_again(predictor, state, frame, drop=None):
    """Frame `frame` tracked again on `state` (after it was tracked): every object, the
    predictor's own _run_single_frame_inference on its memory, without frame `drop`'s output
    (memory and pointer) when given. -> low-res logits [objects,256,256], scores [objects]."""
    output_dict = dict(state["output_dict"])
    output_dict["non_cond_frame_outputs"] = {
        t: out for t, out in state["output_dict"]["non_cond_frame_outputs"].items() if t != drop}
    out, _ = predictor._run_single_frame_inference(
        inference_state=state, output_dict=output_dict, frame_idx=frame,
        batch_size=len(state["obj_ids"]), is_init_cond_frame=False, point_inputs=None,
        mask_inputs=None, reverse=False, run_mem_encoder=False)
    return out["pred_masks"][:, 0].float().numpy(), out["object_score_logits"][:, 0].float().numpy()


def memory_effect(predictor, state, frame, drop):
    full, full_scores = track_frame_again(predictor, state, frame)
    dropped, dropped_scores = track_frame_again(predictor, state, frame, drop)
    rows = []
    for i in range(full.shape[0]):
        a, b = full[i] > 0, dropped[i] > 0
        union = np.count_nonzero(a | b)
        # the parity tests' measures: correlation, IoU over the pixels where |logit| >= 1
        confident = np.abs(full[i]) >= 1.0
        ca, cb = a & confident, b & confident
        cu = np.count_nonzero(ca | cb)
        rows.append({
            "logits_correlation": float(np.corrcoef(full[i].ravel().astype(np.float64),
                                                    dropped[i].ravel().astype(np.float64))[0, 1]),
            "confident_pixels": int(np.count_nonzero(confident)),
            "confident_iou": 1.0 if cu == 0 else np.count_nonzero(ca & cb) / cu,
            "obj_id": state["obj_ids"][i],
            "max_abs_logit_change": float(np.abs(full[i] - dropped[i]).max()),
            "mean_abs_logit_change": float(np.abs(full[i] - dropped[i]).mean()),
            "mask_iou_with_without": 1.0 if union == 0 else np.count_nonzero(a & b) / union,
            "pixels_changed": int(np.count_nonzero(a != b)),
            "score_change": float(abs(full_scores[i] - dropped_scores[i])),
        })
    return full, rows


def video(models, manifest, out_dir, show_unscaled=False):
    jpeg_dir = video_reference.write_clip(out_dir)
    checkpoint = os.path.join(models, manifest["checkpoint"])
    predictor = edgetam_model.build(video=True, checkpoint=checkpoint)
    prompts, correction = video_reference.PROMPTS, video_reference.CORRECTION
    num_frames, size = video_reference.NUM_FRAMES, video_reference.SIZE
    index = {
        "family": "edgetam",
        "video_size": [size, size],
        "num_frames": num_frames,
        "frames_rgb": {"file": "frames_rgb.u8", "dtype": "uint8",
                       "shape": [num_frames, size, size, 3]},
        "jpeg_dir": "frames",
        "checkpoint": os.path.relpath(checkpoint, out_dir),
        "config": edgetam_model.CONFIG,
        "builder": "sam2.build_sam.build_sam2_video_predictor (edgetam-dimos 1.0.1, device cpu)",
        "predictor_settings": {k: getattr(predictor, k, None) for k in [
            "fill_hole_area", "non_overlap_masks", "clear_non_cond_mem_around_input",
            "clear_non_cond_mem_for_multi_obj", "binarize_mask_from_pts_for_mem_enc",
            "num_maskmem", "max_obj_ptrs_in_encoder", "max_cond_frames_in_attn",
            "memory_temporal_stride_for_eval", "multimask_min_pt_num", "multimask_max_pt_num",
            "add_tpos_enc_to_obj_ptrs", "non_overlap_masks_for_mem_enc"]},
        "prompts": copy.deepcopy(prompts),
        "correction": correction,
        "arrays": {},
    }
    save = Saver(out_dir, index)
    with warnings.catch_warnings(record=True) as caught, fill_holes_as_installed():
        warnings.simplefilter("always")
        with torch.inference_mode():
            state = predictor.init_state(jpeg_dir)
            prompt_out = [video_reference.add_prompt(predictor, state, p) for p in prompts]
            t = time.time()
            pass1 = video_reference.propagate(predictor, state, 0, correction["frame"])
            say(f"pass 1 ({time.time() - t:.0f} s)")
            base_state = copy.deepcopy(state)

            # the memory matters: frame 8 again, with and without frame 7's memory
            c = correction["frame"]
            full, rows = memory_effect(predictor, copy.deepcopy(base_state), c, DROP_FRAME)
            replay = float(np.abs(full - pass1[0][-1]).max())
            scales = manifest.get("weight_scales") if show_unscaled else None
            rows_unscaled = None
            if scales:
                unscaled = copy.deepcopy(predictor)
                with torch.no_grad():
                    for layer in unscaled.memory_attention.layers:
                        attn = layer.cross_attn_image
                        for proj, scale in ((attn.q_proj, scales["cross_attention_qk"]),
                                            (attn.k_proj, scales["cross_attention_qk"]),
                                            (attn.v_proj, scales["cross_attention_v"])):
                            proj.weight.div_(scale)
                            proj.bias.div_(scale)
                _, rows_unscaled = memory_effect(unscaled, copy.deepcopy(base_state), c, DROP_FRAME)
                del unscaled
            index["memory_matters"] = {
                "frame": c, "dropped_memory_frame": DROP_FRAME,
                "replay_max_abs_diff": replay, "objects": rows,
                "objects_without_attention_scales": rows_unscaled}
            for r in rows:
                say(f"frame {c} obj {r['obj_id']} without frame {DROP_FRAME}'s memory: logits move "
                    f"by up to {r['max_abs_logit_change']:.3f} (mean {r['mean_abs_logit_change']:.4f}), "
                    f"{r['pixels_changed']} of 65536 low-res pixels flip (IoU {r['mask_iou_with_without']:.4f}), "
                    f"score by {r['score_change']:.4f}; correlation {r['logits_correlation']:.5f}, "
                    f"IoU over |logit| >= 1 {r['confident_iou']:.4f} ({r['confident_pixels']} pixels)")
            for r in rows_unscaled or []:
                say(f"  without the attention scales: obj {r['obj_id']}: up to {r['max_abs_logit_change']:.4f} "
                    f"(mean {r['mean_abs_logit_change']:.5f}), {r['pixels_changed']} pixels flip, "
                    f"correlation {r['logits_correlation']:.5f}, IoU over |logit| >= 1 {r['confident_iou']:.4f}")

            scenarios = {}
            # video_reference.py's scenario, then the correction kept as a tracked frame
            for name, as_cond, spans in video_reference.SCENARIOS + [("default", False, [(c, c + 1)])]:
                st = copy.deepcopy(base_state)
                predictor.add_all_frames_to_correct_as_cond = as_cond
                corr_out, corr_kind = video_reference.add_prompt(predictor, st, correction)
                passes = []
                for start, last in spans:
                    t = time.time()
                    passes.append(video_reference.propagate(predictor, st, start, last))
                    say(f"{name}: pass {len(passes) + 1} ({time.time() - t:.0f} s)")
                scenarios[name] = (as_cond, corr_out, corr_kind, passes)
                del st
            predictor.add_all_frames_to_correct_as_cond = False
    fill_warnings = [str(w.message) for w in caught if "post-processing" in str(w.message)]
    index["fill_holes"] = (
        "skipped: sam2._C (the CUDA extension) is unavailable, fill_holes_in_mask_scores warned "
        f"{len(fill_warnings)} times and returned the logits unchanged"
        if fill_warnings else "applied")

    for i, ((logits, score, ptr), kind) in enumerate(prompt_out):
        save(f"prompt{i}_logits", logits)
        save(f"prompt{i}_score", np.float32([score]))
        save(f"prompt{i}_ptr", ptr)
        index["prompts"][i]["stored_as"] = kind
    logits, scores, ptrs, kinds, frames = pass1
    save("pass1_logits", logits)
    save("pass1_scores", scores)
    save("pass1_ptrs", ptrs)
    index["pass1"] = {"start_frame": frames[0], "frames": frames, "kinds": kinds,
                      "direction": "forward"}
    index["scenarios"] = {}
    for name, (as_cond, (c_logits, c_score, c_ptr), c_kind, passes) in scenarios.items():
        save(f"{name}_correction_logits", c_logits)
        save(f"{name}_correction_score", np.float32([c_score]))
        save(f"{name}_correction_ptr", c_ptr)
        index["scenarios"][name] = {"add_all_frames_to_correct_as_cond": as_cond,
                                    "correction_stored_as": c_kind}
        for k, (logits, scores, ptrs, kinds, frames) in enumerate(passes):
            key = f"pass{k + 2}"
            save(f"{name}_{key}_logits", logits)
            save(f"{name}_{key}_scores", scores)
            save(f"{name}_{key}_ptrs", ptrs)
            index["scenarios"][name][key] = {
                "start_frame": frames[0], "frames": frames, "kinds": kinds,
                "direction": "backward" if len(frames) > 1 and frames[1] < frames[0]
                else "forward"}
    with open(os.path.join(out_dir, "reference.json"), "w") as f:
        json.dump(index, f, indent=1)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--models", required=True, help="sam2-export-edgetam's output")
    parser.add_argument("--image", required=True, help="the image of the image cases")
    parser.add_argument("--out", required=True)
    parser.add_argument("--skip-image", action="store_true", help="the video clip only")
    parser.add_argument("--show-unscaled", action="store_true",
                        help="also track frame 8 again with the cross-attention scales undone, with "
                             "and without frame 7's memory (what the scales buy; no test reads it)")
    args = parser.parse_args()
    os.makedirs(args.out, exist_ok=True)
    torch.set_num_threads(os.cpu_count() or 1)
    edgetam_model.check_edgetam_package()
    with open(os.path.join(args.models, "manifest.json")) as f:
        manifest = json.load(f)
    assert manifest["family"] == "edgetam"
    t0 = time.time()
    if not args.skip_image:
        image_cases(args.models, manifest, args.image, args.out)
        say(f"image cases ({time.time() - t0:.0f} s)")
    t = time.time()
    video(args.models, manifest, args.out, args.show_unscaled)
    say(f"video clip ({time.time() - t:.0f} s); reference written in {time.time() - t0:.0f} s")


if __name__ == "__main__":
    main()
