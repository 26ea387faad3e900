"""Precision variants of a SAM2 export: int8 weights for CPUs, float16 for GPUs.

Run once by a user on the export they have, as `sam2-variant` (`scripts/variant.sh` runs it in the
project's venv, tools/setup/requirements.txt: ONNX Runtime's own quantisation tool, nothing
hand-written does the arithmetic):

    sam2-variant int8 MODEL_DIR_OR_ENCODER --out OUT_DIR
    sam2-variant fp16 MODEL_DIR_OR_ENCODER --out OUT_DIR [--sample IMAGE]

The variant is written into OUT_DIR under the source's file names, so the library finds the pair
there as it finds the original (`--model OUT_DIR`). Only the image encoder changes (it is nearly
all of the arithmetic); the decoder is copied as it is, so clicks give the original's masks from
the variant's embedding. A video export (the four modules of docs/video.md) works the same way,
so the tracker reads OUT_DIR as it reads the export: its image encoder is converted; the
feed-forward layers of memory attention and of the memory encoder (Linear → ReLU or GELU →
Linear over the image's 64 x 64 positions) get int8 weights the same way; their attention
projections stay float32 (with them in int8 memory attention ran slower in the library, whose
fused attention then no longer projects the values after the kernel), and so do EdgeTAM's
perceiver's feed-forward layers over its few hundred latents, which cost little and are the
memory itself. The image decoder is copied as it is. Memory attention's weightiest work is
attention between activations, which quantize_dynamic leaves alone. With `--attention-scores
int8`, memory attention also gets metadata asking the library for its attention scores in int8
(queries and keys quantised when the model runs, by ONNX Runtime's DynamicQuantizeLinear and
MatMulIntegerToFloat; docs/weights.md): faster on CPUs with VNNI, at a measured cost in agreement
where attention is sharp (docs/performance.md). An image encoder without MatMul weights
(EdgeTAM's RepViT) is copied as it is in a video variant: int8 Convs (ConvInteger) run slower
than float32.

int8: the weights of every MatMul (and, with --conv, every Conv) quantised per output channel to
int8 by `onnxruntime.quantization.quantize_dynamic`; activations are quantised per run by the
graph (DynamicQuantizeLinear). The weights use 7 bits of range (`reduce_range`): CPUs without
VNNI (AVX2, AVX-512 before Cascade Lake) multiply uint8 by int8 into saturating 16-bit sums, and
with full-range weights SAM2.1 tiny's image embedding came out at a correlation of 0.914 with the
original on an AVX2 EPYC, 0.9997 with 7 bits; a variant is made once and may run on any CPU. Exported Linear layers often reach their MatMul through a Transpose
of the weight; quantize_dynamic only quantises a MatMul whose second input is an initializer, so
those Transposes are folded into transposed initializers first. Hiera's joint query-key-value
projections are then split into three by their weights, as the library splits them in a float32
encoder (its Split over an inner axis is slow on CPUs); nothing else is changed.

fp16 (for GPUs): `onnxruntime.transformers.float16.convert_float_to_float16`, the model's inputs
and outputs kept float32 (so the library's embedding and the decoder are unchanged). Before it:
LayerNorm is fused by ONNX Runtime's FusionLayerNormalization (a no-op on both exporters' encoders,
which write LayerNormalization) and kept float32 (its statistics need the range; and ONNX
Runtime's CPU kernel for a float16 LayerNormalization cannot share pre-packed weights, so a CPU
session with the library's shared weights refused such a model); what is computed from constants and shapes alone
(position encodings, scales, shape arithmetic) stays float32; and ONNX Runtime's calibrator runs the
float32 model once on a sample (--sample IMAGE, or a synthetic pattern) and every tensor that
reaches 4096 in magnitude keeps its producer and readers in float32 (float16 holds up to 65504).
After it, float32 readers of a float32 tensor read it directly (the converter casts to float16 and
back between two float32 nodes; tools/references/variant_check.py checks this).
The converter writes one identical Cast per float32 reader of a float16 tensor and leaves its
Casts at the end of the graph: the copies are dropped and the graph sorted, then checked. (ONNX
Runtime's transformer optimiser for SAM2 is not run: with it the converter gave encoders ONNX
Runtime refuses, since its symbolic shape inference fails on Hiera's graph; the library fuses
attention itself when it loads a model.)

Every variant carries its description in the model's metadata (`metadata_props`), which the
library reads (`sam2 info`, `sam2_encoder_precision`, embedding files):

    sam2.precision         int8
    sam2.precision.source  the source file's name and SHA-256
    sam2.precision.tool    the tool and its settings
    sam2.attention_scores  int8 (memory attention, with --attention-scores int8)
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
from onnx import TensorProto, numpy_helper

ENCODER_SUFFIXES = (".encoder.onnx", "_image_encoder.onnx", "_encoder.onnx")


def say(msg):
    print(f"[variant] {msg}", file=sys.stderr, flush=True)


def sha256(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


VIDEO_MODULES = ("image_encoder", "memory_attention", "memory_encoder", "image_decoder")


def video_modules(folder, name=None):
    """The four modules of a video export in `folder` (docs/video.md: each under the contract's
    name after a common prefix), as {module: path}, when the folder holds one set (of the image
    encoder `name`, when given); None otherwise."""
    if name is not None:
        if not name.endswith(VIDEO_MODULES[0] + ".onnx"):
            return None
        prefixes = [name[: -len(VIDEO_MODULES[0] + ".onnx")]]
    else:
        suffix = VIDEO_MODULES[1] + ".onnx"
        prefixes = [f[: -len(suffix)] for f in os.listdir(folder) if f.endswith(suffix)]
    if len(prefixes) != 1:
        return None
    paths = {m: os.path.join(folder, f"{prefixes[0]}{m}.onnx") for m in VIDEO_MODULES}
    return paths if all(os.path.isfile(p) for p in paths.values()) else None


def find_encoder(source):
    """The encoder file of a model directory (one pair, or one video export's four modules), or
    the file itself."""
    if os.path.isfile(source):
        return source
    video = video_modules(source)
    if video:
        return video["image_encoder"]
    found = sorted(f for f in os.listdir(source) if f.endswith(ENCODER_SUFFIXES))
    if len(found) != 1:
        raise SystemExit(f"{source}: expected one encoder (*.encoder.onnx, *_image_encoder.onnx or "
                         f"*_encoder.onnx) or one video export (*memory_attention.onnx beside its "
                         f"three other modules), found {found or 'none'}; name the encoder file "
                         f"instead")
    return os.path.join(source, found[0])


def partner_files(encoder):
    """The files that go with the encoder, copied as they are: a video export's three other
    modules, or the pair's decoders beside it (with the ONNX Runtime multi-mask one)."""
    folder, name = os.path.split(encoder)
    video = video_modules(folder or ".", name)
    if video:
        return [video[m] for m in VIDEO_MODULES[1:]]
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


def readers_of(graph):
    """{tensor name: the nodes of `graph` that take it as an input}, in the graph's order."""
    readers = {}
    for node in graph.node:
        for name in node.input:
            readers.setdefault(name, []).append(node)
    return readers


def fold_weight_transposes(model):
    """Replaces Transpose(initializer) by the transposed initializer. Returns how many."""
    graph = model.graph
    inits = {i.name: i for i in graph.initializer}
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


def split_joint_projections(model):
    """Hiera's joint query-key-value projections, exported as `Split(Reshape(MatMul(x, W) + b,
    [B, L, 3, heads, d]), axis 2)` with each part squeezed, become three projections by a third
    of the weights and bias each, reshaped to `[B, L, heads, d]` (the exported shape's first two
    and last two entries): what the library does to a float32 encoder on the CPU
    (docs/weights.md, split projections). quantize_dynamic then quantises three MatMuls, and ONNX
    Runtime's Split over that inner axis, which copies the tensor a row of `d` floats at a time
    (about 60 ms of SAM2.1 tiny's int8 encode on 2 cores), is gone. Per output channel, the int8
    weights are the same numbers column for column. Returns how many.

    The library's split (src/rewrite/qkv_split.rs) cannot do this for a variant: it runs when a
    model is loaded, on float32 projections, and a variant's projections are already quantised
    (`MatMulInteger` -> `Cast` -> `Mul` -> `Add`). So the split of an int8 variant is made here,
    on the float32 graph before quantize_dynamic, and the library's applies to float32 models
    (docs/performance.md, "The int8 variant's projections split by the tool")."""
    graph = model.graph
    inits = {i.name: i for i in graph.initializer}
    producer = {o: n for n in graph.node for o in n.output}
    readers = readers_of(graph)
    outputs = {o.name for o in graph.output}

    def sole_reader(name):
        found = readers.get(name, [])
        return found[0] if len(found) == 1 and name not in outputs else None

    # Constant inputs: initializers, and outputs of Constant nodes (as the exporter writes axes).
    constants = {name: numpy_helper.to_array(t) for name, t in inits.items()}
    for node in graph.node:
        value = next((a.t for a in node.attribute if a.name == "value"), None)
        if node.op_type == "Constant" and value is not None:
            constants[node.output[0]] = numpy_helper.to_array(value)

    def ints(node, attr, index):
        for a in node.attribute:
            if a.name == attr:
                return list(a.ints)
        if len(node.input) > index and node.input[index] in constants:
            return constants[node.input[index]].reshape(-1).tolist()
        return None

    def opset():
        return next((o.version for o in model.opset_import if o.domain in ("", "ai.onnx")), 0)

    if opset() < 10:
        return 0
    replaced = {}
    removed = set()
    dropped = set()
    count = 0
    for split in graph.node:
        axis = next((a.i for a in split.attribute if a.name == "axis"), 0)
        if split.op_type != "Split" or len(split.output) != 3 or axis not in (2, -3):
            continue
        if ints(split, "split", 1) not in (None, [1, 1, 1]):
            continue
        squeezes = [sole_reader(o) for o in split.output]
        if any(q is None or q.op_type != "Squeeze" or ints(q, "axes", 1) not in ([2], [-3])
               for q in squeezes):
            continue
        reshape = producer.get(split.input[0])
        if reshape is None or reshape.op_type != "Reshape" or sole_reader(split.input[0]) is not split:
            continue
        add = producer.get(reshape.input[0])
        if add is None or add.op_type != "Add" or sole_reader(reshape.input[0]) is not reshape:
            continue
        matmul = next((producer.get(t) for t in add.input if t not in inits), None)
        bias = next((t for t in add.input if t in inits), None)
        if matmul is None or bias is None or matmul.op_type != "MatMul":
            continue
        if sole_reader(matmul.output[0]) is not add or matmul.input[1] not in inits:
            continue
        weight = numpy_helper.to_array(inits[matmul.input[1]])
        b = numpy_helper.to_array(inits[bias])
        if (weight.ndim != 2 or weight.shape[1] % 3 or b.shape != (weight.shape[1],)
                or weight.dtype != np.float32):
            continue
        # A constant shape's `0` copies the input's size at its position: of a rank-2 projection
        # that would be the width, which a third of it does not have.
        shape = reshape.input[1]
        if shape in constants and 0 in constants[shape].reshape(-1)[:2].tolist():
            continue
        part = weight.shape[1] // 3
        stem = f"sam2_split_{count}"
        new = [
            helper_node("Slice", [shape, stem + "_0", stem + "_2"], stem + "_lead"),
            helper_node("Slice", [shape, stem + "_3", stem + "_5"], stem + "_tail"),
            helper_node("Concat", [stem + "_lead", stem + "_tail"], stem + "_shape", axis=0),
        ]
        for v in (0, 2, 3, 5):
            graph.initializer.append(numpy_helper.from_array(np.array([v], np.int64), f"{stem}_{v}"))
        for i, squeeze in enumerate(squeezes):
            w_i = f"{stem}_w{i}"
            b_i = f"{stem}_b{i}"
            graph.initializer.append(numpy_helper.from_array(
                np.ascontiguousarray(weight[:, i * part:(i + 1) * part]), w_i))
            graph.initializer.append(numpy_helper.from_array(
                np.ascontiguousarray(b[i * part:(i + 1) * part]), b_i))
            new += [
                helper_node("MatMul", [matmul.input[0], w_i], f"{stem}_m{i}"),
                helper_node("Add", [f"{stem}_m{i}", b_i], f"{stem}_a{i}"),
                helper_node("Reshape", [f"{stem}_a{i}", stem + "_shape"], squeeze.output[0]),
            ]
        replaced[id(split)] = new
        removed |= {id(n) for n in (matmul, add, reshape, *squeezes)}
        dropped |= {matmul.input[1], bias}
        count += 1
    if count:
        nodes = []
        for node in graph.node:
            nodes.extend(replaced.get(id(node), []))
            if id(node) not in removed and id(node) not in replaced:
                nodes.append(node)
        del graph.node[:]
        graph.node.extend(nodes)
        # The joint weights and biases go unless something else reads them (a subgraph too).
        used = set(outputs)
        stack = [graph]
        while stack:
            g = stack.pop()
            for node in g.node:
                used.update(node.input)
                for a in node.attribute:
                    stack.extend([a.g] if a.type == onnx.AttributeProto.GRAPH else a.graphs)
        for init in [i for i in graph.initializer if i.name in dropped - used]:
            graph.initializer.remove(init)
    return count


def helper_node(op, inputs, output, **attrs):
    return onnx.helper.make_node(op, inputs, [output], name=output + "_node", **attrs)


def count_ops(model):
    counts = {}
    for node in model.graph.node:
        counts[node.op_type] = counts.get(node.op_type, 0) + 1
    return counts


class NothingToQuantise(Exception):
    """The encoder has no weights quantize_dynamic would quantise."""


# What memory attention marked by --attention-scores int8 says of itself: its weights are the
# export's, and the library computes its attention scores in int8 (src/rewrite/mod.rs,
# `Scores::Int8`).
INT8_ATTENTION_TOOL = ("make_variant.py --attention-scores int8: weights as exported; attention "
                       "scores int8 when the library loads it on a CPU with VNNI (queries uint8 "
                       "per run, keys int8 per key; DynamicQuantizeLinear, MatMulIntegerToFloat)")


def write_metadata(path, props):
    """Adds `props` to the model's metadata (`metadata_props`), sorted."""
    model = onnx.load(path)
    merged = {p.key: p.value for p in model.metadata_props}
    merged.update(props)
    del model.metadata_props[:]
    for key, value in sorted(merged.items()):
        model.metadata_props.append(onnx.StringStringEntryProto(key=key, value=value))
    onnx.save(model, path)


def quantise_weights(model, dst, ops, nodes=None):
    """Writes `model` to `dst` with the weights of its `ops` nodes (only `nodes`, by name, when
    given) int8 per output channel in 7 bits of range, activations uint8 per run: the settings
    of every int8 variant (the module docstring says why 7 bits)."""
    from onnxruntime.quantization import QuantType, quantize_dynamic

    with tempfile.TemporaryDirectory() as tmp:
        folded_path = os.path.join(tmp, "folded.onnx")
        onnx.save(model, folded_path)
        quantize_dynamic(folded_path, dst, weight_type=QuantType.QInt8, per_channel=True,
                         reduce_range=True, op_types_to_quantize=ops,
                         nodes_to_quantize=nodes,
                         extra_options={"MatMulConstBOnly": True})


def make_int8(src, dst, conv):
    model = onnx.load(src)
    folded = fold_weight_transposes(model)
    split = split_joint_projections(model)
    before = count_ops(model)
    ops = ["MatMul"] + (["Conv"] if conv else [])
    quantise_weights(model, dst, ops)
    after = count_ops(onnx.load(dst, load_external_data=False))
    quantised = after.get("MatMulInteger", 0) + after.get("ConvInteger", 0)
    left = after.get("MatMul", 0)
    total = before.get("MatMul", 0) + (before.get("Conv", 0) if conv else 0)
    if quantised == 0:
        hint = ("" if conv or not before.get("Conv") else
                f"; its {before['Conv']} Convs would be with --conv, but ONNX Runtime's ConvInteger"
                " is slower on CPUs than its float32 Conv (4.5x on EdgeTAM's RepViT encoder)")
        raise NothingToQuantise(f"{src}: no {' or '.join(ops)} node has constant weights to "
                                f"quantise, so an int8 variant would compute exactly what the "
                                f"original does{hint}")
    say(f"int8: {folded} weight Transposes folded; {split} joint query-key-value projections "
        f"split by their weights; {quantised} of {total} {' and '.join(ops)} nodes"
        f" quantised ({left} MatMuls stay float32: between activations, or weights not constant)")
    tool = ("onnxruntime.quantization.quantize_dynamic: weights int8 per channel (7-bit range), "
            f"activations uint8 per run; ops {', '.join(ops)}; MatMulConstBOnly")
    return tool


def fold_weight_identities(model):
    """Lets the readers of Identity(initializer) read the initializer itself (the exporter writes
    an Identity where layers share a weight), so that quantize_dynamic sees the weights, and
    quantises a shared one once. Identities whose output is a graph output stay. Returns how
    many were folded."""
    graph = model.graph
    inits = {i.name for i in graph.initializer}
    outputs = {o.name for o in graph.output}
    source = {node.output[0]: node.input[0] for node in graph.node
              if node.op_type == "Identity" and node.input[0] in inits
              and node.output[0] not in outputs}
    if not source:
        return 0
    keep = []
    for node in graph.node:
        if node.op_type == "Identity" and node.output[0] in source:
            continue
        for i, name in enumerate(node.input):
            if name in source:
                node.input[i] = source[name]
        keep.append(node)
    del graph.node[:]
    graph.node.extend(keep)
    return len(source)


def feed_forward_matmuls(model, min_rows):
    """The MatMuls of the model's feed-forward layers: Linear → activation → Linear, each Linear
    a MatMul with an initializer as its weights (after fold_weight_identities and
    fold_weight_transposes). The first is the MatMul whose output (through its bias Add, if any)
    a Relu reads, or a Div that an Erf reads (the exporters' erf GELU, x / √2); the second is the
    MatMul whose input a Relu wrote, or the last Mul of an erf GELU. Attention projections are
    not feed-forward layers and stay as they are: the library's fused attention reads them.
    Only layers over at least `min_rows` rows known to ONNX's shape inference count: those over
    the image's positions, not those over a few hundred latents."""
    graph = model.graph
    inits = {i.name for i in graph.initializer}
    producer = {o: n for n in graph.node for o in n.output}
    readers = readers_of(graph)

    def read_by(name):
        return readers.get(name, [])

    def through_bias(name):
        """`name`, and the output of an Add of it with a constant, if one reads it."""
        out = [name]
        for r in read_by(name):
            if r.op_type == "Add" and any(i in inits for i in r.input):
                out.append(r.output[0])
        return out

    def activates(name):
        for r in read_by(name):
            if r.op_type == "Relu":
                return True
            if r.op_type == "Div" and any(e.op_type == "Erf" for e in read_by(r.output[0])):
                return True
        return False

    def erf_above(node, depth):
        if node is None or depth < 0:
            return False
        if node.op_type == "Erf":
            return True
        return any(erf_above(producer.get(i), depth - 1) for i in node.input)

    def activated(name):
        p = producer.get(name)
        return p is not None and (p.op_type == "Relu" or (p.op_type == "Mul" and erf_above(p, 3)))

    # The rows of each MatMul's input that ONNX's shape inference can vouch for: the product of
    # its known dimensions but the last (a batch of unknown size counts as one).
    inferred = onnx.shape_inference.infer_shapes(model)
    shapes = {v.name: [d.dim_value if d.HasField("dim_value") else 1
                       for d in v.type.tensor_type.shape.dim]
              for v in list(inferred.graph.value_info) + list(inferred.graph.input)}

    def rows(name):
        dims = shapes.get(name)
        return int(np.prod(dims[:-1], dtype=np.int64)) if dims else 0

    names = []
    for node in graph.node:
        if node.op_type != "MatMul" or node.input[1] not in inits:
            continue
        if not (any(activates(o) for o in through_bias(node.output[0]))
                or activated(node.input[0])):
            continue
        if rows(node.input[0]) >= min_rows:
            names.append(node.name)
    return names


# Feed-forward layers over fewer rows stay float32: EdgeTAM's perceiver runs its feed-forward
# layers over 256 latents each of its global and 2D halves (a few milliseconds of the memory
# encoder), and those latents are the memory itself. With them int8 as well, the memory
# encoder's int8 layers moved EdgeTAM's tracked logits by 1.32e-2, half of what dropping a memory
# frame does (2.69e-2); its two layers over the 64 x 64 positions alone, by 7.3e-4.
FEED_FORWARD_MIN_ROWS = 1024


def make_int8_feed_forward(src, dst):
    """Quantises the feed-forward MatMuls of a video module (memory attention, the memory
    encoder) as make_int8 does an encoder's: weights int8 per channel (7-bit range), activations
    uint8 per run. Returns the tool's description, or None where the module has none."""
    model = onnx.load(src)
    fold_weight_identities(model)
    fold_weight_transposes(model)
    names = feed_forward_matmuls(model, FEED_FORWARD_MIN_ROWS)
    if not names:
        return None
    total = count_ops(model).get("MatMul", 0)
    quantise_weights(model, dst, ["MatMul"], names)
    quantised = count_ops(onnx.load(dst, load_external_data=False)).get("MatMulInteger", 0)
    if quantised != len(names):
        raise SystemExit(f"{src}: {len(names)} feed-forward MatMuls found, {quantised} quantised")
    say(f"int8: {quantised} feed-forward MatMuls of {total} in {os.path.basename(src)} quantised "
        f"(attention projections and products stay float32)")
    return ("onnxruntime.quantization.quantize_dynamic: the feed-forward layers' weights int8 per "
            f"channel (7-bit range), activations uint8 per run ({quantised} MatMuls); the rest "
            "as exported")


# fp16: tensors whose largest magnitude on the sample reaches this stay float32 (with their
# producers and readers). float16 holds up to 65504; the margin covers what a real image may
# reach beyond the sample, and the squares and sums a following operator takes.
FP16_SAFE = 4096.0


def reads_of(node):
    """The names `node` reads: its inputs, and what the bodies of an If or Loop read from the
    graph around them."""
    reads = list(node.input)
    for attr in node.attribute:
        for sub in ([attr.g] if attr.HasField("g") else []) + list(attr.graphs):
            reads.extend(i for n in sub.node for i in n.input)
    return reads


def value_dependent_nodes(model):
    """Names of the nodes whose outputs depend on the values of a graph input (the image): the
    rest (positions, scales, shape arithmetic) is computed from constants and shapes alone."""
    graph = model.graph
    dependent = {i.name for i in graph.input}
    names = set()
    for node in graph.node:  # ONNX keeps nodes in a topological order
        reads = reads_of(node)
        if node.op_type in ("Shape", "Size"):
            continue  # a shape is known from the input's dimensions, not its values
        if any(name in dependent for name in reads):
            dependent.update(node.output)
            names.add(node.name)
    return names


def sample_input(model, sample):
    """The encoder's input for the overflow check: SAM2's normalisation of an image (--sample, or a
    deterministic pattern of gradients, edges and noise over the whole pixel range)."""
    inp = model.graph.input[0]
    dims = [d.dim_value for d in inp.type.tensor_type.shape.dim]
    if len(dims) != 4 or dims[1] != 3 or not all(dims):
        raise SystemExit(f"fp16: the encoder's input {inp.name} is {dims}; expected [1, 3, H, W] with known sizes")
    h, w = dims[2], dims[3]
    if sample:
        from PIL import Image
        pixels = np.asarray(Image.open(sample).convert("RGB").resize((w, h), Image.BILINEAR), dtype=np.float32)
    else:
        y, x = np.mgrid[0:h, 0:w].astype(np.float32)
        rng = np.random.default_rng(0)
        pixels = np.stack([255 * x / w, 255 * (0.5 + 0.5 * np.sin(y / 23.0)), 255 * ((x // 97 + y // 61) % 2)], -1)
        pixels = np.clip(pixels + rng.normal(0, 12, pixels.shape), 0, 255).astype(np.float32)
    mean = np.array([123.675, 116.28, 103.53], np.float32)
    std = np.array([58.395, 57.12, 57.375], np.float32)
    return inp.name, ((pixels - mean) / std).transpose(2, 0, 1)[None].copy()


def large_tensors(path, model, sample):
    """The float tensors whose magnitude reaches FP16_SAFE on the sample, with that magnitude, by
    ONNX Runtime's calibrator (min and max of every tensor over one run)."""
    from onnxruntime.quantization.calibrate import CalibrationDataReader, create_calibrator

    name, data = sample_input(model, sample)

    class One(CalibrationDataReader):
        def __init__(self):
            self.left = [{name: data}]

        def get_next(self):
            return self.left.pop() if self.left else None

    with tempfile.TemporaryDirectory() as tmp:
        calibrator = create_calibrator(path, augmented_model_path=os.path.join(tmp, "augmented.onnx"),
                                       providers=["CPUExecutionProvider"])
        calibrator.collect_data(One())
        ranges = calibrator.compute_data()
    large = {}
    for tensor, value in ranges.data.items():
        low, high = float(np.min(value.range_value[0])), float(np.max(value.range_value[1]))
        peak = max(abs(low), abs(high))
        if not np.isfinite(peak) or peak >= FP16_SAFE:
            large[tensor] = peak
    return large


def skip_round_trips(graph):
    """Float32 readers of a float32 tensor read it directly. The converter casts each float32
    node's output to float16 and back to float32 for the next float32 reader, so a chain of nodes
    kept float32 would still pass every intermediate through float16 (and a tensor past its range
    would overflow between them). Those readers' Casts now take the float32 tensor (a cast to its
    own type, which ONNX Runtime removes), and the converter's casts left unread go. Returns how
    many reads were redirected."""
    def to(node):
        return next((a.i for a in node.attribute if a.name == "to"), None)

    def ours(node):
        """One of the converter's casts from float32: of a graph input, or of a float32 node's
        output."""
        return node.op_type == "Cast" and (node.name.startswith("graph_input_cast")
                                           or node.name.endswith("_cast_to_fp16_node"))

    readers = readers_of(graph)
    redirected = 0
    for node in graph.node:
        if not ours(node) or to(node) != TensorProto.FLOAT16:
            continue
        for reader in readers.get(node.output[0], []):
            if reader.op_type == "Cast" and to(reader) == TensorProto.FLOAT:
                reader.input[0] = node.input[0]
                redirected += 1
    while True:
        read = {name for node in graph.node for name in reads_of(node)}
        read |= {o.name for o in graph.output}
        unread = [n for n in graph.node if ours(n) and not any(o in read for o in n.output)]
        if not unread:
            return redirected
        for node in unread:
            graph.node.remove(node)


def topological(nodes, graph):
    """`nodes` in an order where each reads only what came before (the converter appends the
    Casts it inserts at the end, where ONNX wants them before their readers)."""
    ready = {i.name for i in graph.input} | {i.name for i in graph.initializer} | {""}
    producer = {out for node in nodes for out in node.output}
    order, waiting = [], list(nodes)
    while waiting:
        left = []
        for node in waiting:
            if all(r in ready or r not in producer for r in reads_of(node)):
                order.append(node)
                ready.update(node.output)
            else:
                left.append(node)
        if len(left) == len(waiting):
            raise SystemExit("fp16: the converted graph has a cycle")
        waiting = left
    return order


def make_fp16(src, dst, sample):
    from onnxruntime.transformers.float16 import DEFAULT_OP_BLOCK_LIST, convert_float_to_float16
    from onnxruntime.transformers.fusion_layernorm import FusionLayerNormalization
    from onnxruntime.transformers.onnx_model import OnnxModel

    model = onnx.load(src)
    for i, node in enumerate(model.graph.node):  # the block lists name nodes
        if not node.name:
            node.name = f"sam2_variant_node_{i}"
    # LayerNorm fused first (a no-op where the exporter wrote LayerNormalization), so that its
    # mean and variance are one operator kept in float32, not squares and sums in float16.
    wrapped = OnnxModel(model)
    before = count_ops(model).get("LayerNormalization", 0)
    FusionLayerNormalization(wrapped).apply()
    wrapped.prune_graph()
    model = wrapped.model
    fused = count_ops(model).get("LayerNormalization", 0) - before
    # Positions, scales and shape arithmetic (computed from constants and shapes, not from the
    # image) stay float32: their sines and cosines of large arguments lose their digits in fp16.
    dependent = value_dependent_nodes(model)
    constant_nodes = {n.name for n in model.graph.node
                      if n.name not in dependent and n.op_type not in ("Shape", "Size")}
    # Where the sample reaches float16's range, the tensor's producer and readers stay float32.
    with tempfile.TemporaryDirectory() as tmp:
        fused_path = os.path.join(tmp, "fused.onnx")
        onnx.save(model, fused_path)
        large = large_tensors(fused_path, model, sample)
    overflow_nodes = {n.name for n in model.graph.node
                      if any(t in large for t in list(n.input) + list(n.output))}
    blocked = constant_nodes | overflow_nodes
    ops = list(DEFAULT_OP_BLOCK_LIST) + ["LayerNormalization"]
    half = convert_float_to_float16(model, keep_io_types=True, op_block_list=ops,
                                    node_block_list=sorted(blocked))
    # The converter casts a float16 tensor back once per float32 reader, writing the same Cast
    # (same name, input and output) each time, which ONNX Runtime refuses: one of each is kept.
    seen, unique = set(), []
    for node in half.graph.node:
        key = node.SerializeToString(deterministic=True)
        if key not in seen:
            seen.add(key)
            unique.append(node)
    repeated = len(half.graph.node) - len(unique)
    del half.graph.node[:]
    half.graph.node.extend(topological(unique, half.graph))
    redirected = skip_round_trips(half.graph)
    onnx.checker.check_model(half)
    onnx.save(half, dst)
    peak = max(large.values(), default=0.0)
    if large:
        say("fp16: largest on the sample: " + ", ".join(
            f"{name} {value:.4g}" for name, value in sorted(large.items(), key=lambda kv: -kv[1])[:6]))
    say(f"fp16: {repeated} repeated Casts of the converter dropped, {redirected} float32 reads of float32 "
        f"tensors made direct; {fused} LayerNorms fused ({count_ops(model).get('LayerNormalization', 0)} in all, kept "
        f"float32); {len(constant_nodes)} nodes computed from constants and shapes kept float32; "
        f"{len(large)} tensors reach {FP16_SAFE:g} on the sample"
        + (f" (largest {peak:.4g}): their {len(overflow_nodes)} nodes kept float32" if large else ""))
    return ("onnxruntime.transformers.float16.convert_float_to_float16 (inputs and outputs float32); "
            "LayerNorm fused (FusionLayerNormalization) and kept float32; float32 kept for what is "
            f"computed from constants and shapes, and where the sample ({'--sample' if sample else 'a pattern'}) "
            f"reaches {FP16_SAFE:g}")


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("precision", choices=["int8", "fp16"], help="int8 (CPUs) or fp16 (GPUs)")
    parser.add_argument("source", help="a model directory holding one pair or one video export's "
                        "four modules, or an encoder file")
    parser.add_argument("--out", required=True, help="the variant's directory (created)")
    parser.add_argument("--conv", action="store_true",
                        help="int8: quantise Conv weights too (ConvInteger), not only MatMul ones")
    parser.add_argument("--attention-scores", choices=["int8"],
                        help="int8, video exports: memory attention's attention scores in int8 as "
                        "well (faster on CPUs with VNNI; less close to the original where "
                        "attention is sharp: docs/performance.md)")
    parser.add_argument("--sample", help="fp16: an image (PNG/JPEG) to find the tensors that would "
                        "overflow float16 (default: a synthetic pattern)")
    args = parser.parse_args()

    encoder = find_encoder(args.source)
    if args.attention_scores and (args.precision != "int8" or not video_modules(
            os.path.dirname(encoder) or ".", os.path.basename(encoder))):
        raise SystemExit("--attention-scores int8 is for the int8 variant of a video export "
                         "(its memory attention)")
    os.makedirs(args.out, exist_ok=True)
    if os.path.samefile(os.path.dirname(os.path.abspath(encoder)), args.out):
        raise SystemExit("--out must be another directory than the source's")
    name = os.path.basename(encoder)
    dst = os.path.join(args.out, name)
    # Every module the variant is made of must be the original (a video variant may have left its
    # encoder as it was and changed memory attention and the memory encoder alone).
    folder = os.path.dirname(encoder) or "."
    video = video_modules(folder, name)
    originals = [video["memory_attention"], video["memory_encoder"]] if video else []
    for module in [encoder] + originals:
        probe = onnx.load(module, load_external_data=False)
        already = {p.key: p.value for p in probe.metadata_props}.get("sam2.precision")
        if already:
            raise SystemExit(f"{module} is already a {already} variant; make variants of the "
                             f"original")
    say(f"{args.precision} variant of {encoder} -> {dst}")
    converted = True
    try:
        if args.precision == "int8":
            tool = make_int8(encoder, dst, args.conv)
        else:
            tool = make_fp16(encoder, dst, args.sample)
    except NothingToQuantise as e:
        if not video:
            raise SystemExit(str(e))
        # Still worth making for the other modules' feed-forward layers (and memory attention's
        # int8 scores); if they have nothing either, the variant is refused below.
        say(f"{e}: the image encoder is copied as it is")
        shutil.copyfile(encoder, dst)
        converted = False
    if converted:
        write_metadata(dst, {
            "sam2.precision": args.precision,
            "sam2.precision.source": f"{name} sha256:{sha256(encoder)}",
            "sam2.precision.tool": tool,
        })
    # int8, video exports: the feed-forward layers of memory attention and the memory encoder
    # (the Linear → activation → Linear pairs; their attention projections stay float32).
    feed_forward = originals if args.precision == "int8" else []
    any_module_converted = False
    for partner in partner_files(encoder):
        base = os.path.basename(partner)
        out = os.path.join(args.out, base)
        scores = bool(args.attention_scores) and partner == video["memory_attention"]
        tool = make_int8_feed_forward(partner, out) if partner in feed_forward else None
        any_module_converted = any_module_converted or tool is not None or scores
        if tool is None:
            shutil.copyfile(partner, out)
        if tool or scores:
            write_metadata(out, {
                "sam2.precision": "int8",
                "sam2.precision.source": f"{base} sha256:{sha256(partner)}",
                "sam2.precision.tool": "; ".join(
                    t for t in (tool, INT8_ATTENTION_TOOL if scores else None) if t),
                **({"sam2.attention_scores": "int8"} if scores else {}),
            })
        if scores:
            say(f"{base}: marked for int8 attention scores")
        if tool is None:
            say(f"copied {base} as it is" + (", its weights as they are" if scores else ""))
    if not converted and not any_module_converted:
        raise SystemExit(f"{args.source}: no module has weights to quantise, so an int8 variant "
                         "would compute exactly what the export does")
    size = lambda p: os.path.getsize(p) / 1e6
    if converted:
        say(f"{name}: {size(encoder):.1f} MB -> {size(dst):.1f} MB")
    print(json.dumps({"precision": args.precision, "encoder": dst, "source": encoder,
                      "encoder_converted": converted}))


if __name__ == "__main__":
    main()
