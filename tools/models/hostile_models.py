#!/usr/bin/env python3
"""Write the hostile model files of the tests, once, with cases.tsv listing them.

    python tools/models/hostile_models.py --models "$SAM2_REAL_MODELS" --generated "$SAM2_MODELS" --out DIR

tools/setup/setup-real.sh runs it into $SAM2_REAL_MODELS/hostile-<hash>/ (the hash of this file, of the
export and of the generated tiny_a encoder) and exports that folder as SAM2_REAL_HOSTILE; the Rust
test tests/it/hostile_models.rs and the C sweep tests/c/test_bad_input.c load what it lists. The files
are copies of the real SAM2.1 hiera-tiny exports (samexporter's pair, and ONNX Runtime's
single-mask pair) and of the generated tiny_a encoder:

  truncated/  cut in the header, in the middle of the node list, in the middle of the largest
              weight, and just before the end (inside the trailing opset imports);
  flipped/    one bit flipped at seeded places in the nodes, the weights and the tail, and at four
              fixed places of the decoder (the start of the graph, the node list's middle, the
              largest weight, the tail);
  external/<role>/a/b/
              the largest initializer's data moved to external data at ../../etc/passwd, at the
              absolute path of external/<role>/etc/passwd, through weights.bin (a link in a/b to
              ../../etc/passwd), at /etc/passwd, and at the Windows counterparts (for the C sweep
              under Wine); external/<role>/etc/passwd holds exactly the bytes the model needs, so
              a load that read it would succeed. control.onnx keeps its data in a/b/inside.bin and
              must load;
  dims/       huge declared dimensions: the encoders' image input, the decoders' mask inputs, and
              initializers whose shape no longer matches their data, or overflows.

cases.tsv has one line per file: group, role (encoder or decoder), family (the export, whose
embedding a decoder runs on: samexporter, onnxruntime, or generated), expect (model_error: loading
fails naming the file; model_error_or_runs: that, or it loads and runs; loads), platform (any,
posix, windows: the external-data locations of one system), file (relative to DIR) and the case
in words. Deterministic: a second run writes the same bytes. The edits go through the `onnx`
package; where the parts of a file lie (for the cuts and the flips) is read from its protobuf
fields below. tools/models/hostile_seeds.py makes the fuzz seeds from a cut-down decoder with the same
edits.
"""

import argparse
import json
import os

import onnx
from onnx import TensorProto

# ---------------------------------------------------------------------------------------------
# Where the parts of an ONNX file lie (it is protobuf): read only, for the cuts and the flips
# ---------------------------------------------------------------------------------------------

MODEL_GRAPH, GRAPH_NODE, GRAPH_INITIALIZER = 7, 1, 5
TENSOR_NAME, TENSOR_RAW_DATA = 8, 9


def _varint(buf, pos):
    value = shift = 0
    while True:
        byte = buf[pos]
        pos += 1
        value |= (byte & 0x7F) << shift
        if byte < 0x80:
            return value, pos
        shift += 7


def fields(buf, start, end):
    """(number, wire type, start of the tag, (start, end) of the content, end) of each field of
    the message buf[start:end] (well-formed input: these are real exports)."""
    pos = start
    while pos < end:
        field_start = pos
        tag, pos = _varint(buf, pos)
        number, wire = tag >> 3, tag & 7
        if wire == 0:
            content = (pos, _varint(buf, pos)[1])
        elif wire == 1:
            content = (pos, pos + 8)
        elif wire == 2:
            length, pos = _varint(buf, pos)
            content = (pos, pos + length)
        elif wire == 5:
            content = (pos, pos + 4)
        else:
            raise ValueError(f"wire type {wire} at byte {field_start}")
        pos = content[1]
        assert pos <= end, f"field at byte {field_start} runs past its message"
        yield number, wire, field_start, content, pos


class Layout:
    """The graph's content, its nodes' contents (the first node's tag too), and per initializer
    with raw data: its index among the graph's initializers, its name and its raw data's range."""

    def __init__(self, data: bytes):
        self.graph = next(c for n, w, _, c, _ in fields(data, 0, len(data))
                          if n == MODEL_GRAPH and w == 2)
        self.nodes, self.weights, self.first_node_tag = [], [], None
        index = 0
        for number, wire, start, content, _ in fields(data, *self.graph):
            if wire != 2:
                continue
            if number == GRAPH_NODE:
                if self.first_node_tag is None:
                    self.first_node_tag = start
                self.nodes.append(content)
            elif number == GRAPH_INITIALIZER:
                name, raw = "", None
                for n, _, _, c, _ in fields(data, *content):
                    if n == TENSOR_NAME:
                        name = data[c[0]:c[1]].decode("utf-8", "replace")
                    elif n == TENSOR_RAW_DATA and raw is None:
                        raw = c
                if raw is not None:
                    self.weights.append((index, name, raw))
                index += 1

    def largest(self):
        """(index, name, raw range) of the (first) initializer with the most raw data."""
        return max(self.weights, key=lambda w: w[2][1] - w[2][0])


# ---------------------------------------------------------------------------------------------
# The edits (also tools/models/hostile_seeds.py's)
# ---------------------------------------------------------------------------------------------

def largest(model: onnx.ModelProto) -> int:
    """The index of the (first) initializer with the most raw data."""
    sizes = [len(t.raw_data) for t in model.graph.initializer]
    return sizes.index(max(sizes))


def external(model: onnx.ModelProto, location: str, index=None) -> bytes:
    """The model with initializer `index` (the largest)'s data moved to external data at
    `location` (offset 0, its length), as an exporter writes a model too large for one protobuf."""
    m = onnx.ModelProto()
    m.CopyFrom(model)
    t = m.graph.initializer[largest(m) if index is None else index]
    length = len(t.raw_data)
    t.ClearField("raw_data")
    for key, value in (("location", location), ("offset", "0"), ("length", str(length))):
        entry = t.external_data.add()
        entry.key, entry.value = key, value
    t.data_location = TensorProto.EXTERNAL
    return m.SerializeToString()


def declared_dims(model: onnx.ModelProto, changes) -> bytes:
    """The model with dimensions of graph inputs or outputs declared anew: `changes` lists
    ("input" or "output", name, {dimension: a number, or a symbol (any size)})."""
    m = onnx.ModelProto()
    m.CopyFrom(model)
    for which, name, sides in changes:
        values = m.graph.input if which == "input" else m.graph.output
        value = next(v for v in values if v.name == name)
        dims = value.type.tensor_type.shape.dim
        for k, side in sides.items():
            dims[k].Clear()
            if isinstance(side, str):
                dims[k].dim_param = side
            else:
                dims[k].dim_value = side
    return m.SerializeToString()


def input_dim(model: onnx.ModelProto, name: str, sides) -> bytes:
    """The model with dimensions of graph input `name` declared as `sides` ({dimension: value})."""
    return declared_dims(model, [("input", name, sides)])


def initializer_dims(model: onnx.ModelProto, dims, index=None) -> bytes:
    """The model with initializer `index` (the largest) declaring the shape `dims`, its data
    unchanged."""
    m = onnx.ModelProto()
    m.CopyFrom(model)
    t = m.graph.initializer[largest(m) if index is None else index]
    del t.dims[:]
    t.dims.extend(dims)
    return m.SerializeToString()


class Rng:
    """Deterministic pseudo-random numbers (xorshift64*)."""

    MASK = (1 << 64) - 1

    def __init__(self, seed: int):
        self.state = seed

    def below(self, n: int) -> int:
        s = self.state
        s ^= s >> 12
        s ^= (s << 25) & self.MASK
        s ^= s >> 27
        self.state = s
        return ((s * 0x2545F4914F6CDD1D) & self.MASK) % n


# ---------------------------------------------------------------------------------------------
# The cases
# ---------------------------------------------------------------------------------------------

class Out:
    def __init__(self, root: str):
        self.root = root
        self.rows = []

    def write(self, group, role, family, expect, rel, data, case, platform="any"):
        path = os.path.join(self.root, rel)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "wb") as f:
            f.write(data)
        assert "\t" not in case and "\n" not in case
        self.rows.append((group, role, family, expect, platform, rel, case))

    def finish(self):
        with open(os.path.join(self.root, "cases.tsv"), "w") as f:
            f.write("group\trole\tfamily\texpect\tplatform\tfile\tcase\n")
            for row in self.rows:
                f.write("\t".join(row) + "\n")
        groups = {}
        for row in self.rows:
            groups[row[0]] = groups.get(row[0], 0) + 1
        say(f"{len(self.rows)} files in {self.root}: "
            + ", ".join(f"{n} {g}" for g, n in groups.items()))


def say(text: str) -> None:
    print(f"[hostile] {text}", flush=True)


def truncated(out: Out, role: str, data: bytes, layout: Layout) -> None:
    middle = layout.nodes[len(layout.nodes) // 2]
    _, name, raw = layout.largest()
    cuts = [("header", 16), ("mid-graph", (middle[0] + middle[1]) // 2),
            ("mid-initializer", (raw[0] + raw[1]) // 2), ("end", len(data) - 3)]
    assert layout.graph[0] < cuts[1][1] < raw[0], "the nodes precede the weights in this export"
    for what, at in cuts:
        out.write("truncated", role, "samexporter", "model_error", f"truncated/{role}-{what}.onnx",
                  data[:at], f"{role} cut at byte {at} of {len(data)} ({what}, {name})")


def flipped(out: Out, role: str, data: bytes, layout: Layout, per_zone: int, seed: int,
            fixed: bool) -> None:
    nodes = (layout.nodes[0][0], layout.nodes[-1][1])
    weights = (layout.weights[0][2][0], layout.weights[-1][2][1])
    rng = Rng(seed)
    flips = []
    for zone, (start, end) in [("nodes", nodes), ("weights", weights), ("tail", (weights[1], len(data)))]:
        for _ in range(per_zone):
            at = start + rng.below(end - start)
            flips.append((zone, at, rng.below(8)))
    if fixed:
        # The start of the graph, the node list's middle, a byte of the largest weight, the tail.
        middle = layout.first_node_tag + (nodes[1] - layout.first_node_tag) // 2
        raw = layout.largest()[2]
        places = [("graph start + 4096", layout.graph[0] + 4096), ("node list middle", middle),
                  ("largest weight", raw[0] + 1001), ("tail", len(data) - 200)]
        flips += [(zone, at, i * 3 % 8) for i, (zone, at) in enumerate(places)]
    seen = set()
    for zone, at, bit in flips:
        if (at, bit) in seen:
            continue
        seen.add((at, bit))
        copy = bytearray(data)
        copy[at] ^= 1 << bit
        out.write("flipped", role, "samexporter", "model_error_or_runs",
                  f"flipped/{role}-flip-{at}-{bit}.onnx", bytes(copy),
                  f"{role} bit {bit} of byte {at} ({zone})")


def external_data(out: Out, role: str, data: bytes, model: onnx.ModelProto, layout: Layout,
                  windows: bool) -> None:
    index, name, raw = layout.largest()
    assert index == largest(model)
    base = f"external/{role}"
    models_dir = os.path.join(out.root, base, "a", "b")
    outside = os.path.join(out.root, base, "etc")
    os.makedirs(models_dir, exist_ok=True)
    os.makedirs(outside, exist_ok=True)
    bait = os.path.abspath(os.path.join(outside, "passwd"))
    with open(bait, "wb") as f:
        f.write(data[raw[0]:raw[1]])
    link = os.path.join(models_dir, "weights.bin")
    if os.path.lexists(link):
        os.remove(link)
    os.symlink("../../etc/passwd", link)
    locations = [("up-etc-passwd", "../../etc/passwd", "posix"),
                 ("absolute", bait, "posix"),
                 ("link-outside", "weights.bin", "posix"),
                 ("etc-passwd", "/etc/passwd", "posix")]
    if windows:
        locations += [("win-up-etc-passwd", "..\\..\\etc\\passwd", "windows"),
                      ("win-absolute", "Z:" + bait.replace("/", "\\"), "windows"),
                      ("win-ini", "C:\\Windows\\win.ini", "windows")]
    for what, location, platform in locations:
        out.write("external", role, "samexporter", "model_error", f"{base}/a/b/{role}-{what}.onnx",
                  external(model, location, index),
                  f"{role}: initializer {name} in external data at {location}", platform)
    if role == "decoder":
        # The control: the same model with its external data inside its directory loads.
        with open(os.path.join(models_dir, "inside.bin"), "wb") as f:
            f.write(data[raw[0]:raw[1]])
        out.write("external", role, "samexporter", "loads", f"{base}/a/b/control.onnx",
                  external(model, "inside.bin", index),
                  f"{role}: initializer {name} in external data at inside.bin (the control)",
                  "posix")


def dims(out: Out, real: dict, tiny_a: str) -> None:
    """Huge declared dimensions: the encoder's image input (the library takes its input size from
    it), the decoders' mask inputs (the library takes the low-resolution mask size from them), and
    an initializer whose shape no longer matches its data, or overflows."""
    def write(family, role, stem, data, case):
        out.write("dims", role, family, "model_error", f"dims/{stem}.onnx", data, case)

    # ONNX Runtime's shape inference refuses a huge image in samexporter's encoder; the generated
    # tiny encoder's graph takes any size, so only the library's own check stops it.
    for family, path, sides in [("samexporter", real["samexporter"][0], [65536]),
                                ("onnxruntime", real["onnxruntime"][0], [1 << 40]),
                                ("generated", tiny_a, [65536, 1 << 40])]:
        model = onnx.load(path)
        file = os.path.basename(path)
        for side in sides:
            write(family, "encoder", f"{family}-encoder-image-{side}",
                  input_dim(model, "image", {2: side, 3: side}),
                  f"{file} input image [1,3,{side},{side}]")
    # An encoder whose outputs are declared of any size does not stop it at the output check.
    model = onnx.load(tiny_a)
    outputs = [("output", o, {2: "side", 3: "side"})
               for o in ("high_res_feats_0", "high_res_feats_1", "image_embed")]
    write("generated", "encoder", "generated-encoder-image-65536-outputs-any-size",
          declared_dims(model, [("input", "image", {2: 65536, 3: 65536})] + outputs),
          f"{os.path.basename(tiny_a)} input image [1,3,65536,65536], outputs of any size")
    model = onnx.load(real["samexporter"][0])
    name = model.graph.initializer[largest(model)].name
    write("samexporter", "encoder", "samexporter-encoder-initializer-overflow",
          initializer_dims(model, [1 << 31, 1 << 31, 4]),
          f"encoder initializer {name} declared [2^31, 2^31, 4]")
    for family, mask_input in [("samexporter", "mask_input"), ("onnxruntime", "input_masks")]:
        path = real[family][1]
        model = onnx.load(path)
        for side in [65536, 1 << 20, 1 << 40]:
            write(family, "decoder", f"{family}-decoder-{mask_input}-{side}",
                  input_dim(model, mask_input, {2: side, 3: side}),
                  f"{os.path.basename(path)} input {mask_input} [L,1,{side},{side}]")
    model = onnx.load(real["samexporter"][1])
    name = model.graph.initializer[largest(model)].name
    for stem, shape in [("overflow", [1 << 40, 1 << 30]), ("too-large", [(1 << 63) - 1, 3])]:
        write("samexporter", "decoder", f"samexporter-decoder-initializer-{stem}",
              initializer_dims(model, shape), f"decoder initializer {name} declared {shape}")


def real_pairs(models: str) -> dict:
    """family -> (encoder, decoder): the SAM2.1 hiera-tiny pairs the tests use (tests/common's
    real_pair: samexporter's, and ONNX Runtime's with the single-mask decoder)."""
    manifest = json.load(open(os.path.join(models, "manifest.json")))
    pairs = {}
    for family in ("samexporter", "onnxruntime"):
        p = next(p for p in manifest["pairs"]
                 if p["model"] == "sam2.1_hiera_tiny" and p["family"] == family
                 and (family == "samexporter" or not p["multimask_decoder"]))
        pairs[family] = (os.path.join(models, p["encoder"]), os.path.join(models, p["decoder"]))
    return pairs


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", required=True, help="$SAM2_REAL_MODELS (tools/setup/setup-real.sh)")
    ap.add_argument("--generated", required=True, help="$SAM2_MODELS (tools/setup/setup.sh)")
    ap.add_argument("--out", required=True)
    args = ap.parse_args()
    real = real_pairs(args.models)
    out = Out(os.path.abspath(args.out))
    # The decoder (16 MB) gets more flips than the encoder (109 MB), and the fixed ones.
    for role, path, per_zone, seed in [("decoder", real["samexporter"][1], 2, 0x5EED0001),
                                       ("encoder", real["samexporter"][0], 1, 0x5EED0002)]:
        say(f"{role}: {os.path.basename(path)}")
        data = open(path, "rb").read()
        layout = Layout(data)
        truncated(out, role, data, layout)
        flipped(out, role, data, layout, per_zone, seed, fixed=role == "decoder")
        external_data(out, role, data, onnx.load(path), layout, windows=role == "decoder")
    say("huge declared dimensions")
    dims(out, real, os.path.join(args.generated, "tiny_a_encoder.onnx"))
    out.finish()


if __name__ == "__main__":
    main()
