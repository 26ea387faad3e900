#!/usr/bin/env python3
"""Faulty and foreign variants of the generated tracking modules, for tests/it/video.rs.

    python tools/models/track_module_variants.py --track models/track --out DIR

Each is a copy of one module of models/track/ (tools/models/gen_track_models.py) with one edit, a real
ONNX graph that ONNX Runtime loads and runs:
  image_decoder_empty_score.onnx   `object_score_logits` is empty ([1, 0]): the score sliced away,
                                   to a length computed from the number of points (N − N), so
                                   only running it shows the fault
  memory_encoder_mem32.onnx        `maskmem_features` has 32 channels ([1, 32, 64, 64]), as an
                                   export with another memory dimension would
  memory_encoder_bad_code.onnx     `temporal_code` rows of 63 values: no other module takes it, so
                                   only running it shows the fault
  memory_attention_unmarked.onnx   without the generator's `sam2.synthetic` marker, as a module
                                   of another export (the real SAM2 modules have none)
"""

import argparse
import os

import numpy as np
import onnx
from onnx import helper, numpy_helper


def rename_output(graph, old, new):
    """Makes the node that produced graph output `old` produce `new` instead."""
    for node in graph.node:
        for i, name in enumerate(node.output):
            if name == old:
                node.output[i] = new
    for node in graph.node:
        for i, name in enumerate(node.input):
            if name == old:
                node.input[i] = new


def slice_output(model, name, axis, end, dims):
    """Graph output `name` becomes its slice [0, end) along `axis`, declared with `dims`; `end`
    None: N − N, N the number of points (dimension 1 of input `point_coords`)."""
    g = model.graph
    inner = name + "_before_variant"
    rename_output(g, name, inner)
    consts = {"starts": [0], "axes": [axis]}
    if end is not None:
        consts["ends"] = [end]
    for key, value in consts.items():
        g.initializer.append(numpy_helper.from_array(np.array(value, np.int64), f"{name}_{key}"))
    if end is None:
        g.initializer.append(numpy_helper.from_array(np.array([1], np.int64), f"{name}_one"))
        g.initializer.append(numpy_helper.from_array(np.array([2], np.int64), f"{name}_two"))
        g.node.append(helper.make_node("Shape", ["point_coords"], [f"{name}_shape"]))
        g.node.append(helper.make_node(
            "Slice", [f"{name}_shape", f"{name}_one", f"{name}_two"], [f"{name}_n"]))
        g.node.append(helper.make_node(
            "Sub", [f"{name}_n", f"{name}_n"], [f"{name}_ends"]))
    g.node.append(helper.make_node(
        "Slice", [inner, f"{name}_starts", f"{name}_ends", f"{name}_axes"], [name]))
    out = next(o for o in g.output if o.name == name)
    shape = out.type.tensor_type.shape
    del shape.dim[:]
    for d in dims:
        dim = shape.dim.add()
        if isinstance(d, str):
            dim.dim_param = d
        else:
            dim.dim_value = d


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--track", required=True, help="the generated modules (models/track)")
    ap.add_argument("--out", required=True)
    a = ap.parse_args()
    os.makedirs(a.out, exist_ok=True)
    load = lambda n: onnx.load(os.path.join(a.track, n + ".onnx"))  # noqa: E731

    m = load("image_decoder")
    slice_output(m, "object_score_logits", 1, None, [1, "empty"])
    onnx.save(m, os.path.join(a.out, "image_decoder_empty_score.onnx"))

    m = load("memory_encoder")
    slice_output(m, "maskmem_features", 1, 32, [1, 32, 64, 64])
    onnx.save(m, os.path.join(a.out, "memory_encoder_mem32.onnx"))

    m = load("memory_encoder")
    slice_output(m, "temporal_code", 3, 63, [7, 1, 1, 63])
    onnx.save(m, os.path.join(a.out, "memory_encoder_bad_code.onnx"))

    m = load("memory_attention")
    keep = [p for p in m.metadata_props if p.key != "sam2.synthetic"]
    del m.metadata_props[:]
    m.metadata_props.extend(keep)
    m.producer_name = "another-exporter"
    onnx.save(m, os.path.join(a.out, "memory_attention_unmarked.onnx"))


if __name__ == "__main__":
    main()
