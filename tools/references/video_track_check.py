#!/usr/bin/env python3
"""SAM2's video tracker in numpy + onnxruntime, on our four ONNX modules (issue 19), checked
against Meta's PyTorch SAM2VideoPredictor (tools/references/video_reference.py).

This file is the executable statement of the tracking rules that the Rust tracker copies: the
rules of SAM2VideoPredictor (sam-2-uni 1.0 = facebookresearch/sam2, `sam2_video_predictor.py`
and `modeling/sam2_base.py`) for the SAM2.1 configuration as `build_sam2_video_predictor` builds
it, one object at a time (objects never interact: non_overlap_masks is off). Each rule is a
numbered comment (R1, R2, ...) at the place it is applied; the report prints the same list.

It replays the reference's session (prompts on frame 0, propagation to the correction frame, a correction
click there, forward propagation again, in both of the reference's scenarios) and, per frame and
object,
compares the low-res logits (correlation; IoU of the masks over the pixels where the
reference's |logit| >= 1), the object score logit and the object pointer. Exits non-zero when a
tolerance is missed.

    python tools/references/video_track_check.py --models DIR --reference DIR
"""

import argparse
import copy
import json
import os
import sys
import time

import numpy as np
import onnxruntime as ort

# SAM2.1 settings (configs/sam2.1/sam2.1_hiera_t.yaml + build_sam2_video_predictor's overrides)
IMAGE_SIZE = 1024
NUM_MASKMEM = 7  # R5: 1 "slot" for the conditioning frames + 6 previous frames
MAX_OBJ_PTRS_IN_ENCODER = 16  # R7
MULTIMASK_MIN_PT_NUM, MULTIMASK_MAX_PT_NUM = 0, 1  # R3
MEAN = np.array([0.485, 0.456, 0.406], np.float32)
STD = np.array([0.229, 0.224, 0.225], np.float32)

# Tolerances (ours vs PyTorch, every frame and object). Measured: 1 - correlation ~1e-11, IoU 1,
# score ~1e-7, pointer ~1e-6; the score and pointer bounds keep a 100x margin. Random weights
# make the memory path weak (cross attention to random keys is nearly uniform), so a wrong rule
# can move the outputs by little: on frame 1, a reversed temporal code moves the pointer by
# 1.3e-5, no bfloat16 rounding by 4e-6 (both pass), no binarised prompt memory by 1.6e-2 and no
# spatial position encoding by 2.5e-4 (both caught).
MIN_CORRELATION = 0.999
MIN_IOU = 0.99
MAX_SCORE_ABS = 1e-4  # object score logit, absolute
MAX_PTR_REL = 1e-4  # ||ours - ref|| / ||ref|| of the object pointer


# ----------------------------------------------------------------------------------------------
# numeric helpers


def to_bfloat16(x):
    """R10: SAM2VideoPredictor stores every memory feature as bfloat16 (`maskmem_features.to(
    torch.bfloat16)`) and memory attention reads them back as float32: round each float32 to
    the nearest bfloat16 (ties to even), returned as float32."""
    bits = np.ascontiguousarray(x, np.float32).view(np.uint32)
    rounded = (bits + np.uint32(0x7FFF) + ((bits >> np.uint32(16)) & np.uint32(1))) \
        & np.uint32(0xFFFF0000)
    return rounded.view(np.float32)


def preprocess(rgb):
    """R1: a frame as load_video_frames sees it: RGB uint8, resized to 1024x1024 (identity here:
    the clip is 1024x1024; other sizes need PIL's resize, not implemented), / 255 in float64,
    then float32, then (x - mean) / std in float32. -> [1,3,1024,1024]."""
    assert rgb.shape == (IMAGE_SIZE, IMAGE_SIZE, 3), "frames must be 1024x1024 here"
    x = (rgb / 255.0).astype(np.float32)
    x = (x - MEAN) / STD
    return np.ascontiguousarray(x.transpose(2, 0, 1)[None])


def prompt_points(prompt, video_w, video_h):
    """R2: add_new_points_or_box: a box is two points labelled 2, 3, put before the clicks;
    coordinates / (W, H) * 1024 in float32. -> coords [1,P,2] f32, labels [1,P] f32."""
    coords, labels = [], []
    if "box" in prompt:
        x1, y1, x2, y2 = prompt["box"]
        coords += [[x1, y1], [x2, y2]]
        labels += [2, 3]
    for (x, y), label in zip(prompt.get("points", []), prompt.get("labels", [])):
        coords.append([x, y])
        labels.append(label)
    c = np.asarray(coords, np.float32)[None]
    c = c / np.array([video_w, video_h], np.float32) * np.float32(IMAGE_SIZE)
    return c.astype(np.float32), np.asarray(labels, np.float32)[None]


# ----------------------------------------------------------------------------------------------
# the four modules


class Modules:
    def __init__(self, models_dir, manifest):
        opts = ort.SessionOptions()
        opts.log_severity_level = 3

        def session(key):
            path = os.path.join(models_dir, manifest["files"][key])
            return ort.InferenceSession(path, opts, providers=["CPUExecutionProvider"])

        self.encoder = session("image_encoder")
        self.attention = session("memory_attention")
        self.decoder = session("image_decoder")
        self.mem_encoder = session("memory_encoder")
        self.attention_inputs = {i.name for i in self.attention.get_inputs()}

    def encode_image(self, image):
        names = [o.name for o in self.encoder.get_outputs()]
        return dict(zip(names, self.encoder.run(None, {"image": image})))


class FrameOutput:
    """What SAM2 stores per frame and object (the "compact" output)."""

    def __init__(self, pred_mask, obj_ptr, score, mask_for_mem):
        self.pred_mask = pred_mask  # [1,1,256,256] low-res logits
        self.obj_ptr = obj_ptr  # [1,256]
        self.score = score  # [1,1] object score logit
        self.mask_for_mem = mask_for_mem  # [1,1,1024,1024], for encoding this frame's memory
        self.maskmem_features = None  # [1,64,64,64], bfloat16-rounded (R10)


class ObjectState:
    """One object's slice of SAM2VideoPredictor's inference state."""

    def __init__(self):
        # dicts keep insertion order, which is SAM2's order of the conditioning frames (R6)
        self.cond = {}  # frame -> FrameOutput (conditioning frames)
        self.non_cond = {}  # frame -> FrameOutput (tracked or corrected frames)
        self.temp = {"cond": {}, "non_cond": {}}  # prompted since the last propagation
        self.tracked = set()  # frames_tracked_per_obj


class Tracker:
    def __init__(self, modules, frames_rgb, add_all_frames_to_correct_as_cond=False):
        self.m = modules
        self.frames = frames_rgb
        self.num_frames = len(frames_rgb)
        self.video_h, self.video_w = frames_rgb.shape[1:3]
        self.add_all_frames_to_correct_as_cond = add_all_frames_to_correct_as_cond
        self.objects = {}  # obj_id -> ObjectState, in the order objects were first prompted
        self.features = {}  # frame -> encoder outputs (SAM2 recomputes; same values)
        self.maskmem_pos_enc = None  # [4096,1,64], the same for every frame
        self.temporal_code = None  # [7,1,1,64] maskmem_tpos_enc

    # -- per frame ----------------------------------------------------------------------------

    def frame_features(self, t):
        if t not in self.features:
            self.features[t] = self.m.encode_image(preprocess(self.frames[t]))
        return self.features[t]

    def memory_conditioned_embedding(self, t, obj):
        """R5-R8: SAM2Base._prepare_memory_conditioned_features for a frame that is not an
        initial conditioning frame."""
        feats = self.frame_features(t)
        # R5: the spatial memories: every conditioning frame (max_cond_frames_in_attn = -1, so
        # all of them, even ones after t), temporal position 0; then the frames t-6 .. t-1 from
        # the non-conditioning outputs (memory_temporal_stride_for_eval = 1), temporal position
        # 1 (t-6) .. 6 (t-1); a missing frame is skipped.
        t_pos_and_prevs = [(0, out) for out in obj.cond.values()]
        for t_pos in range(1, NUM_MASKMEM):
            prev = obj.non_cond.get(t - (NUM_MASKMEM - t_pos))
            if prev is not None:
                t_pos_and_prevs.append((t_pos, prev))
        memory_1, memory_pos = [], []
        for t_pos, prev in t_pos_and_prevs:
            memory_1.append(prev.maskmem_features[0])
            # R6: position of a memory frame = maskmem_pos_enc + maskmem_tpos_enc[7 - t_pos - 1]
            memory_pos.append(self.maskmem_pos_enc + self.temporal_code[NUM_MASKMEM - t_pos - 1])
        # R7: object pointers: the conditioning frames at or before t (only_obj_ptrs_in_the_past_
        # for_eval), offset t - t_cond; then the non-conditioning frames t-1, t-2, ... down to
        # t-15 (or frame 0), offset 1, 2, ...; at most min(num_frames, 16) - 1 of the latter.
        max_ptrs = min(self.num_frames, MAX_OBJ_PTRS_IN_ENCODER)
        pos_and_ptrs = [(t - tc, out.obj_ptr[0]) for tc, out in obj.cond.items() if tc <= t]
        for t_diff in range(1, max_ptrs):
            if t - t_diff < 0:
                break
            out = obj.non_cond.get(t - t_diff)
            if out is not None:
                pos_and_ptrs.append((t_diff, out.obj_ptr[0]))
        # R8: pointer temporal position = offset / (max_ptrs - 1), sine-encoded and projected in
        # the graph (obj_ptr_tpos); the caller's rows of memory_pos_embed for pointers are 0
        obj_ptr_tpos = np.array([p for p, _ in pos_and_ptrs], np.float32) / np.float32(max_ptrs - 1)
        memory_0 = np.stack([ptr for _, ptr in pos_and_ptrs]).astype(np.float32)
        n = len(pos_and_ptrs)
        memory_pos.append(np.zeros((4 * n, 1, 64), np.float32))
        feeds = {
            "current_vision_feat": feats["vision_feats"],
            "current_vision_pos_embed": feats["vision_pos_embed"],
            "memory_0": memory_0,
            "memory_1": np.stack(memory_1).astype(np.float32),
            "memory_pos_embed": np.concatenate(memory_pos).astype(np.float32),
        }
        # (an export whose model adds no temporal encoding to the pointers, EdgeTAM's, has no
        # obj_ptr_tpos input: tools/edgetam_track_check.py)
        if "obj_ptr_tpos" in self.m.attention_inputs:
            feeds["obj_ptr_tpos"] = obj_ptr_tpos
        (embed,) = self.m.attention.run(None, feeds)
        return embed

    def run_frame(self, t, obj, is_init_cond_frame, points, mask_input):
        """SAM2Base._track_step + _forward_sam_heads: one object on one frame."""
        feats = self.frame_features(t)
        if is_init_cond_frame:
            # R4: an initial conditioning frame uses no memory: the decoder gets
            # pix_feat + no_mem_embed (directly_add_no_mem_embed), i.e. vision_feats
            embed = feats["vision_feats"]
        else:
            embed = self.memory_conditioned_embedding(t, obj)
        if points is None:
            # R3a: no clicks: one padding point (0,0) labelled -1 (the graph appends SAM2's own
            # padding point after it, as the prompt encoder does)
            coords = np.zeros((1, 1, 2), np.float32)
            labels = -np.ones((1, 1), np.float32)
            num_pts = 0
        else:
            coords, labels = points
            num_pts = labels.shape[1]
        # R3: multimask iff multimask_output_in_sam and (initial cond frame or
        # multimask_output_for_tracking, both true in SAM2.1) and 0 <= #points (a box is 2) <= 1
        multimask = MULTIMASK_MIN_PT_NUM <= num_pts <= MULTIMASK_MAX_PT_NUM
        obj_ptr, mask_for_mem, pred_mask, score = self.m.decoder.run(None, {
            "point_coords": coords,
            "point_labels": labels,
            "image_embed": embed,
            "high_res_feats_0": feats["high_res_feat0"],
            "high_res_feats_1": feats["high_res_feat1"],
            "mask_input": mask_input if mask_input is not None
            else np.zeros((1, 1, 256, 256), np.float32),
            "has_mask_input": np.array([0.0 if mask_input is None else 1.0], np.float32),
            "multimask_output": np.array([1.0 if multimask else 0.0], np.float32),
        })
        # R12: fill_hole_area = 8 needs SAM2's CUDA extension; without it (the reference, on a
        # CPU) SAM2 skips it, and so do we
        return FrameOutput(pred_mask, obj_ptr, score, mask_for_mem)

    def encode_memory(self, t, out, is_mask_from_pts):
        """R9: SAM2Base._encode_new_memory; masks from clicks are binarised (R9a)."""
        feats, pos, tcode = self.m.mem_encoder.run(None, {
            "mask_for_mem": out.mask_for_mem,
            "pix_feat": self.frame_features(t)["pix_feat"],
            "object_score_logits": out.score,
            "is_mask_from_pts": np.array([1.0 if is_mask_from_pts else 0.0], np.float32),
        })
        out.maskmem_features = to_bfloat16(feats)  # R10
        out.mask_for_mem = None  # not needed any more
        if self.maskmem_pos_enc is None:
            self.maskmem_pos_enc, self.temporal_code = pos, tcode

    # -- the predictor's API ------------------------------------------------------------------

    def add_points_or_box(self, t, obj_id, prompt):
        """add_new_points_or_box (clear_old_points=True)."""
        obj = self.objects.setdefault(obj_id, ObjectState())
        points = prompt_points(prompt, self.video_w, self.video_h)
        # R11: a frame this object has not been tracked on is an initial conditioning frame
        # (no memory); a tracked one gets a correction: memory as when tracking, plus the
        # frame's previous low-res logits (clamped to +-32) as mask input. The output is a
        # conditioning one if initial (or add_all_frames_to_correct_as_cond), else not.
        is_init = t not in obj.tracked
        key = "cond" if (is_init or self.add_all_frames_to_correct_as_cond) else "non_cond"
        prev = obj.temp[key].get(t)  # the latest output on this frame: temp first
        if prev is None:
            prev = obj.cond.get(t)
        if prev is None:
            prev = obj.non_cond.get(t)
        mask_input = None if prev is None else np.clip(prev.pred_mask, -32.0, 32.0)
        out = self.run_frame(t, obj, is_init, points, mask_input)
        obj.temp[key][t] = out  # no memory yet: encoded at the next propagation (R9a)
        return out

    def preflight(self):
        """propagate_in_video_preflight: the prompted frames' memories (from their masks,
        binarised as masks from clicks), then they join the object's outputs."""
        for obj in self.objects.values():
            for key in ("non_cond", "cond"):
                for t, out in obj.temp[key].items():
                    if out.maskmem_features is None:
                        self.encode_memory(t, out, is_mask_from_pts=True)  # R9a
                    (obj.cond if key == "cond" else obj.non_cond)[t] = out
                obj.temp[key].clear()
            for t in obj.cond:
                obj.non_cond.pop(t, None)

    def propagate(self, start=None, last=None):
        """propagate_in_video (forward), frames start..last: by default from the first
        conditioning frame of any object to the last frame. Conditioning frames keep their
        output; every other frame (a corrected non-conditioning one too) is tracked again:
        memory, no clicks, memory encoded from the predicted mask (not binarised)."""
        self.preflight()
        if start is None:
            start = min(t for obj in self.objects.values() for t in obj.cond)
        if last is None:
            last = self.num_frames - 1
        results = {}
        for t in range(start, last + 1):
            for obj_id, obj in self.objects.items():
                if t in obj.cond:
                    out = obj.cond[t]
                else:
                    out = self.run_frame(t, obj, is_init_cond_frame=False, points=None,
                                         mask_input=None)
                    self.encode_memory(t, out, is_mask_from_pts=False)
                    obj.non_cond[t] = out
                obj.tracked.add(t)
                results[(t, obj_id)] = out
        return results


RULES = """R1 preprocessing: RGB/255 (f64) -> f32, (x - mean)/std, 1024x1024 stretch (identity here)
R2 prompts: box = points labelled 2,3 first; coords / (W,H) * 1024 in f32; new clicks replace old
R3 multimask iff 0 <= #points <= 1 (box = 2 points); tracking frames (no clicks, one padding
   point) are multimask; single mask -> SAM2's dynamic multimask via stability (in the graph)
R4 initial conditioning frame: no memory attention, decoder embedding = pix_feat + no_mem_embed
R5 spatial memory: all conditioning frames (t_pos 0, future ones too) + non-cond frames t-6..t-1
R6 memory position = maskmem_pos_enc + maskmem_tpos_enc[7 - t_pos - 1]; cond frames in the order
   they became conditioning
R7 pointers: cond frames <= t (offset t - t_cond), then non-cond t-1 .. t-15 (offset 1..15)
R8 pointer temporal position = offset / (min(num_frames,16) - 1), sine + projection in the graph
R9 memory of a tracked frame: sigmoid(logits)*20-10 of the upsampled chosen mask; R9a memory of a
   prompted frame: encoded at the next propagation from the binarised mask (is_mask_from_pts)
R10 memory features rounded to bfloat16 (as the predictor stores them)
R11 a click on a frame not yet tracked -> initial conditioning frame; on a tracked frame ->
   correction: memory + previous low-res logits (clamped +-32) as mask input; stored as non-cond
   (default) or cond (add_all_frames_to_correct_as_cond); propagation re-tracks non-cond frames
R12 fill holes (fill_hole_area 8): skipped, as the reference (no CUDA extension) skips it
R13 objects are independent: each has its own memory, pointers and outputs"""


# ----------------------------------------------------------------------------------------------
# comparison


def compare(ours, ref_logits, ref_score, ref_ptr):
    a = ours.pred_mask.reshape(-1).astype(np.float64)
    b = ref_logits.reshape(-1).astype(np.float64)
    if a.std() == 0 or b.std() == 0:
        corr = 1.0 if np.array_equal(a, b) else 0.0
    else:
        corr = float(np.corrcoef(a, b)[0, 1])
    confident = np.abs(b) >= 1.0
    pa, pb = (a > 0) & confident, (b > 0) & confident
    union = np.count_nonzero(pa | pb)
    iou = 1.0 if union == 0 else np.count_nonzero(pa & pb) / union
    s = float(ours.score.reshape(-1)[0])
    score_abs = abs(s - float(ref_score))
    score_rel = score_abs / max(abs(float(ref_score)), 1e-12)
    ptr_rel = float(np.linalg.norm(ours.obj_ptr[0] - ref_ptr) / np.linalg.norm(ref_ptr))
    fg = int(np.count_nonzero(b > 0))
    return {"corr": corr, "iou": iou, "score_abs": score_abs, "score_rel": score_rel,
            "ptr_rel": ptr_rel, "ref_score": float(ref_score), "ref_fg": fg}


class Report:
    def __init__(self):
        self.rows = []

    def add(self, label, t, obj_id, kind, c):
        self.rows.append((label, t, obj_id, kind, c))
        ok = (c["corr"] >= MIN_CORRELATION and c["iou"] >= MIN_IOU
              and c["score_abs"] <= MAX_SCORE_ABS and c["ptr_rel"] <= MAX_PTR_REL)
        print(f"{label:<24} frame {t:2d} obj {obj_id} {kind:<8} corr {c['corr']:.6f} "
              f"iou {c['iou']:.4f} score {c['ref_score']:+.4f} abs {c['score_abs']:.1e} "
              f"rel {c['score_rel']:.1e} ptr rel {c['ptr_rel']:.1e} fg {c['ref_fg']:6d}"
              f"{'' if ok else '  <-- FAIL'}")
        return ok

    def summary(self):
        cs = [r[4] for r in self.rows]
        return {"cases": len(cs),
                "min_corr": min(c["corr"] for c in cs),
                "min_iou": min(c["iou"] for c in cs),
                "max_score_abs": max(c["score_abs"] for c in cs),
                "max_score_rel": max(c["score_rel"] for c in cs),
                "max_ptr_rel": max(c["ptr_rel"] for c in cs)}


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--models", help="directory with manifest.json and the four "
                        "ONNX files (default $SAM2_VIDEO_MODELS)")
    parser.add_argument("--reference", help="tools/references/video_reference.py's output (default: "
                        "reference/ in the models directory)")
    parser.add_argument("--threads", type=int, default=0)
    args = parser.parse_args()
    models = args.models or os.environ.get("SAM2_VIDEO_MODELS")
    if not models:
        parser.error("--models or SAM2_VIDEO_MODELS")
    with open(os.path.join(models, "manifest.json")) as f:
        manifest = json.load(f)
    ref_dir = args.reference or os.path.join(models, os.path.dirname(manifest["reference"]))
    with open(os.path.join(ref_dir, "reference.json")) as f:
        ref = json.load(f)
    assert manifest["num_maskmem"] == NUM_MASKMEM
    assert manifest["max_obj_ptrs_in_encoder"] == MAX_OBJ_PTRS_IN_ENCODER
    s = ref["predictor_settings"]
    assert s["multimask_min_pt_num"] == MULTIMASK_MIN_PT_NUM
    assert s["multimask_max_pt_num"] == MULTIMASK_MAX_PT_NUM
    assert s["max_cond_frames_in_attn"] == -1 and s["memory_temporal_stride_for_eval"] == 1
    assert not s["non_overlap_masks"] and not s["clear_non_cond_mem_around_input"]
    assert s["binarize_mask_from_pts_for_mem_enc"]
    assert ref["fill_holes"].startswith("skipped"), "the reference filled holes: R12 must change"

    def arr(name):
        return np.load(os.path.join(ref_dir, ref["arrays"][name]["file"]))

    frames = np.fromfile(os.path.join(ref_dir, ref["frames_rgb"]["file"]), np.uint8)
    frames = frames.reshape(ref["frames_rgb"]["shape"])
    modules = Modules(models, manifest)
    print("rules:\n" + RULES + "\n")
    report = Report()
    ok = True
    t0 = time.time()
    features = {}
    obj_ids = [p["obj_id"] for p in ref["prompts"]]
    obj_ids = list(dict.fromkeys(obj_ids))

    def start_session(as_cond):
        tr = Tracker(modules, frames, add_all_frames_to_correct_as_cond=as_cond)
        tr.features = features  # the frames' encoder outputs are shared by both sessions
        outs = [tr.add_points_or_box(p["frame"], p["obj_id"], p) for p in ref["prompts"]]
        return tr, outs

    def copy_session(tr, as_cond):
        """The session after pass 1, copied (as the reference deep-copies its state)."""
        new = Tracker(modules, frames, add_all_frames_to_correct_as_cond=as_cond)
        new.features = features
        new.objects = copy.deepcopy(tr.objects)
        new.maskmem_pos_enc, new.temporal_code = tr.maskmem_pos_enc, tr.temporal_code
        return new

    def check_pass(label, results, logits, scores, ptrs, info):
        good = True
        for j, t in enumerate(info["frames"]):
            for i, obj_id in enumerate(obj_ids):
                c = compare(results[(t, obj_id)], logits[j, i], scores[j, i], ptrs[j, i])
                good &= report.add(label, t, obj_id, info["kinds"][j][i], c)
        return good

    # the prompts, then pass 1 (common to both scenarios)
    tracker, prompt_outs = start_session(False)
    for i, (p, out) in enumerate(zip(ref["prompts"], prompt_outs)):
        c = compare(out, arr(f"prompt{i}_logits"), arr(f"prompt{i}_score")[0], arr(f"prompt{i}_ptr"))
        ok &= report.add("prompt", p["frame"], p["obj_id"], p["stored_as"], c)
    info = ref["pass1"]
    pass1 = tracker.propagate(info["frames"][0], info["frames"][-1])
    ok &= check_pass("pass 1", pass1, arr("pass1_logits"), arr("pass1_scores"),
                     arr("pass1_ptrs"), info)
    print(f"[video-track-check] prompts + pass 1: {time.time() - t0:.0f} s", file=sys.stderr)

    after_pass1 = tracker
    for name, sc in ref["scenarios"].items():
        # the session after pass 1, with the scenario's storage rule for corrections (R11)
        tracker = copy_session(after_pass1, sc["add_all_frames_to_correct_as_cond"])
        corr = ref["correction"]
        out = tracker.add_points_or_box(corr["frame"], corr["obj_id"], corr)
        c = compare(out, arr(f"{name}_correction_logits"), arr(f"{name}_correction_score")[0],
                    arr(f"{name}_correction_ptr"))
        ok &= report.add(f"{name}: correction", corr["frame"], corr["obj_id"],
                         sc["correction_stored_as"], c)
        for key in sorted(k for k in sc if k.startswith("pass")):
            info = sc[key]
            if info.get("direction") == "backward":
                # This numpy model tracks forwards only; the Rust tests compare the library's
                # backward tracking with the reference.
                print(f"[video-track-check] {name}: {key} is backward, not modelled here",
                      file=sys.stderr)
                continue
            result = tracker.propagate(info["frames"][0], info["frames"][-1])
            ok &= check_pass(f"{name}: {key}", result, arr(f"{name}_{key}_logits"),
                             arr(f"{name}_{key}_scores"), arr(f"{name}_{key}_ptrs"), info)
        print(f"[video-track-check] {name}: {time.time() - t0:.0f} s", file=sys.stderr)

    summary = report.summary()
    print("\nsummary: " + json.dumps(summary))
    print(f"tolerances: corr >= {MIN_CORRELATION}, IoU (|ref logit| >= 1) >= {MIN_IOU}, "
          f"score abs <= {MAX_SCORE_ABS}, pointer rel <= {MAX_PTR_REL}")
    if not ok:
        print("video tracker parity: FAILED", file=sys.stderr)
        sys.exit(1)
    print(f"video tracker parity: OK ({summary['cases']} frame/object outputs, "
          f"{time.time() - t0:.0f} s)")


if __name__ == "__main__":
    main()
