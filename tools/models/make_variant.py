#!/usr/bin/env python3
"""Precision variants of a SAM2 export: int8 weights for CPUs.

Run once by a user on the export they have (`scripts/variant.sh` runs it in the project's venv,
tools/setup/requirements.txt: ONNX Runtime's own quantisation tool, nothing hand-written does the
arithmetic):

    python tools/models/make_variant.py int8 MODEL_DIR_OR_ENCODER --out OUT_DIR

The variant is written into OUT_DIR under the source's file names, so the library finds the pair
there as it finds the original (`--model OUT_DIR`). Only the image encoder changes (it is nearly
all of the arithmetic); the decoder is copied as it is, so clicks give the original's masks from
the variant's embedding.

int8: the weights of every MatMul (and, with --conv, every Conv) quantised per output channel to
int8 by `onnxruntime.quantization.quantize_dynamic`; activations are quantised per run by the
graph (DynamicQuantizeLinear). The weights use 7 bits of range (`reduce_range`): CPUs without
VNNI (AVX2, AVX-512 before Cascade Lake) multiply uint8 by int8 into saturating 16-bit sums, and
with full-range weights SAM2.1 tiny's image embedding came out at a correlation of 0.914 with the
original on an AVX2 EPYC, 0.9997 with 7 bits; a variant is made once and may run on any CPU. Exported Linear layers often reach their MatMul through a Transpose
of the weight; quantize_dynamic only quantises a MatMul whose second input is an initializer, so
those Transposes are folded into transposed initializers first (and nothing else is changed).

fp16 (for GPUs) is not made yet: ONNX Runtime 1.31.1's `convert_float_to_float16`, after its
transformer optimiser for SAM2, gives graphs ONNX Runtime refuses on both exporters' encoders
(its symbolic shape inference fails on Hiera's graph, and without shapes the converter leaves
float16 Resize scales, Range bounds and mixed float/float16 Adds). The library still recognises
an fp16 model made by another tool, by its weights.

Every variant carries its description in the model's metadata (`metadata_props`), which the
library reads (`sam2 info`, `sam2_encoder_precision`, embedding files):

    sam2.precision         int8
    sam2.precision.source  the source file's name and SHA-256
    sam2.precision.tool    the tool and its settings
"""

import argparse
import hashlib
import json
import os
import shutil
import sys
import tempfile

import numpy as np
import onnx
from onnx import numpy_helper

ENCODER_SUFFIXES = (".encoder.onnx", "_image_encoder.onnx", "_encoder.onnx")


def say(msg):
    print(f"[variant] {msg}", file=sys.stderr, flush=True)


def sha256(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def find_encoder(source):
    """The encoder file of a model directory (one pair), or the file itself."""
    if os.path.isfile(source):
        return source
    found = sorted(f for f in os.listdir(source) if f.endswith(ENCODER_SUFFIXES))
    if len(found) != 1:
        raise SystemExit(f"{source}: expected one encoder (*.encoder.onnx, *_image_encoder.onnx or "
                         f"*_encoder.onnx), found {found or 'none'}; name the encoder file instead")
    return os.path.join(source, found[0])


def partner_files(encoder):
    """The files of the same pair beside the encoder (decoders, the ONNX Runtime multi-mask one)."""
    folder, name = os.path.split(encoder)
    for suffix in ENCODER_SUFFIXES:
        if name.endswith(suffix):
            stem = name[: -len(suffix)]
            break
    else:
        return []
    decoder_suffix = {".encoder.onnx": ".decoder.onnx", "_image_encoder.onnx": "_image_decoder",
                      "_encoder.onnx": "_decoder"}[suffix]
    return sorted(os.path.join(folder, f) for f in os.listdir(folder)
                  if f.startswith(stem + decoder_suffix) and f.endswith(".onnx"))


def fold_weight_transposes(model):
    """Replaces Transpose(initializer) by the transposed initializer. Returns how many."""
    graph = model.graph
    inits = {i.name: i for i in graph.initializer}
    consumers = {}
    for node in graph.node:
        for name in node.input:
            consumers.setdefault(name, []).append(node)
    folded = 0
    keep = []
    for node in graph.node:
        if node.op_type == "Transpose" and node.input[0] in inits:
            weight = numpy_helper.to_array(inits[node.input[0]])
            perm = next((list(a.ints) for a in node.attribute if a.name == "perm"), None)
            transposed = np.ascontiguousarray(np.transpose(weight, perm))
            init = numpy_helper.from_array(transposed, node.output[0])
            graph.initializer.append(init)
            inits[init.name] = init
            folded += 1
            continue
        keep.append(node)
    if folded:
        del graph.node[:]
        graph.node.extend(keep)
        # Initializers no node reads any more (the untransposed originals) go.
        used = {name for node in graph.node for name in node.input}
        used |= {o.name for o in graph.output}
        unused = [i for i in graph.initializer if i.name not in used]
        for init in unused:
            graph.initializer.remove(init)
    return folded


def count_ops(model):
    counts = {}
    for node in model.graph.node:
        counts[node.op_type] = counts.get(node.op_type, 0) + 1
    return counts


def make_int8(src, dst, conv):
    from onnxruntime.quantization import QuantType, quantize_dynamic

    model = onnx.load(src)
    folded = fold_weight_transposes(model)
    before = count_ops(model)
    with tempfile.TemporaryDirectory() as tmp:
        folded_path = os.path.join(tmp, "folded.onnx")
        onnx.save(model, folded_path)
        ops = ["MatMul"] + (["Conv"] if conv else [])
        quantize_dynamic(folded_path, dst, weight_type=QuantType.QInt8, per_channel=True,
                         reduce_range=True, op_types_to_quantize=ops,
                         extra_options={"MatMulConstBOnly": True})
    after = count_ops(onnx.load(dst, load_external_data=False))
    quantised = after.get("MatMulInteger", 0) + after.get("ConvInteger", 0)
    left = after.get("MatMul", 0)
    total = before.get("MatMul", 0) + (before.get("Conv", 0) if conv else 0)
    say(f"int8: {folded} weight Transposes folded; {quantised} of {total} {' and '.join(ops)} nodes"
        f" quantised ({left} MatMuls stay float32: between activations, or weights not constant)")
    tool = ("onnxruntime.quantization.quantize_dynamic: weights int8 per channel (7-bit range), "
            f"activations uint8 per run; ops {', '.join(ops)}; MatMulConstBOnly")
    return tool


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("precision", choices=["int8"], help="int8 (fp16: see the module's docstring)")
    parser.add_argument("source", help="a model directory holding one pair, or an encoder file")
    parser.add_argument("--out", required=True, help="the variant's directory (created)")
    parser.add_argument("--conv", action="store_true",
                        help="int8: quantise Conv weights too (ConvInteger), not only MatMul ones")
    args = parser.parse_args()

    encoder = find_encoder(args.source)
    os.makedirs(args.out, exist_ok=True)
    if os.path.samefile(os.path.dirname(os.path.abspath(encoder)), args.out):
        raise SystemExit("--out must be another directory than the source's")
    name = os.path.basename(encoder)
    dst = os.path.join(args.out, name)
    probe = onnx.load(encoder, load_external_data=False)
    already = {p.key: p.value for p in probe.metadata_props}.get("sam2.precision")
    if already:
        raise SystemExit(f"{encoder} is already a {already} variant; make variants of the original")
    say(f"{args.precision} variant of {encoder} -> {dst}")
    tool = make_int8(encoder, dst, args.conv)

    model = onnx.load(dst)
    props = {p.key: p.value for p in model.metadata_props}
    props.update({
        "sam2.precision": args.precision,
        "sam2.precision.source": f"{name} sha256:{sha256(encoder)}",
        "sam2.precision.tool": tool,
    })
    del model.metadata_props[:]
    for key, value in sorted(props.items()):
        model.metadata_props.append(onnx.StringStringEntryProto(key=key, value=value))
    onnx.save(model, dst)
    for partner in partner_files(encoder):
        shutil.copyfile(partner, os.path.join(args.out, os.path.basename(partner)))
        say(f"copied {os.path.basename(partner)} as it is")
    size = lambda p: os.path.getsize(p) / 1e6
    say(f"{name}: {size(encoder):.1f} MB -> {size(dst):.1f} MB")
    print(json.dumps({"precision": args.precision, "encoder": dst, "source": encoder}))


if __name__ == "__main__":
    main()
