#!/usr/bin/env python3
"""Track the synthetic clip (tools/models/track_clip.py) with the generated four-module tracking model
(tools/models/gen_track_models.py, in models/track/) through onnxruntime's Python API, and check the
masks.

    python tools/references/track_check.py --models models [--print-only]

The tracker loop follows SAM2VideoPredictor (SAM2.1 settings, one object, stride 1):
  frame 0, the initial conditioning frame: one positive click; the decoder runs on
      vision_feats directly (no memory attention), multimask (1 point); the memory encoder gets
      is_mask_from_pts = 1.
  every later frame: memory attention over the conditioning frame (t_pos 0) and the memories of
      up to NUM_MASKMEM - 1 = 6 previous frames (frame t - (7 - t_pos) at t_pos 1..6, when it
      exists); memory_pos_embed = per memory frame maskmem_pos_enc + temporal_code[7 - t_pos - 1],
      then 4 zero rows per object pointer; pointers: the conditioning frame's (not in the future)
      then the previous frames' up to max_obj_ptrs - 1 = 15 back, obj_ptr_tpos = signed
      (t - t_ptr) / 15; the decoder gets one padding point (0, 0) label -1, no mask input,
      multimask; the memory encoder gets is_mask_from_pts = 0.
Pre-processing and the low-res -> frame resize are tools/references/reference_check.py's.
Two objects, each with its own memory (the tracker loops over objects; the image encoder runs
once per frame): the red target, which passes behind a bar, and the blue distractor.
Checks, per object: IoU >= 0.9 with the ground truth and object_score_logits > 0 on every frame
where it is visible; object_score_logits <= 0 and pred_mask all -1024 where it is hidden.
"""

import argparse
import os
import sys
import time

import numpy as np
import onnxruntime as ort

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "models"))  # the tracking clip
import reference_check as ref  # noqa: E402
import track_clip as clip  # noqa: E402

NUM_MASKMEM = 7
MAX_OBJ_PTRS = 16
MIN_IOU = 0.9


def session(models, name):
    so = ort.SessionOptions()
    so.log_severity_level = 3
    return ort.InferenceSession(os.path.join(models, "track", name), so, providers=["CPUExecutionProvider"])


class Modules:
    """The four sessions, with the run time of each call."""

    def __init__(self, models):
        self.enc = session(models, "image_encoder.onnx")
        self.att = session(models, "memory_attention.onnx")
        self.dec = session(models, "image_decoder.onnx")
        self.mem = session(models, "memory_encoder.onnx")
        self.times = {"image_encoder": [], "memory_attention": [], "image_decoder": [], "memory_encoder": []}

    def run(self, name, sess, feeds):
        t0 = time.perf_counter()
        out = sess.run(None, feeds)
        self.times[name].append(time.perf_counter() - t0)
        return dict(zip([o.name for o in sess.get_outputs()], out))

    def encode(self, rgb):
        return self.run("image_encoder", self.enc, {"image": ref.preprocess(rgb)})


class Tracker:
    """One object's memory bank (SAM2's per-object output_dict)."""

    def __init__(self, modules, num_frames):
        m = modules
        self.run, self.att, self.dec, self.mem = m.run, m.att, m.dec, m.mem
        self.num_frames = num_frames
        self.cond = {}        # frame -> output dict
        self.non_cond = {}

    def memory_conditioned(self, t, vis):
        frames = [(0, o) for o in self.cond.values()]
        for t_pos in range(1, NUM_MASKMEM):
            prev = self.non_cond.get(t - (NUM_MASKMEM - t_pos))
            if prev is not None:
                frames.append((t_pos, prev))
        ptrs = [(t - tc, o["obj_ptr"]) for tc, o in self.cond.items() if tc <= t]
        max_ptrs = min(self.num_frames, MAX_OBJ_PTRS)
        for t_diff in range(1, max_ptrs):
            if t - t_diff < 0:
                break
            o = self.non_cond.get(t - t_diff)
            if o is not None:
                ptrs.append((t_diff, o["obj_ptr"]))
        memory_1 = np.concatenate([o["maskmem_features"] for _, o in frames], axis=0)
        pos_rows = [o["maskmem_pos_enc"] + o["temporal_code"][NUM_MASKMEM - t_pos - 1] for t_pos, o in frames]
        pos_rows.append(np.zeros((4 * len(ptrs), 1, 64), np.float32))
        feeds = {
            "current_vision_feat": vis["vision_feats"],
            "current_vision_pos_embed": vis["vision_pos_embed"],
            "memory_0": np.concatenate([p for _, p in ptrs], axis=0),
            "memory_1": memory_1,
            "memory_pos_embed": np.concatenate(pos_rows, axis=0),
            "obj_ptr_tpos": np.array([d / (max_ptrs - 1) for d, _ in ptrs], np.float32),
        }
        return self.run("memory_attention", self.att, feeds)["image_embed"], len(frames), len(ptrs)

    def step(self, t, vis, h, w, points=None):
        if points is not None:                              # initial conditioning frame
            embed, n_mem, n_ptr = vis["vision_feats"], 0, 0
            coords, labels = ref.build_prompt_rows([{"points": points}], w, h)
        else:
            embed, n_mem, n_ptr = self.memory_conditioned(t, vis)
            coords, labels = np.zeros((1, 1, 2), np.float32), np.full((1, 1), -1.0, np.float32)
        n_clicks = int((labels >= 0).sum())
        dec = self.run("image_decoder", self.dec, {
            "point_coords": coords, "point_labels": labels, "image_embed": embed,
            "high_res_feats_0": vis["high_res_feat0"], "high_res_feats_1": vis["high_res_feat1"],
            "mask_input": np.zeros((1, 1, 256, 256), np.float32),
            "has_mask_input": np.zeros(1, np.float32),
            "multimask_output": np.array([1.0 if n_clicks <= 1 else 0.0], np.float32),
        })
        mem = self.run("memory_encoder", self.mem, {
            "mask_for_mem": dec["mask_for_mem"], "pix_feat": vis["pix_feat"],
            "object_score_logits": dec["object_score_logits"],
            "is_mask_from_pts": np.array([1.0 if points is not None else 0.0], np.float32),
        })
        out = {"obj_ptr": dec["obj_ptr"], **mem}
        (self.cond if points is not None else self.non_cond)[t] = out
        logits = ref.upsample_logits(dec["pred_mask"][0], h, w)[0]
        return logits > 0, float(dec["object_score_logits"][0, 0]), dec, n_mem, n_ptr


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--models", default=os.path.join(HERE, "..", "..", "models"))
    ap.add_argument("--print-only", action="store_true", help="report, do not fail")
    args = ap.parse_args()
    modules = Modules(args.models)
    objects = [("target", clip.click(), Tracker(modules, clip.FRAMES)),
               ("distractor", clip.distractor_click(), Tracker(modules, clip.FRAMES))]
    failures = []
    print("frame  object      visible_px  object_score  IoU     memories  pointers")
    for t in range(clip.FRAMES):
        rgb, truth = clip.frame(t)
        vis = modules.encode(rgb)
        for (name, pt, tr), gt in zip(objects, truth):
            points = [[*pt, 1]] if t == 0 else None
            mask, score, dec, n_mem, n_ptr = tr.step(t, vis, clip.HEIGHT, clip.WIDTH, points)
            if gt.any():
                iou = np.logical_and(mask, gt).sum() / np.logical_or(mask, gt).sum()
                ok = iou >= MIN_IOU and score > 0
                shown = "%.4f" % iou
            else:
                ok = score <= 0 and bool((dec["pred_mask"] <= -1024).all())
                shown = "absent" if ok else "PRESENT (%d px)" % mask.sum()
            print("%5d  %-10s  %10d  %12.3f  %-7s %8d  %8d%s" % (
                t, name, gt.sum(), score, shown, n_mem, n_ptr, "" if ok else "   <-- FAIL"))
            if not ok:
                failures.append((t, name))
    print("median run time per call (ms): " + ", ".join(
        "%s %.1f" % (k, 1e3 * float(np.median(v))) for k, v in modules.times.items() if v))
    if failures and not args.print_only:
        print("track_check: FAILED on frames %s" % failures, file=sys.stderr)
        return 1
    print("track_check: %d frames OK" % clip.FRAMES)
    return 0


if __name__ == "__main__":
    sys.exit(main())
