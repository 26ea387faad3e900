#!/usr/bin/env python3
"""The arithmetic of a tracked frame: how much work each video module does, and how fast.

For each family given (a directory of the four video modules the tracker reads: image_encoder,
memory_attention, memory_encoder, image_decoder), each module runs under ONNX Runtime's profiler
on the CPU at the tracker's steady state (7 memory frames, 16 object pointers; the inputs
tools/references/edgetam_check.py times the modules with), 2 threads, spinning off. From the
profile's operator shapes it counts the multiply-adds of the matrix products (`MatMul`, `Gemm`,
`FusedMatMul`), the convolutions (and transposed ones) and the fused attention
(`MultiHeadAttention`), two operations each, and prints per module: GFLOP, the median kernel time
of the timed runs, and the rate. Everything else (normalisations,
activations, copies) is counted in the time but adds no FLOP.

Ratios between two models' frames cannot exceed the ratio of their arithmetic unless one runs
its arithmetic faster than the other: the figures say how far apart they can be on a CPU where
both run at their kernels' rate.

    .venv/bin/python tools/bench/frame_arithmetic.py \
        --family "SAM2.1 tiny=$SAM2_VIDEO_MODELS" --family "EdgeTAM=$SAM2_EDGETAM_MODELS"
"""

import argparse
import json
import math
import os
import statistics
import sys
import tempfile

import onnxruntime as ort

# The steady state's inputs as tools/references/edgetam_check.py times the modules: random
# features, m memory frames (tokens a frame from memory_1's declared shape), n pointers.
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "references"))
from edgetam_check import feeds_for  # noqa: E402

MODULES = ["image_encoder", "memory_attention", "memory_encoder", "image_decoder"]
MEMORIES, POINTERS = 7, 16


def flop(op, inputs, outputs):
    """Two operations per multiply-add of one operator, from its profiled shapes."""
    if op in ("MatMul", "Gemm", "FusedMatMul"):
        # The profile gives no attributes: a transposed first operand (Gemm's and FusedMatMul's
        # transA) is told by which of its last two axes has the output's rows.
        a, out = inputs[0], outputs[0]
        inner = a[-1] if len(a) < 2 or a[-2] == out[-2] else a[-2]
        return 2 * math.prod(out) * inner
    if op == "Conv":
        return 2 * math.prod(outputs[0]) * math.prod(inputs[1][1:])
    if op == "ConvTranspose":
        # Its weights are prepacked and absent from the profile: counted as the decoders'
        # upscaling is made, kernel equal to stride, so each output sums the input's channels.
        return 2 * math.prod(outputs[0]) * inputs[0][1]
    if op == "MultiHeadAttention":
        q, k, v = inputs[:3]
        return 2 * q[0] * q[1] * k[1] * (q[2] + v[2])
    return 0


def profile(path, runs):
    options = ort.SessionOptions()
    options.intra_op_num_threads = 2
    options.add_session_config_entry("session.intra_op.allow_spinning", "0")
    options.log_severity_level = 3
    options.enable_profiling = True
    with tempfile.TemporaryDirectory() as tmp:
        options.profile_file_prefix = os.path.join(tmp, "profile")
        session = ort.InferenceSession(path, options, providers=["CPUExecutionProvider"])
        feeds = feeds_for(session, MEMORIES, POINTERS)
        for _ in range(runs + 1):
            session.run(None, feeds)
        with open(session.end_profiling()) as f:
            events = json.load(f)
    starts = sorted(e["ts"] for e in events if e.get("name") == "model_run")
    per_run = [0.0] * len(starts)
    flops = 0
    for e in events:
        if e.get("cat") != "Node" or not e["name"].endswith("_kernel_time"):
            continue
        run = max(i for i, s in enumerate(starts) if s <= e["ts"])
        per_run[run] += e["dur"] / 1e3
        if run == len(starts) - 1:
            args = e["args"]
            shapes = [
                [list(x.values())[0] for x in args[key]]
                for key in ("input_type_shape", "output_type_shape")
            ]
            flops += flop(args["op_name"], *shapes)
    # The first run warms up; the others are timed.
    return flops / 1e9, statistics.median(per_run[1:])


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--family", action="append", required=True, help="NAME=DIR of the four video modules"
    )
    parser.add_argument("--runs", type=int, default=3, help="timed runs a module (default 3)")
    args = parser.parse_args()
    print(f"ONNX Runtime {ort.__version__}, CPU, 2 threads, {args.runs} timed runs a module")
    print("| model | module | GFLOP | kernels (median) | GFLOP/s |")
    print("|---|---|---|---|---|")
    totals = []
    for family in args.family:
        name, _, directory = family.partition("=")
        total_flop, total_ms = 0.0, 0.0
        for module in MODULES:
            gflop, ms = profile(os.path.join(directory, f"{module}.onnx"), args.runs)
            total_flop += gflop
            total_ms += ms
            print(f"| {name} | {module} | {gflop:.1f} | {ms:.0f} ms | {gflop / ms * 1e3:.0f} |")
        print(
            f"| {name} | **frame** | **{total_flop:.1f}** | {total_ms:.0f} ms "
            f"| {total_flop / total_ms * 1e3:.0f} |"
        )
        totals.append((name, total_flop))
    for name, total in totals[1:]:
        print(f"{totals[0][0]}'s frame is {totals[0][1] / total:.2f}× {name}'s arithmetic")


if __name__ == "__main__":
    main()
