#!/usr/bin/env python3
"""The peer pipeline of the main benchmark: SAM2 the way samexporter and X-AnyLabeling run it.

bench/src/bin/bench/ starts this script as a co-process and drives it one command per line on
stdin; each reply is one JSON line on stdout. The bench interleaves the peer's runs with the
library's and the floors' (round by round, in the same run), so all three see the same load;
each peer run is timed here, around the pipeline code only (time.perf_counter), and the bench
takes medians, min and max.

What is timed, mirroring samexporter's `sam2_onnx.py` (SAM2ImageEncoder.prepare_input,
SAM2ImageDecoder.prepare_points/prepare_inputs/process_output) and X-AnyLabeling's SAM2 model:

* `pre`: cv2.resize (INTER_LINEAR, stretch) of the HxWx3 uint8 image to 1024x1024, `/ 255.0`,
  ImageNet mean/std (numpy, float64 as samexporter writes it), transpose to NCHW,
  astype(float32). Fed RGB pixels directly (no colour conversion): the strictest peer, since the
  library is also fed RGB.
* `pre_bgr`: samexporter's code exactly, which starts from cv2.imread's BGR and calls
  cv2.cvtColor(BGR2RGB) first.
* `encode`: `pre` + InferenceSession.run of the encoder (pixels -> 3 tensors).
* `predict`: points scaled by 1024/W, 1024/H, labels, zero mask_input, has_mask_input 0,
  InferenceSession.run of the decoder, best mask by IoU prediction (X-AnyLabeling's argmax),
  cv2.resize of its 256x256 logits to (W, H), threshold > 0.
* `post`: cv2.resize + threshold > 0 on the very logits the library upsampled (from a file).

Sessions are created as those tools create them: `onnxruntime.InferenceSession(path,
providers=["CPUExecutionProvider"])` with default SessionOptions (ORT_ENABLE_ALL).

Commands: `info`, `pre`, `pre_bgr`, `check_pre PATH`, `load_post LOGITS MASK`, `post`,
`init_encoder`, `encode`, `init_decoder`, `predict`, `quit`.
"""

import argparse
import json
import sys
import time

import cv2
import numpy as np
import onnxruntime as ort

MEAN = np.array([0.485, 0.456, 0.406])
STD = np.array([0.229, 0.224, 0.225])
SIZE = 1024


def prepare_input(rgb):
    """The peers' pre-processing (cv2 stretch resize, float64 normalisation, NCHW float32), fed RGB."""
    resized = cv2.resize(rgb, (SIZE, SIZE))
    normalised = (resized / 255.0 - MEAN) / STD
    return normalised.transpose(2, 0, 1)[np.newaxis].astype(np.float32)


def prepare_input_samexporter(bgr):
    """The same from BGR, as samexporter starts from cv2.imread (one cvtColor more)."""
    return prepare_input(cv2.cvtColor(bgr, cv2.COLOR_BGR2RGB))


class Peer:
    def __init__(self, args):
        self.args = args
        self.bgr = cv2.imread(args.image, cv2.IMREAD_COLOR)
        if self.bgr is None:
            raise SystemExit(f"cannot read {args.image}")
        self.rgb = np.ascontiguousarray(cv2.cvtColor(self.bgr, cv2.COLOR_BGR2RGB))
        self.h, self.w = self.rgb.shape[:2]
        self.cx, self.cy = (float(v) for v in args.click.split(","))
        self.enc = None
        self.dec = None
        self.emb = None
        self.logits = None
        self.info = {
            "versions": {
                "python": sys.version.split()[0],
                "opencv": cv2.__version__,
                "numpy": np.__version__,
                "onnxruntime": ort.__version__,
            },
            "cv2_threads": cv2.getNumThreads(),
            "image": [self.w, self.h],
            "session_graph_optimization_level": str(
                ort.SessionOptions().graph_optimization_level
            ),
        }

    # --- timed pipelines ------------------------------------------------------------------
    def pre(self):
        return prepare_input(self.rgb)

    def pre_bgr(self):
        return prepare_input_samexporter(self.bgr)

    def post(self):
        return cv2.resize(self.logits, (self.w, self.h)) > 0

    def encode(self):
        tensor = prepare_input(self.rgb)
        outs = self.enc.run(self.enc_out, {self.enc_in: tensor})
        return dict(zip(self.enc_out, outs))

    def predict(self):
        w, h = self.w, self.h
        # prepare_points: one object, one positive click, scaled to the 1024 frame.
        coords = np.array([[[self.cx, self.cy]]], dtype=np.float32)
        labels = np.array([[1]], dtype=np.float32)
        coords[..., 0] = coords[..., 0] / w * SIZE
        coords[..., 1] = coords[..., 1] / h * SIZE
        feed = {
            "image_embed": self.emb["image_embed"],
            "high_res_feats_0": self.emb["high_res_feats_0"],
            "high_res_feats_1": self.emb["high_res_feats_1"],
            "point_coords": coords,
            "point_labels": labels,
            "mask_input": np.zeros((1, 1, SIZE // 4, SIZE // 4), dtype=np.float32),
            "has_mask_input": np.array([0], dtype=np.float32),
        }
        masks, scores = self.dec.run(self.dec_out, {k: feed[k] for k in self.dec_in})
        scores = scores.squeeze()
        best = int(np.argmax(scores))
        mask = cv2.resize(masks[0, best], (w, h)) > 0
        return mask, float(scores[best])

    # --- commands -------------------------------------------------------------------------
    def command(self, line):
        parts = line.split()
        cmd, rest = parts[0], parts[1:]
        timed = {"pre": self.pre, "pre_bgr": self.pre_bgr, "post": self.post,
                 "encode": self.encode, "predict": self.predict}
        if cmd in timed:
            t = time.perf_counter()
            timed[cmd]()
            return {"ms": (time.perf_counter() - t) * 1e3}
        if cmd == "info":
            return self.info
        if cmd == "check_pre":
            ours = self.pre()
            lib = np.fromfile(rest[0], dtype=np.float32).reshape(ours.shape)
            self.info["preprocess_max_abs_diff_vs_library"] = float(np.abs(ours - lib).max())
            return {"max_abs_diff": self.info["preprocess_max_abs_diff_vs_library"]}
        if cmd == "load_post":
            self.logits = np.fromfile(rest[0], dtype=np.float32).reshape(SIZE // 4, SIZE // 4)
            lib_mask = np.fromfile(rest[1], dtype=np.uint8).reshape(self.h, self.w)
            differing = int(np.count_nonzero(self.post() != (lib_mask != 0)))
            self.info["postprocess_pixels_differing_from_library"] = differing
            return {"differing": differing}
        if cmd == "init_encoder":
            t = time.perf_counter()
            self.enc = ort.InferenceSession(self.args.encoder, providers=["CPUExecutionProvider"])
            self.enc_in = self.enc.get_inputs()[0].name
            self.enc_out = [o.name for o in self.enc.get_outputs()]
            self.info["encoder_session_create_ms"] = (time.perf_counter() - t) * 1e3
            self.emb = self.encode()
            return {"ok": True}
        if cmd == "init_decoder":
            if self.emb is None:
                raise RuntimeError("init_encoder first")
            self.dec = ort.InferenceSession(self.args.decoder, providers=["CPUExecutionProvider"])
            self.dec_in = [i.name for i in self.dec.get_inputs()]
            self.dec_out = [o.name for o in self.dec.get_outputs()]
            mask, score = self.predict()
            self.info["predict_score"] = score
            self.info["predict_mask_area"] = int(np.count_nonzero(mask))
            return {"ok": True}
        raise RuntimeError(f"unknown command {cmd!r}")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--image", required=True, help="binary PPM (P6) written by the bench")
    ap.add_argument("--encoder", required=True)
    ap.add_argument("--decoder", required=True)
    ap.add_argument("--click", required=True, help="x,y in image pixels")
    args = ap.parse_args()
    peer = Peer(args)
    print(json.dumps({"ready": True}), flush=True)
    for line in sys.stdin:
        line = line.strip()
        if not line:
            continue
        if line == "quit":
            break
        try:
            reply = peer.command(line)
        except Exception as e:  # reported to the bench, which leaves the peer's cells empty
            reply = {"error": f"{type(e).__name__}: {e}"}
        print(json.dumps(reply), flush=True)


if __name__ == "__main__":
    main()
