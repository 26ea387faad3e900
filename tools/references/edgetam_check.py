#!/usr/bin/env python3
"""Checks our EdgeTAM export (sam2-export-edgetam) against EdgeTAM's own PyTorch predictors
(tools/references/edgetam_reference.py), in Python with onnxruntime, and times its modules (issue 31). A
developer's check, as tools/references/video_track_check.py is for SAM2; the Rust tests compare the library.

* image: per pair and case of `image_reference.json`, the ONNX pair on the predictor's own input
  tensor against EdgeTAM's SAM2ImagePredictor: IoU of the masks (goal >= 0.99), score
  difference (goal <= 1e-3), correlation of the low-res logits; and tools/references/real_reference.py's
  Python pipeline (OpenCV's resize) against it, reported.
* video: tools/references/video_track_check.py's tracker (SAM2's rules in numpy on the four
  modules) with the rules in which EdgeTAM's video predictor (SAM2's first one) differs, E1-E3 below, replaying
  the reference's session forward (the prompts, pass 1, the correction in both scenarios and the
  forward passes after it; backward passes are left to the Rust tests, as video_track_check.py
  leaves them), per frame and object: correlation of the low-res logits (>= 0.999), IoU over
  pixels with |reference logit| >= 1 (>= 0.99), score and pointer.
* --timings: each module's median time on ONNX Runtime's CPU provider, 1 and 2 threads, at the
  tracker's steady state (7 memory frames, 16 pointers), beside SAM2.1 tiny's four modules from
  sam2-export-video when `--sam2 DIR` (default $SAM2_VIDEO_MODELS) has them.

Runs with numpy and onnxruntime (EdgeTAM's venv has both).

    python tools/references/edgetam_check.py --models DIR [--reference DIR] [--timings] [--sam2 DIR]
"""

import argparse
import copy
import json
import os
import statistics
import sys
import time

import numpy as np
import onnxruntime as ort

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import video_track_check as vtc  # noqa: E402

IMAGE_MIN_IOU = 0.99
IMAGE_MAX_SCORE = 1e-3

RULES = """E1 memory attention: no temporal encoding of the pointers (add_tpos_enc_to_obj_ptrs false):
   no obj_ptr_tpos; a memory frame is 512 tokens ([512,64]), its position maskmem_pos_enc [512,1,64]
   + maskmem_tpos_enc[7 - t_pos - 1]; no no-object spatial embedding
E2 propagation start (propagate_in_video_preflight): every frame prompted since the last
   propagation is consolidated over all objects: each object's memory there is encoded again from
   its latest mask (its prompt's, or else its tracked one), binarised as a mask from clicks, and
   stored as conditioning or not by the prompt's rule (R11) for every object
E3 a consolidated frame is never tracked again: conditioning or not, propagation returns its
   stored output (SAM2.1 re-tracks a corrected non-conditioning frame)"""


def say(msg):
    print(f"[edgetam-check] {msg}", file=sys.stderr, flush=True)


# ----------------------------------------------------------------------------------------------
# image


def unrle(counts, n):
    flat = np.zeros(n, np.uint8)
    pos, value = 0, 0
    for c in counts:
        flat[pos:pos + c] = value
        pos += c
        value ^= 1
    return flat.astype(bool)


def check_image(ref_dir):
    """`onnx` (the pair on the predictor's own input tensor) against `meta` (EdgeTAM's
    SAM2ImagePredictor), the goal; `python` (real_reference.py's pipeline: OpenCV's uint8
    resize) against `meta`, reported."""
    with open(os.path.join(ref_dir, "image_reference.json")) as f:
        ref = json.load(f)
    n = ref["width"] * ref["height"]
    ok = True
    for source, goal in (("onnx", True), ("python", False)):
        worst = {"iou": 1.0, "score": 0.0, "corr": 1.0}
        for pair in ref["pairs"]:
            for case in ref["cases"]:
                r = pair["results"][case["name"]]
                a, b = unrle(r[source]["rle"], n), unrle(r["meta"]["rle"], n)
                union = np.count_nonzero(a | b)
                iou = 1.0 if union == 0 else np.count_nonzero(a & b) / union
                ds = abs(r[source]["score"] - r["meta"]["score"])
                la = np.load(os.path.join(ref_dir, r[source]["low_res_logits"])).reshape(-1)
                lb = np.load(os.path.join(ref_dir, r["meta"]["low_res_logits"])).reshape(-1)
                corr = float(np.corrcoef(la.astype(np.float64), lb.astype(np.float64))[0, 1])
                good = not goal or (iou >= IMAGE_MIN_IOU and ds <= IMAGE_MAX_SCORE)
                ok &= good
                worst = {"iou": min(worst["iou"], iou), "score": max(worst["score"], ds),
                         "corr": min(worst["corr"], corr)}
                print(f"image {source:<6} vs meta {pair['decoder']:<34} {case['name']:<14} IoU "
                      f"{iou:.5f} score {r['meta']['score']:.4f} diff {ds:.1e} logits corr "
                      f"{corr:.6f} area {r['meta']['area']}{'' if good else '  <-- FAIL'}")
        print(f"image summary, {source} vs EdgeTAM's SAM2ImagePredictor: min IoU {worst['iou']:.5f}, "
              f"max score diff {worst['score']:.1e}, min logits corr {worst['corr']:.6f}"
              + (f" (goals IoU >= {IMAGE_MIN_IOU}, score <= {IMAGE_MAX_SCORE})" if goal else
                 " (reported: OpenCV rounds the resized image to uint8)"))
    return ok


# ----------------------------------------------------------------------------------------------
# video


class EdgeTamTracker(vtc.Tracker):
    """video_track_check.Tracker with E2 and E3 (E1 is in the modules' shapes)."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.consolidated = {"cond": set(), "non_cond": set()}

    def encode_memory(self, t, out, is_mask_from_pts):
        """R9 (video_track_check.Tracker.encode_memory) without object_score_logits (E1), and
        mask_for_mem kept: a later prompt on the frame encodes it again (E2)."""
        feats, pos, tcode = self.m.mem_encoder.run(None, {
            "mask_for_mem": out.mask_for_mem,
            "pix_feat": self.frame_features(t)["pix_feat"],
            "is_mask_from_pts": np.array([1.0 if is_mask_from_pts else 0.0], np.float32),
        })
        out.maskmem_features = vtc.to_bfloat16(feats)  # R10
        if self.maskmem_pos_enc is None:
            self.maskmem_pos_enc, self.temporal_code = pos, tcode

    def preflight(self):
        objs = list(self.objects.values())
        for key in ("non_cond", "cond"):
            frames = set().union(*(o.temp[key].keys() for o in objs))
            self.consolidated[key] |= frames
            for t in sorted(frames):
                for obj in objs:
                    out = obj.temp[key].get(t) or obj.cond.get(t) or obj.non_cond.get(t)
                    assert out is not None, "an object with no output on a prompted frame"
                    new = copy.copy(out)
                    self.encode_memory(t, new, is_mask_from_pts=True)  # E2
                    (obj.cond if key == "cond" else obj.non_cond)[t] = new
            for obj in objs:
                obj.temp[key].clear()
        for obj in objs:
            for t in obj.cond:
                obj.non_cond.pop(t, None)
        self.consolidated["non_cond"] -= self.consolidated["cond"]

    def propagate(self, start=None, last=None):
        self.preflight()
        results = {}
        for t in range(start, last + 1):
            for obj_id, obj in self.objects.items():
                if t in self.consolidated["cond"]:  # E3
                    out = obj.cond[t]
                elif t in self.consolidated["non_cond"]:
                    out = obj.non_cond[t]
                else:
                    out = self.run_frame(t, obj, is_init_cond_frame=False, points=None,
                                         mask_input=None)
                    self.encode_memory(t, out, is_mask_from_pts=False)
                    obj.non_cond[t] = out
                obj.tracked.add(t)
                results[(t, obj_id)] = out
        return results


def check_video(models, manifest, ref_dir):
    with open(os.path.join(ref_dir, "reference.json")) as f:
        ref = json.load(f)
    assert ref["family"] == "edgetam"
    s = ref["predictor_settings"]
    assert s["num_maskmem"] == vtc.NUM_MASKMEM and s["max_obj_ptrs_in_encoder"] == vtc.MAX_OBJ_PTRS_IN_ENCODER
    assert s["max_cond_frames_in_attn"] == -1 and s["memory_temporal_stride_for_eval"] == 1
    assert not s["non_overlap_masks"] and not s["clear_non_cond_mem_around_input"]
    assert not s["add_tpos_enc_to_obj_ptrs"] and s["binarize_mask_from_pts_for_mem_enc"]
    assert ref["fill_holes"].startswith("skipped")

    def arr(name):
        return np.load(os.path.join(ref_dir, ref["arrays"][name]["file"]))

    frames = np.fromfile(os.path.join(ref_dir, ref["frames_rgb"]["file"]), np.uint8)
    frames = frames.reshape(ref["frames_rgb"]["shape"])
    modules = vtc.Modules(models, manifest)
    print("rules (video_track_check.py's R1-R13, with):\n" + RULES + "\n")
    report = vtc.Report()
    ok = True
    t0 = time.time()
    features = {}
    obj_ids = list(dict.fromkeys(p["obj_id"] for p in ref["prompts"]))

    def check_pass(label, results, logits, scores, ptrs, info):
        good = True
        for j, t in enumerate(info["frames"]):
            for i, obj_id in enumerate(obj_ids):
                c = vtc.compare(results[(t, obj_id)], logits[j, i], scores[j, i], ptrs[j, i])
                good &= report.add(label, t, obj_id, info["kinds"][j][i], c)
        return good

    tracker = EdgeTamTracker(modules, frames)
    tracker.features = features
    for i, p in enumerate(ref["prompts"]):
        out = tracker.add_points_or_box(p["frame"], p["obj_id"], p)
        c = vtc.compare(out, arr(f"prompt{i}_logits"), arr(f"prompt{i}_score")[0], arr(f"prompt{i}_ptr"))
        ok &= report.add("prompt", p["frame"], p["obj_id"], p["stored_as"], c)
    info = ref["pass1"]
    ok &= check_pass("pass 1", tracker.propagate(info["frames"][0], info["frames"][-1]),
                     arr("pass1_logits"), arr("pass1_scores"), arr("pass1_ptrs"), info)
    say(f"prompts + pass 1: {time.time() - t0:.0f} s")
    after_pass1 = tracker
    for name, sc in ref["scenarios"].items():
        tracker = EdgeTamTracker(modules, frames, sc["add_all_frames_to_correct_as_cond"])
        tracker.features = features
        tracker.objects = copy.deepcopy(after_pass1.objects)
        tracker.consolidated = copy.deepcopy(after_pass1.consolidated)
        tracker.maskmem_pos_enc, tracker.temporal_code = after_pass1.maskmem_pos_enc, after_pass1.temporal_code
        corr = ref["correction"]
        out = tracker.add_points_or_box(corr["frame"], corr["obj_id"], corr)
        c = vtc.compare(out, arr(f"{name}_correction_logits"), arr(f"{name}_correction_score")[0],
                        arr(f"{name}_correction_ptr"))
        ok &= report.add(f"{name}: correction", corr["frame"], corr["obj_id"],
                         sc["correction_stored_as"], c)
        for key in sorted(k for k in sc if k.startswith("pass")):
            info = sc[key]
            if info["direction"] == "backward":
                say(f"{name}: {key} is backward, not modelled here")
                continue
            ok &= check_pass(f"{name}: {key}", tracker.propagate(info["frames"][0], info["frames"][-1]),
                             arr(f"{name}_{key}_logits"), arr(f"{name}_{key}_scores"),
                             arr(f"{name}_{key}_ptrs"), info)
        say(f"{name}: {time.time() - t0:.0f} s")
    summary = report.summary()
    print("\nvideo summary: " + json.dumps(summary))
    mm = ref.get("memory_matters")
    if mm:
        for r in mm["objects"]:
            print(f"memory matters (reference): frame {mm['frame']} obj {r['obj_id']} without frame "
                  f"{mm['dropped_memory_frame']}'s memory: max |dlogit| {r['max_abs_logit_change']:.3f}, "
                  f"{r['pixels_changed']} low-res pixels flip, mask IoU {r['mask_iou_with_without']:.4f}")
    return ok


# ----------------------------------------------------------------------------------------------
# timings


def session(path, threads):
    opts = ort.SessionOptions()
    opts.log_severity_level = 3
    opts.intra_op_num_threads = threads
    opts.inter_op_num_threads = 1
    return ort.InferenceSession(path, opts, providers=["CPUExecutionProvider"])


def feeds_for(sess, m, n):
    """Random inputs of each module at the tracker's steady state: m memory frames, n pointers;
    tokens per memory frame from the declared shape of memory_1."""
    rng = np.random.default_rng(0)
    feeds = {}
    inputs = {i.name: i for i in sess.get_inputs()}
    tokens = None
    if "memory_1" in inputs:
        shape = inputs["memory_1"].shape[1:]
        tokens = int(np.prod(shape)) // 64
    for name, i in inputs.items():
        shape = list(i.shape)
        if name == "memory_0":
            shape = [n, 256]
        elif name == "memory_1":
            shape = [m] + shape[1:]
        elif name == "memory_pos_embed":
            shape = [m * tokens + 4 * n, 1, 64]
        elif name == "obj_ptr_tpos":
            shape = [n]
        elif name in ("point_coords", "point_labels"):
            shape = [1, 2] + shape[2:]
        dtype = np.float32 if "float" in i.type else np.int32
        if name == "point_labels":
            feeds[name] = np.array([[1, -1]], dtype)
        elif name in ("has_mask_input", "is_mask_from_pts"):
            feeds[name] = np.zeros(shape, dtype)
        elif name in ("multimask_output", "object_score_logits"):
            feeds[name] = np.ones(shape, dtype)
        elif name == "point_coords":
            feeds[name] = np.array([[[500, 400], [0, 0]]], dtype)
        else:
            feeds[name] = rng.standard_normal(shape).astype(dtype)
    return feeds


def time_modules(exports, threads_list, repeats):
    """exports: [(label, dir, files)]. Module by module and thread count by thread count, the
    exports are timed one after the other (runs alternate between them), so that a change in
    the machine's load weighs on all of them alike. -> {(label, module, threads): ms}"""
    rows = {}
    for key in ("image_encoder", "memory_attention", "image_decoder", "memory_encoder"):
        for threads in threads_list:
            sessions = []
            for label, models, files in exports:
                sess = session(os.path.join(models, files[key]), threads)
                feeds = feeds_for(sess, 7, 16)
                sess.run(None, feeds)  # warm-up
                sessions.append((label, sess, feeds, []))
            for _ in range(repeats):
                for _, sess, feeds, times in sessions:
                    t = time.perf_counter()
                    sess.run(None, feeds)
                    times.append(time.perf_counter() - t)
            for label, _, _, times in sessions:
                rows[(label, key, threads)] = statistics.median(times) * 1000
                print(f"{label:<12} {key:<18} {threads} thread{'s' if threads > 1 else ' '} "
                      f"{rows[(label, key, threads)]:9.1f} ms (median of {repeats})", flush=True)
            del sessions
    return rows


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--models", help="sam2-export-edgetam's output (default $SAM2_EDGETAM_MODELS)")
    parser.add_argument("--reference", help="tools/references/edgetam_reference.py's output (default: "
                        "reference/ in the models directory)")
    parser.add_argument("--timings", action="store_true", help="time the modules too")
    parser.add_argument("--only-timings", action="store_true")
    parser.add_argument("--sam2", help="SAM2.1 tiny's four modules to time beside (default "
                        "$SAM2_VIDEO_MODELS)")
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    models = args.models or os.environ.get("SAM2_EDGETAM_MODELS")
    if not models:
        parser.error("--models or SAM2_EDGETAM_MODELS")
    with open(os.path.join(models, "manifest.json")) as f:
        manifest = json.load(f)
    ref_dir = args.reference or os.path.join(models, os.path.dirname(manifest["reference"]))
    ok = True
    if not args.only_timings:
        ok &= check_image(ref_dir)
        ok &= check_video(models, manifest, ref_dir)
    if args.timings or args.only_timings:
        threads = [1, 2]
        modules = ("image_encoder", "memory_attention", "image_decoder", "memory_encoder")
        exports = [("EdgeTAM", models, manifest["files"])]
        sam2_dir = args.sam2 or os.environ.get("SAM2_VIDEO_MODELS")
        if sam2_dir and os.path.exists(os.path.join(sam2_dir, "manifest.json")):
            with open(os.path.join(sam2_dir, "manifest.json")) as f:
                exports.append(("SAM2.1 tiny", sam2_dir, json.load(f)["files"]))
        else:
            say("no SAM2.1 tiny video modules to compare with (--sam2 / SAM2_VIDEO_MODELS)")
        rows = time_modules(exports, threads, args.repeats)
        if len(exports) == 2:
            print("\n| module | threads | EdgeTAM ms | SAM2.1 tiny ms | EdgeTAM / SAM2.1 tiny |")
            print("|---|---|---|---|---|")
            for key in modules + ("one tracked frame",):
                for th in threads:
                    if key == "one tracked frame":
                        e = sum(rows[("EdgeTAM", k, th)] for k in modules)
                        s2 = sum(rows[("SAM2.1 tiny", k, th)] for k in modules)
                    else:
                        e, s2 = rows[("EdgeTAM", key, th)], rows[("SAM2.1 tiny", key, th)]
                    print(f"| {key} | {th} | {e:.0f} | {s2:.0f} | {e / s2:.3f} |")
    if not ok:
        print("EdgeTAM parity: FAILED", file=sys.stderr)
        sys.exit(1)
    if not args.only_timings:
        print("EdgeTAM parity: OK")


if __name__ == "__main__":
    main()
