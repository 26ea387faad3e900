#!/usr/bin/env python3
"""Checks the variants' rules (sam2_tools.make_variant) on models made to need them: fp16's
range rule, int8's feed-forward rule for video modules, and int8's split of Hiera's joint
query-key-value projections.

A small encoder-shaped model scales its input by 40000 and back: in float16 the scaled tensor
(up to about 10^5) overflows to infinity. The tool must find it on its sample and keep its
producer and readers in float32, so that the variant's output is the original's; the same model
converted without that rule holds the tensor in float16 (ONNX Runtime's CPU computes that
product in float32 behind its own casts, so the check reads the types, and the variant's output).

It also checks the int8 rule for video modules: in a model shaped like memory attention (an
attention block whose projections share their weights through the exporter's Identity nodes, a
ReLU feed-forward layer and an erf-GELU one over 4096 rows, a GELU one over 256 latents), the tool
quantises the two Linears of each feed-forward layer over the 4096 rows and nothing else, a shared
weight once, and the variant computes what the original does within int8's error.

    python tools/references/variant_check.py
"""

import os
import tempfile

import numpy as np
import onnx
import onnxruntime as ort
from onnx import TensorProto, helper, numpy_helper

from sam2_tools import make_variant


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


def video_module():
    """tokens [1, 4096, 64], latents [1, 256, 64] -> attention over the tokens (q, k, v and out
    projections; q and k read one weight through two Identities) -> ReLU feed-forward layer ->
    erf-GELU feed-forward layer (their first Linears share a weight through Identities) -> out
    [1, 4096, 64]; the latents through their own erf-GELU feed-forward layer -> small
    [1, 256, 64]."""
    rng = np.random.default_rng(1)
    inits, nodes = [], []

    def weight(name, shape):
        values = rng.normal(0, shape[0] ** -0.5, shape).astype(np.float32)
        inits.append(numpy_helper.from_array(values, name))
        return name

    def const(name, value):
        inits.append(numpy_helper.from_array(np.array(value, np.float32), name))
        return name

    def node(op, inputs, name, **attrs):
        nodes.append(helper.make_node(op, inputs, [name], name=name, **attrs))
        return name

    def gelu(x, prefix):
        scaled = node("Div", [x, const(prefix + "_sqrt2", np.sqrt(2.0))], prefix + "_div")
        erf = node("Erf", [scaled], prefix + "_erf")
        one = node("Add", [erf, const(prefix + "_one", 1.0)], prefix + "_add")
        return node("Mul", [node("Mul", [x, one], prefix + "_mul"), const(prefix + "_half", 0.5)],
                    prefix + "_mul_half")

    def feed_forward(x, prefix, act, w1=None):
        hidden = node("MatMul", [x, w1 or weight(prefix + "_w1", (64, 128))], prefix + "_fc1")
        hidden = node("Add", [hidden, weight(prefix + "_b1", (128,))], prefix + "_bias1")
        hidden = node("Relu", [hidden], prefix + "_relu") if act == "relu" else gelu(hidden, prefix)
        out = node("MatMul", [hidden, weight(prefix + "_w2", (128, 64))], prefix + "_fc2")
        return node("Add", [x, out], prefix + "_residual")

    shared = weight("qk_w", (64, 64))
    nodes.append(helper.make_node("Identity", [shared], ["q_w"], name="q_w_identity"))
    nodes.append(helper.make_node("Identity", [shared], ["k_w"], name="k_w_identity"))
    q = node("MatMul", ["tokens", "q_w"], "q_proj")
    k = node("MatMul", ["tokens", "k_w"], "k_proj")
    v = node("MatMul", ["tokens", weight("v_w", (64, 64))], "v_proj")
    kt = node("Transpose", [k], "k_t", perm=[0, 2, 1])
    scores = node("Mul", [node("MatMul", [q, kt], "qk"), const("scale", 0.125)], "scores")
    p = node("Softmax", [scores], "probs", axis=-1)
    attended = node("MatMul", [node("MatMul", [p, v], "pv"), weight("o_w", (64, 64))], "out_proj")
    x = node("Add", ["tokens", attended], "attention_residual")
    # The two layers' first Linears share a weight through Identities, as the exporter writes it.
    shared_w1 = weight("ff_w1", (64, 128))
    for prefix in ("ff_relu", "ff_gelu"):
        nodes.append(helper.make_node("Identity", [shared_w1], [prefix + "_w1"],
                                      name=prefix + "_w1_identity"))
    x = feed_forward(x, "ff_relu", "relu", "ff_relu_w1")
    x = feed_forward(x, "ff_gelu", "gelu", "ff_gelu_w1")
    nodes.append(helper.make_node("Identity", [x], ["out"], name="out_identity"))
    small = feed_forward("latents", "ff_latents", "gelu")
    nodes.append(helper.make_node("Identity", [small], ["small"], name="small_identity"))
    graph = helper.make_graph(
        nodes, "video_module",
        [helper.make_tensor_value_info("tokens", TensorProto.FLOAT, [1, 4096, 64]),
         helper.make_tensor_value_info("latents", TensorProto.FLOAT, [1, 256, 64])],
        [helper.make_tensor_value_info("out", TensorProto.FLOAT, [1, 4096, 64]),
         helper.make_tensor_value_info("small", TensorProto.FLOAT, [1, 256, 64])], inits)
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    return m


def check_feed_forward():
    """The int8 rule for video modules (make_variant.make_int8_feed_forward)."""
    rng = np.random.default_rng(2)
    feeds = {"tokens": rng.normal(0, 1, (1, 4096, 64)).astype(np.float32),
             "latents": rng.normal(0, 1, (1, 256, 64)).astype(np.float32)}
    with tempfile.TemporaryDirectory() as tmp:
        src, dst = os.path.join(tmp, "memory_attention.onnx"), os.path.join(tmp, "int8.onnx")
        onnx.save(video_module(), src)
        raw = video_module()
        # Without the Identities folded, the shared weights are not initializers to the rule.
        unfolded = make_variant.feed_forward_matmuls(raw, make_variant.FEED_FORWARD_MIN_ROWS)
        make_variant.fold_weight_identities(raw)
        found = make_variant.feed_forward_matmuls(raw, make_variant.FEED_FORWARD_MIN_ROWS)
        tool = make_variant.make_int8_feed_forward(src, dst)
        options = ort.SessionOptions()
        options.log_severity_level = 3
        want, got = (ort.InferenceSession(p, options, providers=["CPUExecutionProvider"])
                     .run(None, feeds) for p in (src, dst))
        variant = onnx.load(dst)
    quantised = sorted(n.name for n in variant.graph.node if n.op_type == "MatMulInteger")
    kept = sorted(n.name for n in variant.graph.node if n.op_type == "MatMul")
    int8_weights = sorted(i.name for i in variant.graph.initializer
                          if i.data_type == TensorProto.INT8 and len(i.dims) == 2)
    worst = float(np.abs(got[0] - want[0]).max())
    print(f"[variant_check] feed-forward int8: found {sorted(found)}; {len(quantised)} MatMuls "
          f"quantised, float32 kept: {kept}; output within {worst:.3g} of float32 (magnitude "
          f"{float(np.abs(want[0]).max()):.3g})")
    failures = []
    wanted = ["ff_gelu_fc1", "ff_gelu_fc2", "ff_relu_fc1", "ff_relu_fc2"]
    if sorted(unfolded) != ["ff_gelu_fc2", "ff_relu_fc2"]:
        failures.append(f"before folding, the rule found {sorted(unfolded)}: the model does not "
                        "share the first Linears' weight as the exporter does")
    if sorted(found) != wanted:
        failures.append(f"the feed-forward MatMuls found are {sorted(found)}, not {wanted}")
    if tool is None or len(quantised) != 4:
        failures.append(f"{len(quantised)} MatMuls quantised, not the 4 feed-forward ones")
    if kept != sorted(["q_proj", "k_proj", "v_proj", "qk", "pv", "out_proj", "ff_latents_fc1",
                       "ff_latents_fc2"]):
        failures.append(f"the MatMuls left float32 are {kept}")
    if len(int8_weights) != 3:
        failures.append(f"int8 weights {int8_weights}: not the shared first Linears' once and "
                        "each second Linear's")
    if not np.array_equal(got[1], want[1]):
        failures.append("the latents' feed-forward layer changed")
    if not worst < 0.05 * float(np.abs(want[0]).max()):
        failures.append(f"the int8 module's output is not the original's within int8's error "
                        f"({worst})")
    return failures


def joint_projection(axis=2):
    """Hiera's joint projection as PyTorch exports it: x [2, 2, 2, 8] -> MatMul [8, 18] + bias ->
    Reshape to [B, L, 3, heads, d] with the shape computed from x's (as the exporter writes it,
    d as -1) -> Split along `axis` -> each part squeezed: q, k, v [2, 4, 2, 3]."""
    rng = np.random.default_rng(3)
    inits = [numpy_helper.from_array(rng.normal(0, 1, (8, 18)).astype(np.float32), "w"),
             numpy_helper.from_array(rng.normal(0, 1, 18).astype(np.float32), "b"),
             numpy_helper.from_array(np.array([0], np.int64), "zero"),
             numpy_helper.from_array(np.array([3, 2, -1], np.int64), "tail"),
             numpy_helper.from_array(np.array([4], np.int64), "tokens"),
             numpy_helper.from_array(np.array([axis], np.int64), "axes")]
    nodes = [
        helper.make_node("MatMul", ["x", "w"], ["m"], name="qkv_matmul"),
        helper.make_node("Add", ["b", "m"], ["a"], name="qkv_add"),
        helper.make_node("Shape", ["x"], ["x_shape"], name="shape"),
        helper.make_node("Gather", ["x_shape", "zero"], ["batch"], name="batch", axis=0),
        helper.make_node("Concat", ["batch", "tokens", "tail"], ["target"], name="target", axis=0),
        helper.make_node("Reshape", ["a", "target"], ["y"], name="qkv_reshape"),
        helper.make_node("Split", ["y"], ["p0", "p1", "p2"], name="split", axis=axis),
    ]
    for p, out in (("p0", "q"), ("p1", "k"), ("p2", "v")):
        nodes.append(helper.make_node("Squeeze", [p, "axes"], [out], name="squeeze_" + out))
    graph = helper.make_graph(
        nodes, "joint_projection",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 2, 2, 8])],
        [helper.make_tensor_value_info(o, TensorProto.FLOAT, None) for o in "qkv"], inits)
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    return m


def check_split_projections():
    """int8's split of Hiera's joint projections (make_variant.split_joint_projections): three
    products by a third of the weights, computing the same parts; a Split along another axis is
    left alone."""
    x = np.random.default_rng(4).normal(0, 1, (2, 2, 2, 8)).astype(np.float32)
    options = ort.SessionOptions()
    options.log_severity_level = 3
    run_all = lambda m: ort.InferenceSession(m.SerializeToString(), options,
                                             providers=["CPUExecutionProvider"]).run(None, {"x": x})
    failures = []
    original = joint_projection()
    split = joint_projection()
    count = make_variant.split_joint_projections(split)
    ops = make_variant.count_ops(split)
    want, got = run_all(original), run_all(split)
    worst = max(float(np.abs(a - b).max()) for a, b in zip(want, got))
    print(f"[variant_check] joint projection split: {count}; ops after {ops}; parts within "
          f"{worst:.3g} of the original")
    if count != 1 or ops.get("Split") or ops.get("Squeeze") or ops.get("MatMul") != 3:
        failures.append(f"the joint projection was not split into three products ({count}, {ops})")
    if any(a.shape != (2, 4, 2, 3) for a in got) or not worst < 1e-5:
        failures.append(f"the split parts are not the original's (worst {worst})")
    if np.allclose(want[0], want[1]):
        failures.append("the queries and keys are equal: the check proves nothing")
    other = joint_projection(axis=4)
    if make_variant.split_joint_projections(other) != 0:
        failures.append("a Split along another axis was split by the weights")
    # A constant target shape whose `0` copies the batch: left alone (the tool does not check the
    # projection's rank, and a rank-2 projection's `0` would copy its width).
    copied = joint_projection()
    copied.graph.node.remove(next(n for n in copied.graph.node if n.name == "target"))
    copied.graph.initializer.append(
        numpy_helper.from_array(np.array([0, 4, 3, 2, 3], np.int64), "target"))
    want_copied = run_all(copied)
    if make_variant.split_joint_projections(copied) != 0 or not all(
            np.array_equal(a, b) for a, b in zip(want_copied, want)):
        failures.append("a constant shape copying a size (`0`) was split by the weights")
    return failures


def main():
    failures = check_split_projections()
    if failures:
        raise SystemExit("[variant_check] FAILED: " + "; ".join(failures))
    failures = check_feed_forward()
    if failures:
        raise SystemExit("[variant_check] FAILED: " + "; ".join(failures))
    print("[variant_check] ok: only the feed-forward layers over the 4096 rows were quantised")
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
