#!/usr/bin/env python3
"""The arithmetic of SAM 3's graphs: where a phrase's decoder run (and an encode) spends its work.

Each graph of an export of sam2-export-sam3 (`--models`) runs under ONNX Runtime's profiler on the
CPU (2 threads, spinning off; one warm-up run, then `--runs`), on inputs of its declared shapes
(random features, a phrase's 5 tokens, every box slot empty). From the profile's operator shapes
the multiply-adds are counted as tools/bench/frame_arithmetic.py counts them (matrix products,
convolutions, fused attention: two operations each), and grouped by operator and output size
(`group_of`), so the mask head's 288² convolutions stand apart from the transformer. Prints, per graph: GFLOP, the kernels' median
time and rate, and the groups that do the most work.

    .venv/bin/python tools/bench/sam3_arithmetic.py --models DIR [--graph decoder] [--runs 2] [--top 12]
"""

import argparse
import collections
import json
import os
import statistics
import sys
import tempfile

import numpy as np
import onnxruntime as ort

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from frame_arithmetic import flop  # noqa: E402

GRAPHS = ("image_encoder", "language_encoder", "decoder")
TOKENS = [49406, 320, 736, 1615, 49407]  # "a red car"


def feeds_for(session):
    rng = np.random.default_rng(0)
    feeds = {}
    for i in session.get_inputs():
        shape = [d if isinstance(d, int) and d > 0 else 1 for d in i.shape]
        if i.name == "image":
            feeds[i.name] = rng.integers(0, 256, shape, dtype=np.uint8)
        elif i.name == "tokens":
            t = np.zeros(shape, np.int64)
            t[0, :len(TOKENS)] = TOKENS
            feeds[i.name] = t
        elif i.name == "language_mask":
            m = np.ones(shape, bool)
            m[0, :len(TOKENS)] = False
            feeds[i.name] = m
        elif i.name == "box_masks":
            feeds[i.name] = np.ones(shape, bool)
        elif i.name == "box_labels":
            feeds[i.name] = np.ones(shape, np.int64)
        elif i.name == "box_coords":
            feeds[i.name] = np.zeros(shape, np.float32)
        else:
            feeds[i.name] = rng.standard_normal(shape).astype(np.float32)
    return feeds


def group_of(op, outputs):
    """An operator's group: its type and, for the convolutions, the output's spatial size (the
    mask head's 288² stand apart), for the matrix products the output's rows (5,184 image tokens,
    200 queries, 32 text tokens)."""
    out = outputs[0] if outputs else []
    if op.startswith("Conv") and len(out) >= 2:
        return f"{op} to {out[-2]}x{out[-1]}"
    if op in ("MatMul", "Gemm", "FusedMatMul") and len(out) >= 2:
        return f"{op}, {out[-2]} rows"
    return op


def profile(path, runs):
    options = ort.SessionOptions()
    options.intra_op_num_threads = 2
    options.add_session_config_entry("session.intra_op.allow_spinning", "0")
    options.log_severity_level = 3
    options.enable_profiling = True
    with tempfile.TemporaryDirectory() as tmp:
        options.profile_file_prefix = os.path.join(tmp, "profile")
        session = ort.InferenceSession(path, options, providers=["CPUExecutionProvider"])
        feeds = feeds_for(session)
        for _ in range(runs + 1):
            session.run(None, feeds)
        with open(session.end_profiling()) as f:
            events = json.load(f)
    starts = sorted(e["ts"] for e in events if e.get("name") == "model_run")
    per_run = [0.0] * len(starts)
    groups = collections.defaultdict(lambda: [0.0, 0.0])  # GFLOP, ms of the last run
    for e in events:
        if e.get("cat") != "Node" or not e["name"].endswith("_kernel_time"):
            continue
        run = max(i for i, s in enumerate(starts) if s <= e["ts"])
        per_run[run] += e["dur"] / 1e3
        if run == len(starts) - 1:
            args = e["args"]
            shapes = [[list(x.values())[0] for x in args[key]]
                      for key in ("input_type_shape", "output_type_shape")]
            g = groups[group_of(args["op_name"], shapes[1])]
            g[0] += flop(args["op_name"], *shapes) / 1e9
            g[1] += e["dur"] / 1e3
    return groups, statistics.median(per_run[1:])


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--models", required=True)
    parser.add_argument("--graph", action="append", choices=GRAPHS)
    parser.add_argument("--runs", type=int, default=2)
    parser.add_argument("--top", type=int, default=12)
    args = parser.parse_args()
    print(f"ONNX Runtime {ort.__version__}, CPU, 2 threads, {args.runs} timed runs a graph")
    for graph in args.graph or ["decoder"]:
        groups, ms = profile(os.path.join(args.models, f"sam3_{graph}.onnx"), args.runs)
        total = sum(g[0] for g in groups.values())
        print(f"\nsam3_{graph}.onnx: {total:.1f} GFLOP, kernels {ms:.0f} ms (median), "
              f"{total / ms * 1e3:.0f} GFLOP/s")
        print("| group | GFLOP | share | kernel ms (last run) |")
        print("|---|---|---|---|")
        for name, (gflop, gms) in sorted(groups.items(), key=lambda kv: -kv[1][1])[: args.top]:
            print(f"| {name} | {gflop:.1f} | {gflop / total:.1%} | {gms:.0f} |")


if __name__ == "__main__":
    main()
