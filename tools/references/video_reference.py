#!/usr/bin/env python3
"""Reference run of Meta's PyTorch SAM2VideoPredictor for the video tracker (issue 19).

Generates a deterministic 11-frame clip (1024x1024, so that the predictor's own PIL resize is an
identity: two coloured shapes moving across a textured background and crossing, a distractor),
writes it as the folder of JPEGs `init_state` reads, and stores the exact RGB PIL decoded from
those JPEGs (what the predictor saw) as raw uint8. Then, on the checkpoint written by
tools/models/export_video.py (`--models`), built by `build_sam2_video_predictor` on the CPU:

1. frame 0: object 1 gets two clicks (positive, negative), object 2 a box;
2. `propagate_in_video` from frame 0 to the correction frame 8 (pass 1; from frame 7 on, the
   memory bank is full: the conditioning frame and the 6 frames before);
3. a correction click on frame 8 (already tracked) for object 1, where the shapes cross;
4. `propagate_in_video` again from the correction frame (pass 2), then backwards from it to
   frame BACKWARD_TO (pass 3).

Every frame costs seconds of memory attention on a CPU, so no frame is tracked that would add
nothing: pass 2 starts at the correction (from frame 0 it would first recompute pass 1's frames
identically), the clip is as short as the full memory bank allows, and the backward pass stops
at frame BACKWARD_TO (its frames attend to the tracked frames after them, four at frame 5, and
to both conditioning frames; the full bank is pass 1's and pass 2's, and frames 3-1 would add more
of the same kind at seconds each). Steps 3 and 4 run with add_all_frames_to_correct_as_cond=True (`correct_as_cond`, the library's default): the
corrected frame becomes a conditioning frame; pass 2 runs forward over frames 8-10 (attending to
both conditioning frames), pass 3 backward over 8-5 (`reverse=True`: each frame attends to the
frames after it, computed in passes 2 and 3, and to both conditioning frames, the future one
included). The predictor's own default (the correction stored as a tracked frame) is the
`default` scenario of tools/references/edgetam_reference.py, where the tests compare it; here it would be
computed for no test, so it is not (`SCENARIOS`).

Per frame and object it records the low-res mask logits (256x256 f32, `pred_masks` as the
predictor stores them), the object score logit and the object pointer (256 f32); also the
outputs of the prompt calls themselves. SAM2's fill-holes post-processing needs its CUDA
extension (`sam2._C`); the reference records whether it was skipped (it is, on a CPU) and the
tracker then skips it too. Writes into `--out`: `frames/NNNNN.jpg`, `frames_rgb.u8`
([11,1024,1024,3] raw), `*.npy` arrays (a pass's arrays are [frame of the pass, object, ...], objects in the order
they were first prompted) and `reference.json` (prompts, passes, index of every array).

    python tools/references/video_reference.py --models DIR --out DIR
"""

import argparse
import copy
import json
import os
import sys
import time
import warnings

import numpy as np
import torch
from PIL import Image

NUM_FRAMES = 11
# The motion of the shapes is sampled at this many of the original clip's time steps a frame,
# so that frame 8, the correction, is where the shapes cross.
TIME_SCALE = 15.0 / 8.0
SIZE = 1024
CONFIG = "configs/sam2.1/sam2.1_hiera_t.yaml"

# Prompts, in video pixels (x, y). Object 1: the red disc, object 2: the blue square.
PROMPTS = [
    {"frame": 0, "obj_id": 1, "points": [[200, 500], [200, 820]], "labels": [1, 0]},
    {"frame": 0, "obj_id": 2, "box": [715, 375, 925, 585]},
]
CORRECTION = {"frame": 8, "obj_id": 1, "points": [[420, 520]], "labels": [1]}
# Where the backward pass from the correction stops.
BACKWARD_TO = 5
# The runs from the state after pass 1: (name, add_all_frames_to_correct_as_cond, the passes
# after the correction as (start, last) frames).
SCENARIOS = [("correct_as_cond", True, [(CORRECTION["frame"], NUM_FRAMES - 1),
                                        (CORRECTION["frame"], BACKWARD_TO)])]


def say(msg):
    print(f"[video-reference] {msg}", file=sys.stderr, flush=True)


def disc_centre(t):
    return 200.0 + 20.0 * t, 500.0 + 100.0 * np.sin(t / 5.0)


def square_centre(t):
    return 820.0 - 18.0 * t, 480.0


def make_clip():
    """[11,1024,1024,3] uint8: textured background (smooth colour waves + seeded noise), a
    green triangle drifting down, the red disc (r 110) moving right along a sine, the blue square
    (side 200) moving left, drawn over the disc where they cross (frames ~6-11)."""
    rng = np.random.default_rng(20261201)
    yy, xx = np.mgrid[0:SIZE, 0:SIZE].astype(np.float64)
    base = np.stack([
        120 + 40 * np.sin(xx / 37.0) * np.cos(yy / 53.0),
        110 + 35 * np.sin((xx + yy) / 61.0),
        100 + 30 * np.cos(xx / 29.0 - yy / 41.0),
    ], axis=-1)
    noise = rng.normal(0, 12, size=(SIZE, SIZE, 3))
    background = np.clip(base + noise, 0, 255)
    frames = np.empty((NUM_FRAMES, SIZE, SIZE, 3), np.uint8)
    for frame in range(NUM_FRAMES):
        t = frame * TIME_SCALE
        img = background.copy()
        # distractor: a green triangle
        ty = 120 + 8 * t
        tri = (yy >= ty) & (yy <= ty + 160) & (np.abs(xx - 520) <= (yy - ty) * 0.6)
        img[tri] = [60, 190, 70]
        cx, cy = disc_centre(t)
        disc = (xx - cx) ** 2 + (yy - cy) ** 2 <= 110 ** 2
        img[disc] = [210, 40, 40] + 0.25 * noise[disc]
        sx, sy = square_centre(t)
        square = (np.abs(xx - sx) <= 100) & (np.abs(yy - sy) <= 100)
        img[square] = [40, 60, 200] + 0.25 * noise[square]
        frames[frame] = np.clip(np.rint(img), 0, 255).astype(np.uint8)
    return frames


def write_clip(out_dir):
    """JPEGs for init_state and the RGB PIL decodes from them (what the predictor sees)."""
    jpeg_dir = os.path.join(out_dir, "frames")
    os.makedirs(jpeg_dir, exist_ok=True)
    decoded = np.empty((NUM_FRAMES, SIZE, SIZE, 3), np.uint8)
    for t, frame in enumerate(make_clip()):
        path = os.path.join(jpeg_dir, f"{t:05d}.jpg")
        Image.fromarray(frame).save(path, quality=95)
        decoded[t] = np.array(Image.open(path).convert("RGB"))
    decoded.tofile(os.path.join(out_dir, "frames_rgb.u8"))
    return jpeg_dir


def frame_output(out):
    return (out["pred_masks"][0, 0].float().numpy().copy(),
            float(out["object_score_logits"].reshape(-1)[0]),
            out["obj_ptr"][0].float().numpy().copy())


def collect_pass(predictor, state, frames):
    """The stored output per frame (of `frames`) and object after a propagation."""
    num_obj = len(state["obj_ids"])
    logits = np.zeros((len(frames), num_obj, 256, 256), np.float32)
    scores = np.zeros((len(frames), num_obj), np.float32)
    ptrs = np.zeros((len(frames), num_obj, 256), np.float32)
    kinds = [[None] * num_obj for _ in frames]
    for i in range(num_obj):
        od = state["output_dict_per_obj"][i]
        for j, t in enumerate(frames):
            if t in od["cond_frame_outputs"]:
                out, kinds[j][i] = od["cond_frame_outputs"][t], "cond"
            else:
                out, kinds[j][i] = od["non_cond_frame_outputs"][t], "non_cond"
            logits[j, i], scores[j, i], ptrs[j, i] = frame_output(out)
    return logits, scores, ptrs, kinds, frames


def propagate(predictor, state, start, last):
    """propagate_in_video over frames start..last, backwards when last < start (its
    max_frame_num_to_track counts the frames after the start frame)."""
    reverse = last < start
    yielded = []
    for frame_idx, obj_ids, masks in predictor.propagate_in_video(
            state, start_frame_idx=start, max_frame_num_to_track=abs(last - start),
            reverse=reverse):
        yielded.append(frame_idx)
    frames = list(range(start, last - 1, -1)) if reverse else list(range(start, last + 1))
    assert yielded == frames, yielded
    return collect_pass(predictor, state, frames)


def add_prompt(predictor, state, prompt):
    kwargs = {}
    if "points" in prompt:
        kwargs["points"] = np.array(prompt["points"], np.float32)
        kwargs["labels"] = np.array(prompt["labels"], np.int32)
    if "box" in prompt:
        kwargs["box"] = np.array(prompt["box"], np.float32)
    predictor.add_new_points_or_box(state, frame_idx=prompt["frame"], obj_id=prompt["obj_id"],
                                    **kwargs)
    idx = state["obj_id_to_idx"][prompt["obj_id"]]
    temp = state["temp_output_dict_per_obj"][idx]
    out = temp["cond_frame_outputs"].get(prompt["frame"])
    kind = "cond"
    if out is None:
        out, kind = temp["non_cond_frame_outputs"][prompt["frame"]], "non_cond"
    return frame_output(out), kind


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--models", required=True, help="tools/models/export_video.py's output")
    parser.add_argument("--out", required=True)
    args = parser.parse_args()
    os.makedirs(args.out, exist_ok=True)
    torch.set_num_threads(os.cpu_count() or 1)
    from sam2.build_sam import build_sam2_video_predictor

    t0 = time.time()
    jpeg_dir = write_clip(args.out)
    say(f"clip written ({time.time() - t0:.0f} s)")

    checkpoint = os.path.join(args.models, "sam2.1_hiera_tiny_video.pt")
    predictor = build_sam2_video_predictor(CONFIG, ckpt_path=checkpoint, device="cpu")
    index = {
        "video_size": [SIZE, SIZE],
        "num_frames": NUM_FRAMES,
        "frames_rgb": {"file": "frames_rgb.u8", "dtype": "uint8",
                       "shape": [NUM_FRAMES, SIZE, SIZE, 3]},
        "jpeg_dir": "frames",
        "checkpoint": os.path.relpath(checkpoint, args.out),
        "config": CONFIG,
        "builder": "sam2.build_sam.build_sam2_video_predictor (device cpu)",
        "predictor_settings": {k: getattr(predictor, k) for k in [
            "fill_hole_area", "non_overlap_masks", "clear_non_cond_mem_around_input",
            "binarize_mask_from_pts_for_mem_enc", "num_maskmem", "max_obj_ptrs_in_encoder",
            "max_cond_frames_in_attn", "memory_temporal_stride_for_eval",
            "multimask_min_pt_num", "multimask_max_pt_num"]},
        "prompts": PROMPTS,
        "correction": CORRECTION,
        "arrays": {},
    }

    def save(name, array):
        np.save(os.path.join(args.out, name + ".npy"), np.ascontiguousarray(array))
        index["arrays"][name] = {"file": name + ".npy", "dtype": str(array.dtype),
                                 "shape": list(array.shape)}

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with torch.inference_mode():
            state = predictor.init_state(jpeg_dir)
            prompt_out = [add_prompt(predictor, state, p) for p in PROMPTS]
            t = time.time()
            pass1 = propagate(predictor, state, 0, CORRECTION["frame"])
            say(f"pass 1 ({time.time() - t:.0f} s)")
            base_state = copy.deepcopy(state)
            scenarios = {}
            for name, as_cond, spans in SCENARIOS:
                st = copy.deepcopy(base_state)
                predictor.add_all_frames_to_correct_as_cond = as_cond
                corr_out, corr_kind = add_prompt(predictor, st, CORRECTION)
                passes = []
                for start, last in spans:
                    t = time.time()
                    passes.append(propagate(predictor, st, start, last))
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
        # Passes in the order they ran: `pass2`, `pass3`, ... (frames in processing order).
        for k, (logits, scores, ptrs, kinds, frames) in enumerate(passes):
            key = f"pass{k + 2}"
            save(f"{name}_{key}_logits", logits)
            save(f"{name}_{key}_scores", scores)
            save(f"{name}_{key}_ptrs", ptrs)
            index["scenarios"][name][key] = {
                "start_frame": frames[0], "frames": frames, "kinds": kinds,
                "direction": "backward" if len(frames) > 1 and frames[1] < frames[0]
                else "forward"}
    with open(os.path.join(args.out, "reference.json"), "w") as f:
        json.dump(index, f, indent=1)
    say(f"reference written in {time.time() - t0:.0f} s (fill holes: {index['fill_holes'][:7]})")


if __name__ == "__main__":
    main()
