#!/usr/bin/env python3
"""Checks the fp16 variant's range rule (tools/models/make_variant.py) on a model made to need it.

A small encoder-shaped model scales its input by 40000 and back: in float16 the scaled tensor
(up to about 10^5) overflows to infinity. The tool must find it on its sample and keep its
producer and readers in float32, so that the variant's output is the original's; the same model
converted without that rule holds the tensor in float16 (ONNX Runtime's CPU computes that
product in float32 behind its own casts, so the check reads the types, and the variant's output).

    python tools/references/variant_check.py
"""

import os
import sys
import tempfile

import numpy as np
import onnx
import onnxruntime as ort
from onnx import TensorProto, helper, numpy_helper

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "models"))
import make_variant  # noqa: E402


def model():
    """image [1, 3, 16, 16] -> Conv (float16 everywhere) -> x 40000 -> Relu -> x 1/40000 -> out."""
    rng = np.random.default_rng(0)
    weight = numpy_helper.from_array(rng.normal(0, 0.5, (4, 3, 3, 3)).astype(np.float32), "w")
    up = numpy_helper.from_array(np.array(40000.0, np.float32), "up")
    down = numpy_helper.from_array(np.array(1 / 40000.0, np.float32), "down")
    nodes = [
        helper.make_node("Conv", ["image", "w"], ["conv"], pads=[1, 1, 1, 1], name="conv"),
        helper.make_node("Mul", ["conv", "up"], ["big"], name="scale_up"),
        helper.make_node("Relu", ["big"], ["big_relu"], name="relu"),
        helper.make_node("Mul", ["big_relu", "down"], ["out"], name="scale_down"),
    ]
    graph = helper.make_graph(
        nodes, "range", [helper.make_tensor_value_info("image", TensorProto.FLOAT, [1, 3, 16, 16])],
        [helper.make_tensor_value_info("out", TensorProto.FLOAT, [1, 4, 16, 16])], [weight, up, down])
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    return m


def run(path, x):
    options = ort.SessionOptions()
    options.log_severity_level = 3
    session = ort.InferenceSession(path, options, providers=["CPUExecutionProvider"])
    return session.run(None, {"image": x})[0]


def float16_tensors(m):
    """Names of the tensors a model declares float16."""
    m = onnx.shape_inference.infer_shapes(m)
    values = list(m.graph.value_info) + list(m.graph.output)
    return {v.name for v in values if v.type.tensor_type.elem_type == TensorProto.FLOAT16}


def main():
    x = make_variant.sample_input(model(), None)[1]
    with tempfile.TemporaryDirectory() as tmp:
        src, dst = os.path.join(tmp, "range_encoder.onnx"), os.path.join(tmp, "half.onnx")
        onnx.save(model(), src)
        want = run(src, x)
        make_variant.make_fp16(src, dst, None)
        got = run(dst, x)
        variant = onnx.load(dst)
    # The variant: the large tensors (the outputs of scale_up and relu) stay float32 all the way,
    # never cast to float16; the Conv before them runs in float16.
    large = [o for n in variant.graph.node if n.name in ("scale_up", "relu") for o in n.output]
    to_half = [n for n in variant.graph.node if n.op_type == "Cast" and n.input[0] in large
               and any(a.name == "to" and a.i == TensorProto.FLOAT16 for a in n.attribute)]
    half_in_variant = float16_tensors(variant)
    # The converter without the rule: the same tensor typed float16 (infinite on a device that
    # computes in float16; ONNX Runtime's CPU computes that Mul in float32 behind its casts).
    from onnxruntime.transformers.float16 import convert_float_to_float16
    naive = float16_tensors(convert_float_to_float16(model(), keep_io_types=True))
    peak = float(np.abs(want).max()) * 40000
    worst = float(np.abs(got - want).max())
    print(f"[variant_check] scaled tensor reaches {peak:.4g}; the fp16 variant keeps it float32 "
          f"({len(to_half)} casts of it to float16) and differs from float32 by {worst:.3g}; without "
          f"the range rule it is float16: {'big' in naive}")
    failures = []
    if not peak > 65504:
        failures.append("the model does not exceed float16's range: the check proves nothing")
    if "big" not in naive:
        failures.append("the converter alone keeps the large tensor float32: the check proves nothing")
    if to_half or any(t in half_in_variant for t in large):
        failures.append(f"the variant casts the large tensors to float16 ({[n.name for n in to_half]})")
    if "conv" not in half_in_variant:
        failures.append("the variant's Conv is not float16")
    if not (np.isfinite(got).all() and worst < 1e-2 * float(np.abs(want).max())):
        failures.append(f"the variant's output is not the original's (worst {worst})")
    if failures:
        raise SystemExit("[variant_check] FAILED: " + "; ".join(failures))
    print("[variant_check] ok: the tensor past float16's range was kept in float32")


if __name__ == "__main__":
    main()
