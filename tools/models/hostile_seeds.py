#!/usr/bin/env python3
"""Write the committed fuzz seeds of hostile real-architecture models (fuzz/seeds/onnx_split/).

    python tools/models/hostile_seeds.py --models "$SAM2_REAL_MODELS" --out fuzz/seeds/onnx_split

The real SAM2.1 tiny exports are 16-109 MB; the seeds are cut down to a few KB each while keeping
what a real exporter's protobuf looks like (producer, opset imports, named nodes with attributes,
Constant nodes carrying tensors, symbolic dimensions, raw_data initializers): the first nodes of
the samexporter decoder's graph, every graph input and output, and every initializer, each shrunk
to at most 16 elements of its own leading data. Then the kinds of hostile files
tools/models/hostile_models.py makes of the full models for the tests, with its edits: cuts, a flipped
bit, external data outside the model's directory, and huge declared dimensions. Deterministic: a
second run writes the same bytes. Needs the `onnx` package (the .venv of tools/setup/setup.sh has it).
"""

import argparse
import os

import onnx
from onnx import TensorProto

from hostile_models import Layout, external, initializer_dims, input_dim, largest, real_pairs

KEEP_NODES = 160
MAX_ELEMENTS = 16


def cut_down(model: onnx.ModelProto) -> onnx.ModelProto:
    graph = model.graph
    nodes = list(graph.node)[:KEEP_NODES]
    initializers = []
    for t in graph.initializer:
        small = TensorProto()
        small.CopyFrom(t)
        if len(t.raw_data) > 0:
            elem = len(t.raw_data) // max(1, _count(t.dims))
            n = min(MAX_ELEMENTS, _count(t.dims))
            del small.dims[:]
            small.dims.extend([n])
            small.raw_data = t.raw_data[: n * elem]
        initializers.append(small)
    out = onnx.ModelProto()
    out.CopyFrom(model)
    del out.graph.node[:]
    out.graph.node.extend(nodes)
    del out.graph.initializer[:]
    out.graph.initializer.extend(initializers)
    del out.graph.value_info[:]
    return out


def _count(dims) -> int:
    n = 1
    for d in dims:
        n *= d
    return n


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", required=True, help="$SAM2_REAL_MODELS (tools/setup/setup-real.sh)")
    ap.add_argument("--out", required=True)
    args = ap.parse_args()
    model = cut_down(onnx.load(real_pairs(args.models)["samexporter"][1]))
    base = model.SerializeToString()
    big = model.graph.initializer[largest(model)]
    # Offsets of the cuts: inside the node list, and inside the largest initializer's data.
    layout = Layout(base)
    node_at = layout.nodes[KEEP_NODES // 2][0]
    raw_at = layout.largest()[2][0]
    assert node_at > 0 and raw_at > 0
    flipped = bytearray(base)
    flipped[node_at + 7] ^= 0x10
    seeds = {
        "real-decoder-cut-down.onnx": base,
        "real-decoder-truncated-header.onnx": base[:16],
        "real-decoder-truncated-mid-graph.onnx": base[: node_at + 9],
        "real-decoder-truncated-mid-initializer.onnx": base[: raw_at + len(big.raw_data) // 2],
        "real-decoder-bit-flip-in-a-node.onnx": bytes(flipped),
        "real-decoder-external-etc-passwd.onnx": external(model, "../../etc/passwd"),
        "real-decoder-external-absolute.onnx": external(model, "/etc/passwd"),
        "real-decoder-mask-input-1048576.onnx":
            input_dim(model, "mask_input", {2: 1 << 20, 3: 1 << 20}),
        "real-decoder-initializer-dims-overflow.onnx":
            initializer_dims(model, [1 << 40, 1 << 30]),
        "real-decoder-initializer-dims-negative.onnx": initializer_dims(model, [-1, 64]),
    }
    os.makedirs(args.out, exist_ok=True)
    for name, data in sorted(seeds.items()):
        with open(os.path.join(args.out, name), "wb") as f:
            f.write(data)
        print(f"{name}: {len(data)} bytes")


if __name__ == "__main__":
    main()
