#!/usr/bin/env python3
"""Generate synthetic SAM2 ONNX model pairs that honour the real export contracts.

    python tools/models/gen_models.py --out models [--tiny-only]

No real SAM2 weights are available where this project is built, so we generate
encoder/decoder pairs with exactly the input/output names, dtypes, shapes and
dynamic axes of the common SAM2 exporters, and with behaviour that is meaningful
enough for tests to assert real geometry:

  contract A  samexporter / X-AnyLabeling   (decoder: low-res logits)
  contract B  ibaiGorordo ONNX-SAM2         (decoder: + orig_im_size, masks upsampled in-graph)
  contract C  ONNX Runtime's own SAM2 export (other names, int32 labels, bool masks,
                                             + low_res_masks)

Pairs written (all weights inline, opset 17, IR version 8):
  tiny_a, tiny_b, tiny_c   fp32, cheap, "segment what looks like the clicked colour"
  tiny_a_fp16              tiny_a with a float16 `image` input (cast to f32 in-graph)
  bench_a                  contract A with compute/weights of the order of SAM2-tiny
                           (encoder ~100 MB of fp32 weights); behaves like tiny_a
Also faulty_a_encoder.onnx: tiny_a's encoder whose runs fail on an almost white image.
The four modules of a tiny video tracker, built on this file's tiny encoder and decoder, are
tools/models/gen_track_models.py's (it imports this file; this file imports nothing of it).

Everything is seeded: two runs write byte-identical files. models/manifest.json
lists the pairs: [{name, contract, encoder, decoder, image_dtype, kind}].

I/O as produced (L = "num_labels", N = "num_points" are dynamic; all else fixed):
  encoder, every contract: image f32[1,3,1024,1024] (f16 for tiny_a_fp16)
    A/B -> high_res_feats_0 f32[1,32,256,256], high_res_feats_1 f32[1,64,128,128],
           image_embed f32[1,256,64,64]
    C   -> image_features_0, image_features_1, image_embeddings (same shapes, same order)
  decoder A: image_embed, high_res_feats_0, high_res_feats_1, point_coords f32[L,N,2],
             point_labels f32[L,N], mask_input f32[L,1,256,256], has_mask_input f32[L]
             -> masks f32[L,3,256,256] (logits in [-32,32]), iou_predictions f32[L,3]
  decoder B: A's inputs + orig_im_size int32[2] (H, W)
             -> masks f32[L,3,orig_im_height,orig_im_width] (logits, bilinear
                pytorch_half_pixel Resize in-graph), iou_predictions f32[L,3]
  decoder C: image_features_0, image_features_1, image_embeddings, point_coords f32[L,N,2],
             point_labels int32[L,N], input_masks f32[L,1,256,256], has_input_masks f32[L],
             original_image_size int32[2]
             -> masks bool[L,3,original_image_height,original_image_width] (upsampled > 0),
                iou_predictions f32[L,3], low_res_masks f32[L,3,256,256] (in [-32,32])
  has_mask_input / has_input_masks may also be given as [1] (broadcast), as the
  samexporter and ibaiGorordo clients do.

Tiny encoder: high_res_feats_0 = 1x1 conv (3->32) of the 4x4-average-pooled
normalised image; high_res_feats_1 = 1x1 conv (3->64) of a further 2x2 pooling;
image_embed = 1x1 conv (3->256) of the 16x16 pooling. Each conv matrix is a
scaled random matrix with orthonormal columns, so the colour is recoverable and
feature distances are colour distances.

Tiny decoder (all in ONNX ops), per object l independently:
  * G = colour estimate on the 256x256 grid, recovered from all three feature
    maps (0.80 * level 0 + 0.15 * level 1 upsampled + 0.05 * embedding upsampled);
  * the real exporters' point convention: coords + 0.5, a padding point (0,0)
    label -1 appended in-graph; a box is the points labelled 2 (top-left) and 3
    (bottom-right); its centre is added as an implicit positive point;
  * d_n(p) = |G(p) - G(point n)| (GridSample), D_n(p) = d_n(p) + GAMMA * (|p - point n| / 1024)^2;
  * pos = min over positive points of d_n, Dpos/Dneg = min over positive/negative points of D_n;
  * logit_k = SCALE * min(TAU_k - pos, Dneg - Dpos) for TAU = (tight, medium, loose);
  * + has_mask_input * mask_input; capped by BOX_SLOPE * (signed distance inside the box)
    when there is a box; clipped to [-32, 32] (as the real exports clamp);
  * iou_predictions_k = PRIOR_k * (#{logit_k > 1} + 0.5) / (#{logit_k > -1} + 1)
    (a stability score in (0, 1): ~1 for a clean mask, 0.5 for an empty one; the
    medium candidate has the highest prior, so it wins unless it is unstable).
"""

import argparse
import hashlib
import json
import os
import sys
import time

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

OPSET = 17
IR_VERSION = 8  # what torch.onnx emits for opset 17; accepted by onnxruntime >= 1.14

# Tiny decoder constants (see module docstring).
BLEND = (0.80, 0.15, 0.05)        # level 0, level 1, embedding
TAUS = (0.40, 0.90, 1.50)         # colour-distance thresholds (ImageNet-normalised RGB units)
SCALE = 6.0                       # logit units per colour-distance unit
GAMMA = 8.0                       # spatial weight in D_n
BIG = 1.0e4                       # "no such point"
MASK_ALPHA = 1.0                  # weight of mask_input
BOX_SLOPE = 1.5                   # logit per low-res pixel inside the box
STAB_DELTA = 1.0                  # stability-score threshold offset
PRIORS = (0.80, 0.93, 0.72)       # tight, medium, loose
LOGIT_CLAMP = 32.0

FEAT_SCALES = (1.0, 1.0, 1.0)     # norm of each feature-projection column


# ---------------------------------------------------------------------------
# A small graph builder on top of onnx.helper
# ---------------------------------------------------------------------------

class Graph:
    def __init__(self, name):
        self.name = name
        self.nodes = []
        self.inits = []
        self.inputs = []
        self.outputs = []
        self._n = 0
        self._consts = {}

    def _name(self, hint):
        self._n += 1
        return "%s_%d" % (hint, self._n)

    def input(self, name, elem, shape):
        self.inputs.append(helper.make_tensor_value_info(name, elem, shape))
        return name

    def output(self, name, elem, shape):
        self.outputs.append(helper.make_tensor_value_info(name, elem, shape))

    def init(self, hint, array):
        name = self._name(hint)
        self.inits.append(numpy_helper.from_array(np.ascontiguousarray(array), name))
        return name

    def const(self, value, dtype=np.float32):
        arr = np.asarray(value, dtype=dtype)
        key = (arr.dtype.str, arr.shape, arr.tobytes())
        if key not in self._consts:
            self._consts[key] = self.init("c", arr)
        return self._consts[key]

    def op(self, op_type, inputs, hint=None, outputs=1, name_out=None, **attrs):
        if name_out is not None:
            outs = [name_out]
        else:
            outs = [self._name(hint or op_type.lower()) for _ in range(outputs)]
        self.nodes.append(helper.make_node(op_type, list(inputs), outs, name=self._name("n_" + op_type), **attrs))
        return outs[0] if outputs == 1 else outs

    # shorthands
    def add(self, a, b, **kw): return self.op("Add", [a, b], **kw)
    def sub(self, a, b, **kw): return self.op("Sub", [a, b], **kw)
    def mul(self, a, b, **kw): return self.op("Mul", [a, b], **kw)
    def div(self, a, b, **kw): return self.op("Div", [a, b], **kw)
    def min(self, *xs, **kw): return self.op("Min", list(xs), **kw)
    def max(self, *xs, **kw): return self.op("Max", list(xs), **kw)
    def reshape(self, x, shape, **kw): return self.op("Reshape", [x, self.const(shape, np.int64)], **kw)
    def unsqueeze(self, x, axes, **kw): return self.op("Unsqueeze", [x, self.const(axes, np.int64)], **kw)
    def squeeze(self, x, axes, **kw): return self.op("Squeeze", [x, self.const(axes, np.int64)], **kw)
    def cast(self, x, to, **kw): return self.op("Cast", [x], to=to, **kw)

    def slice(self, x, starts, ends, axes, **kw):
        return self.op("Slice", [x, self.const(starts, np.int64), self.const(ends, np.int64),
                                 self.const(axes, np.int64)], **kw)

    def reduce_sum(self, x, axes, keepdims, **kw):
        return self.op("ReduceSum", [x, self.const(axes, np.int64)], keepdims=keepdims, **kw)

    def reduce_min(self, x, axes, keepdims, **kw):  # opset 17: axes is an attribute
        return self.op("ReduceMin", [x], axes=axes, keepdims=keepdims, **kw)

    def conv1x1(self, x, weight, bias, **kw):
        w = self.init("conv_w", weight.astype(np.float32)[:, :, None, None])
        b = self.init("conv_b", bias.astype(np.float32))
        return self.op("Conv", [x, w, b], kernel_shape=[1, 1], **kw)

    def upsample(self, x, factor, **kw):
        scales = self.const([1.0, 1.0, float(factor), float(factor)])
        return self.op("Resize", [x, "", scales], mode="linear",
                       coordinate_transformation_mode="pytorch_half_pixel", **kw)

    def linear(self, x, w, b=None, **kw):
        y = self.op("MatMul", [x, self.init("w", w.astype(np.float32))])
        if b is not None:
            y = self.add(y, self.init("b", b.astype(np.float32)), **kw)
        return y

    def gelu(self, x):
        # 0.5 * x * (1 + erf(x / sqrt(2)))  (Gelu is only an ONNX op from opset 20)
        e = self.op("Erf", [self.mul(x, self.const(1.0 / np.sqrt(2.0)))])
        return self.mul(self.mul(x, self.const(0.5)), self.add(e, self.const(1.0)))

    def model(self, doc, metadata):
        graph = helper.make_graph(self.nodes, self.name, self.inputs, self.outputs, self.inits)
        m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)],
                              producer_name="sam2-synthetic-testgen", producer_version="1")
        m.ir_version = IR_VERSION
        m.doc_string = doc
        for k, v in metadata.items():
            p = m.metadata_props.add()
            p.key, p.value = k, v
        onnx.checker.check_model(m, full_check=True)
        return m


# ---------------------------------------------------------------------------
# Fixed random weights
# ---------------------------------------------------------------------------

def orthonormal_columns(rng, rows, cols):
    a = rng.standard_normal((rows, cols))
    q, r = np.linalg.qr(a)
    q = q * np.sign(np.diag(r))[None, :]
    return q  # rows x cols, q.T @ q = I


class TinyWeights:
    """Encoder projections (colour -> features) shared by every tiny/bench pair."""

    def __init__(self, seed=1234):
        rng = np.random.default_rng(seed)
        self.q = [orthonormal_columns(rng, c, 3) for c in (32, 64, 256)]
        self.s = FEAT_SCALES
        self.b = [rng.normal(0.0, 0.05, size=c) for c in (32, 64, 256)]

    def enc(self, level):
        return self.s[level] * self.q[level], self.b[level]

    def dec(self, level, weight):
        """Conv mapping a feature map of `level` back to colour, times `weight`."""
        q, s, b = self.q[level], self.s[level], self.b[level]
        w = weight * q.T / s               # 3 x C
        return w, -(w @ b)


# ---------------------------------------------------------------------------
# Encoders
# ---------------------------------------------------------------------------

ENC_NAMES = {
    "A": ("high_res_feats_0", "high_res_feats_1", "image_embed"),
    "B": ("high_res_feats_0", "high_res_feats_1", "image_embed"),
    "C": ("image_features_0", "image_features_1", "image_embeddings"),
}
FEAT_SHAPES = ([1, 32, 256, 256], [1, 64, 128, 128], [1, 256, 64, 64])


def tiny_encoder_body(g, x, tw):
    """x: f32 [1,3,1024,1024] -> three feature maps (names returned)."""
    p0 = g.op("AveragePool", [x], kernel_shape=[4, 4], strides=[4, 4], hint="pool4")
    p1 = g.op("AveragePool", [p0], kernel_shape=[2, 2], strides=[2, 2], hint="pool8")
    p2 = g.op("AveragePool", [p0], kernel_shape=[4, 4], strides=[4, 4], hint="pool16")
    f0 = g.conv1x1(p0, *tw.enc(0))
    f1 = g.conv1x1(p1, *tw.enc(1))
    f2 = g.conv1x1(p2, *tw.enc(2))
    return f0, f1, f2


def bench_encoder_extra(g, x, seed=99):
    """A hierarchical (Hiera-like) trunk of the order of SAM2-tiny's image encoder:
    ~24M fp32 params (~96 MB), ~290 GFLOP.

      stage 1: 8x8 patch embedding -> 128x128 tokens of 384-d, 3 pre-norm MLP blocks
               (384 -> 1536 -> 384); high_res_feats_0/1 are projected from it
      merge:   2x2 space-to-depth + linear -> 64x64 tokens of 768-d
      stage 2: 4 pre-norm MLP blocks (768 -> 3072 -> 768); image_embed projected from it

    Returns three maps shaped like the encoder outputs (unit-scale activations)."""
    rng = np.random.default_rng(seed)

    def w(*shape, fan_in):
        return (rng.standard_normal(shape, dtype=np.float32) * np.float32(1.0 / np.sqrt(fan_in)))

    def mlp_blocks(t, dim, hidden, blocks):
        for _ in range(blocks):
            ln_s = g.init("ln_scale", np.ones(dim, np.float32) + w(dim, fan_in=1) * np.float32(0.02))
            ln_b = g.init("ln_bias", w(dim, fan_in=1) * np.float32(0.02))
            h = g.op("LayerNormalization", [t, ln_s, ln_b], axis=-1, epsilon=1e-6)
            h = g.gelu(g.linear(h, w(dim, hidden, fan_in=dim), w(hidden, fan_in=hidden)))
            t = g.add(t, g.linear(h, w(hidden, dim, fan_in=hidden), w(dim, fan_in=dim)))
        ln_s = g.init("ln_scale", np.ones(dim, np.float32))
        ln_b = g.init("ln_bias", w(dim, fan_in=1) * np.float32(0.02))
        return g.op("LayerNormalization", [t, ln_s, ln_b], axis=-1, epsilon=1e-6)

    def to_tokens(m, dim, n):        # [1,dim,n,n] -> [1,n*n,dim]
        return g.op("Transpose", [g.reshape(m, [1, dim, n * n])], perm=[0, 2, 1])

    def to_map(t, dim, n):           # [1,n*n,dim] -> [1,dim,n,n]
        return g.reshape(g.op("Transpose", [t], perm=[0, 2, 1]), [1, dim, n, n])

    d1, d2 = 384, 768
    # stage 1 at 128x128
    pw = g.init("patch_w", w(d1, 3, 8, 8, fan_in=3 * 8 * 8))
    pb = g.init("patch_b", w(d1, fan_in=d1))
    m = g.op("Conv", [x, pw, pb], kernel_shape=[8, 8], strides=[8, 8])          # [1,384,128,128]
    m = g.add(g.add(m, g.init("pos_rows", w(1, d1, 128, 1, fan_in=1) * np.float32(0.02))),
              g.init("pos_cols", w(1, d1, 1, 128, fan_in=1) * np.float32(0.02)))
    t1 = mlp_blocks(to_tokens(m, d1, 128), d1, 4 * d1, 3)
    m1 = to_map(t1, d1, 128)                                                      # [1,384,128,128]
    hf0 = g.op("DepthToSpace", [g.conv1x1(m1, w(32 * 4, d1, fan_in=d1), w(32 * 4, fan_in=d1))],
               blocksize=2, mode="DCR")                                           # [1,32,256,256]
    hf1 = g.conv1x1(m1, w(64, d1, fan_in=d1), w(64, fan_in=d1))                   # [1,64,128,128]
    # merge to 64x64
    m2 = g.op("SpaceToDepth", [m1], blocksize=2)                                  # [1,1536,64,64]
    m2 = g.conv1x1(m2, w(d2, 4 * d1, fan_in=4 * d1), w(d2, fan_in=d2))           # [1,768,64,64]
    t2 = mlp_blocks(to_tokens(m2, d2, 64), d2, 4 * d2, 4)
    emb = g.conv1x1(to_map(t2, d2, 64), w(256, d2, fan_in=d2), w(256, fan_in=d2))  # [1,256,64,64]
    return [hf0, hf1, emb]


def build_encoder(contract, tw, fp16=False, bench=False):
    g = Graph("sam2_image_encoder")
    if fp16:
        img = g.input("image", TensorProto.FLOAT16, [1, 3, 1024, 1024])
        x = g.cast(img, TensorProto.FLOAT, hint="image_f32")
    else:
        x = g.input("image", TensorProto.FLOAT, [1, 3, 1024, 1024])
    feats = tiny_encoder_body(g, x, tw)
    names = ENC_NAMES[contract]
    if bench:
        extra = bench_encoder_extra(g, x)
        eps = g.const(0.005)
        feats = [g.add(f, g.mul(e, eps)) for f, e in zip(feats, extra)]
    for f, name, shape in zip(feats, names, FEAT_SHAPES):
        g.op("Identity", [f], name_out=name)
        g.output(name, TensorProto.FLOAT, shape)
    kind = "bench" if bench else "tiny"
    doc = ("Synthetic SAM2 image encoder (%s, contract %s). Input: normalised RGB image, "
           "1024x1024 stretched, ImageNet mean/std, NCHW%s." % (kind, contract, ", float16" if fp16 else ""))
    return g.model(doc, {"sam2.synthetic": kind, "sam2.contract": contract})


def build_faulty_encoder(tw):
    """tiny_a's encoder, except that a run on an almost white image fails inside ONNX Runtime
    (a Reshape to a shape computed from the pixels), as a real model fails at run time (out of
    memory, say): the background-encoding tests need an encode that fails after it started."""
    g = Graph("sam2_image_encoder")
    x = g.input("image", TensorProto.FLOAT, [1, 3, 1024, 1024])
    f0, f1, f2 = tiny_encoder_body(g, x, tw)
    # k = 5 when every normalised value exceeds 1.5 (white: >= 2.25), else 2; six elements
    # reshape to [-1, 2] but not to [-1, 5].
    bright = g.cast(g.op("Greater", [g.op("ReduceMin", [x], keepdims=0), g.const(1.5)]),
                    TensorProto.INT64, hint="bright")
    k = g.op("Add", [g.op("Mul", [bright, g.const(3, np.int64)]), g.const(2, np.int64)])
    shape = g.op("Concat", [g.const([-1], np.int64), g.reshape(k, [1])],
                 axis=0)
    probe = g.op("Reshape", [g.const(np.ones(6, np.float32)), shape], hint="probe")
    zero = g.mul(g.op("ReduceSum", [probe], keepdims=0), g.const(0.0))
    feats = (f0, f1, g.add(f2, zero))
    for f, name, shape_ in zip(feats, ENC_NAMES["A"], FEAT_SHAPES):
        g.op("Identity", [f], name_out=name)
        g.output(name, TensorProto.FLOAT, shape_)
    doc = "Synthetic SAM2 image encoder (contract A) whose runs fail on an almost white image."
    return g.model(doc, {"sam2.synthetic": "faulty", "sam2.contract": "A"})


# ---------------------------------------------------------------------------
# Decoders
# ---------------------------------------------------------------------------

def lowres_grid_consts():
    """Centres of the 256x256 low-res pixels in the 1024 frame, flattened row-major."""
    c = (np.arange(256, dtype=np.float32) + np.float32(0.5)) * np.float32(4.0)
    xs = np.tile(c, 256)
    ys = np.repeat(c, 256)
    return xs, ys


def tiny_colour(g, f0, f1, f2, tw):
    """Colour estimate G [1,3,256,256] from all three feature levels."""
    c0 = g.conv1x1(f0, *tw.dec(0, BLEND[0]))
    c1 = g.upsample(g.conv1x1(f1, *tw.dec(1, BLEND[1])), 2)
    c2 = g.upsample(g.conv1x1(f2, *tw.dec(2, BLEND[2])), 4)
    return g.add(g.add(c0, c1), c2, hint="colour")


def tiny_decoder_core(g, f0, f1, f2, coords, labels_f, mask_in, has_mask, tw, bench=False, colour=None):
    """Returns (low-res logits [L,3,256,256] clipped, iou_predictions [L,3]).
    colour: G when the caller already computed it with tiny_colour (the tracking decoder)."""
    G = tiny_colour(g, f0, f1, f2, tw) if colour is None else colour

    # --- prompt points -------------------------------------------------------------
    pc = g.add(coords, g.const(0.5), hint="coords_centre")                     # [L,N,2]
    L1 = g.slice(g.op("Shape", [coords]), [0], [1], [0], hint="L")              # [1] int64
    pad_pt = g.op("ConstantOfShape", [g.op("Concat", [L1, g.const([1, 2], np.int64)], axis=0)],
                  value=helper.make_tensor("v", TensorProto.FLOAT, [1], [0.0]))  # [L,1,2]
    zeros_l1 = g.op("ConstantOfShape", [g.op("Concat", [L1, g.const([1], np.int64)], axis=0)],
                    value=helper.make_tensor("v", TensorProto.FLOAT, [1], [0.0]))  # [L,1]

    def is_label(v):
        return g.cast(g.op("Equal", [labels_f, g.const(float(v))]), TensorProto.FLOAT, hint="is%d" % v)

    is_tl, is_br = is_label(2), is_label(3)                                     # [L,N]

    def corner(is_c):
        cnt = g.reduce_sum(is_c, [1], 1)                                        # [L,1]
        s = g.reduce_sum(g.mul(pc, g.unsqueeze(is_c, [2])), [1], 1)             # [L,1,2]
        return cnt, g.div(s, g.unsqueeze(g.max(cnt, g.const(1.0)), [2]))

    cnt_tl, tl = corner(is_tl)
    cnt_br, br = corner(is_br)
    has_box = g.mul(g.min(cnt_tl, g.const(1.0)), g.min(cnt_br, g.const(1.0)), hint="has_box")  # [L,1]
    centre = g.mul(g.add(tl, br), g.const(0.5), hint="box_centre")              # [L,1,2]

    pts = g.op("Concat", [pc, pad_pt, centre], axis=1, hint="points")           # [L,N+2,2]
    is_pos = g.op("Concat", [is_label(1), zeros_l1, has_box], axis=1, hint="is_pos")   # [L,N+2]
    is_neg = g.op("Concat", [is_label(0), zeros_l1, zeros_l1], axis=1, hint="is_neg")

    # --- colour at each point (GridSample, align_corners=0 over the 1024 frame) ------
    grid = g.unsqueeze(g.sub(g.mul(pts, g.const(1.0 / 512.0)), g.const(1.0)), [0])   # [1,L,N+2,2]
    at = g.op("GridSample", [G, grid], mode="bilinear", padding_mode="border", align_corners=0)  # [1,3,L,N+2]
    at = g.op("Transpose", [g.squeeze(at, [0])], perm=[1, 2, 0])                # [L,N+2,3]
    at = g.unsqueeze(at, [3])                                                   # [L,N+2,3,1]
    Gf = g.reshape(G, [1, 1, 3, 65536])
    diff = g.sub(Gf, at)
    d = g.op("Sqrt", [g.reduce_sum(g.mul(diff, diff), [2], 0)], hint="dist")   # [L,N+2,P]

    xs, ys = lowres_grid_consts()
    X = g.const(xs)
    Y = g.const(ys)
    px = g.slice(pts, [0], [1], [2])                                            # [L,N+2,1]
    py = g.slice(pts, [1], [2], [2])
    dx = g.sub(X, px)
    dy = g.sub(Y, py)
    sd2 = g.mul(g.add(g.mul(dx, dx), g.mul(dy, dy)), g.const(GAMMA / (1024.0 * 1024.0)))
    D = g.add(d, sd2, hint="dist_spatial")

    def masked_min(v, sel):
        pen = g.unsqueeze(g.mul(g.sub(g.const(1.0), sel), g.const(BIG)), [2])  # [L,N+2,1]
        return g.reduce_min(g.add(v, pen), [1], 0)                              # [L,P]

    pos = masked_min(d, is_pos)
    dpos = masked_min(D, is_pos)
    dneg = masked_min(D, is_neg)
    sep = g.unsqueeze(g.sub(dneg, dpos), [1])                                   # [L,1,P]
    t = g.sub(g.const(np.asarray(TAUS, np.float32).reshape(1, 3, 1)), g.unsqueeze(pos, [1]))  # [L,3,P]
    lg = g.mul(g.min(t, sep), g.const(SCALE))
    lg = g.reshape(lg, [0, 3, 256, 256], hint="logits_prompt")                  # [L,3,256,256]

    # --- mask input ------------------------------------------------------------------
    hm = g.reshape(has_mask, [-1, 1, 1, 1])
    lg = g.add(lg, g.mul(g.mul(hm, g.const(MASK_ALPHA)), mask_in), hint="logits_mask")

    # --- box cap: nothing outside the box -------------------------------------------
    x1 = g.slice(tl, [0], [1], [2])                                             # [L,1,1]
    y1 = g.slice(tl, [1], [2], [2])
    x2 = g.slice(br, [0], [1], [2])
    y2 = g.slice(br, [1], [2], [2])
    inside = g.min(g.sub(X, x1), g.sub(x2, X), g.sub(Y, y1), g.sub(y2, Y))     # [L,1,P]
    no_box = g.unsqueeze(g.mul(g.sub(g.const(1.0), has_box), g.const(BIG)), [2])  # [L,1,1]
    cap = g.add(g.mul(inside, g.const(BOX_SLOPE / 4.0)), no_box)
    cap = g.reshape(cap, [0, 1, 256, 256])
    lg = g.min(lg, cap)

    if bench:
        # weight of each point in the bench-only pooling: real prompt points (label != -1),
        # the in-graph padding point, and the box centre when there is a box
        valid = g.cast(g.op("Not", [g.op("Equal", [labels_f, g.const(-1.0)])]), TensorProto.FLOAT)
        ones_l1 = g.add(zeros_l1, g.const(1.0))
        weights = g.op("Concat", [valid, ones_l1, has_box], axis=1, hint="point_weights")   # [L,N+2]
        lg, iou_scale = bench_decoder_extra(g, f0, f2, pts, weights, lg)

    lg = g.op("Clip", [lg, g.const(-LOGIT_CLAMP), g.const(LOGIT_CLAMP)], hint="low_res_logits")

    # --- iou predictions: prior * stability --------------------------------------------
    def count_above(v):
        return g.reduce_sum(g.cast(g.op("Greater", [lg, g.const(v)]), TensorProto.FLOAT), [2, 3], 0)

    stab = g.div(g.add(count_above(STAB_DELTA), g.const(0.5)), g.add(count_above(-STAB_DELTA), g.const(1.0)))
    iou = g.mul(stab, g.const(np.asarray(PRIORS, np.float32).reshape(1, 3)))
    if bench:
        iou = g.mul(iou, iou_scale)
    return lg, iou


def bench_decoder_extra(g, f0, f2, pts, weights, lg, seed=7):
    """Per-object compute of the order of SAM2's mask decoder (~4M params, a few GFLOP).

    Its contribution to the logits and scores is tiny (<= 0.01), so the bench pair
    behaves like the tiny pair."""
    rng = np.random.default_rng(seed)
    dim, hidden = 256, 768

    def w(*shape, fan_in):
        return rng.standard_normal(shape, dtype=np.float32) * np.float32(1.0 / np.sqrt(fan_in))

    # point tokens: random Fourier features of the normalised coordinates (like SAM's PE)
    freqs = g.init("pe_gauss", rng.standard_normal((2, dim // 2), dtype=np.float32))
    pn = g.mul(pts, g.const(2.0 * np.pi / 1024.0))
    proj = g.op("MatMul", [pn, freqs])                                          # [L,N+2,128]
    pe = g.op("Concat", [g.op("Sin", [proj]), g.op("Cos", [proj])], axis=2)     # [L,N+2,256]
    ptok = g.linear(pe, w(dim, dim, fan_in=dim), w(dim, fan_in=dim))
    wts = g.unsqueeze(weights, [2])                                            # [L,N+2,1]
    wsum = g.reduce_sum(wts, [1], 1)                                            # [L,1,1]

    def pooled(v):                                                              # weighted mean over points
        return g.div(g.reduce_sum(g.mul(v, wts), [1], 1), wsum)

    prompt = pooled(ptok)                                                       # [L,1,256]

    # image tokens conditioned on the prompt, one MLP block per object
    img = g.op("Transpose", [g.reshape(f2, [1, dim, 4096])], perm=[0, 2, 1])    # [1,4096,256]
    t = g.add(img, prompt)                                                      # [L,4096,256]
    ln_s = g.init("ln_scale", np.ones(dim, np.float32))
    ln_b = g.init("ln_bias", w(dim, fan_in=1) * np.float32(0.02))
    h = g.op("LayerNormalization", [t, ln_s, ln_b], axis=-1, epsilon=1e-6)
    h = g.gelu(g.linear(h, w(dim, hidden, fan_in=dim), w(hidden, fan_in=hidden)))
    t = g.add(t, g.linear(h, w(hidden, dim, fan_in=hidden), w(dim, fan_in=dim)))

    # token -> image attention for the score head
    q = g.linear(ptok, w(dim, dim, fan_in=dim))                                 # [L,N+2,256]
    k = g.linear(t, w(dim, dim, fan_in=dim))                                    # [L,4096,256]
    att = g.op("Softmax", [g.mul(g.op("MatMul", [q, g.op("Transpose", [k], perm=[0, 2, 1])]),
                                 g.const(1.0 / 16.0))], axis=-1)                # [L,N+2,4096]
    o = g.squeeze(pooled(g.op("MatMul", [att, t])), [1])                       # [L,256]
    z = g.op("Tanh", [g.linear(o, w(dim, 3, fan_in=dim), w(3, fan_in=dim))])    # [L,3]
    iou_scale = g.add(g.mul(z, g.const(0.01)), g.const(1.0))

    # upscaling path to 256x256, mixed with the level-0 features
    u = g.reshape(g.op("Transpose", [t], perm=[0, 2, 1]), [-1, dim, 64, 64])    # [L,256,64,64]
    u = g.conv1x1(u, w(32 * 16, dim, fan_in=dim), w(32 * 16, fan_in=dim))
    u = g.op("DepthToSpace", [u], blocksize=4, mode="DCR")                      # [L,32,256,256]
    u = g.conv1x1(g.mul(u, f0), w(3, 32, fan_in=32), w(3, fan_in=32))           # [L,3,256,256]
    lg = g.add(lg, g.mul(g.op("Tanh", [u]), g.const(0.01)))
    return lg, iou_scale


def build_decoder(contract, tw, bench=False):
    g = Graph("sam2_prompt_decoder")
    L, N = "num_labels", "num_points"
    if contract in ("A", "B"):
        emb = g.input("image_embed", TensorProto.FLOAT, FEAT_SHAPES[2])
        f0 = g.input("high_res_feats_0", TensorProto.FLOAT, FEAT_SHAPES[0])
        f1 = g.input("high_res_feats_1", TensorProto.FLOAT, FEAT_SHAPES[1])
        coords = g.input("point_coords", TensorProto.FLOAT, [L, N, 2])
        labels = g.input("point_labels", TensorProto.FLOAT, [L, N])
        mask_in = g.input("mask_input", TensorProto.FLOAT, [L, 1, 256, 256])
        has_mask = g.input("has_mask_input", TensorProto.FLOAT, [L])
        labels_f = labels
        size = g.input("orig_im_size", TensorProto.INT32, [2]) if contract == "B" else None
    else:
        f0 = g.input("image_features_0", TensorProto.FLOAT, FEAT_SHAPES[0])
        f1 = g.input("image_features_1", TensorProto.FLOAT, FEAT_SHAPES[1])
        emb = g.input("image_embeddings", TensorProto.FLOAT, FEAT_SHAPES[2])
        coords = g.input("point_coords", TensorProto.FLOAT, [L, N, 2])
        labels = g.input("point_labels", TensorProto.INT32, [L, N])
        mask_in = g.input("input_masks", TensorProto.FLOAT, [L, 1, 256, 256])
        has_mask = g.input("has_input_masks", TensorProto.FLOAT, [L])
        size = g.input("original_image_size", TensorProto.INT32, [2])
        labels_f = g.cast(labels, TensorProto.FLOAT, hint="labels_f32")

    lg, iou = tiny_decoder_core(g, f0, f1, emb, coords, labels_f, mask_in, has_mask, tw, bench=bench)

    def upsample_to_size(x):
        sizes = g.op("Concat", [g.slice(g.op("Shape", [x]), [0], [2], [0]),
                                g.cast(size, TensorProto.INT64)], axis=0)
        return g.op("Resize", [x, "", "", sizes], mode="linear",
                    coordinate_transformation_mode="pytorch_half_pixel", hint="upsampled")

    if contract == "A":
        g.op("Identity", [lg], name_out="masks")
        g.op("Identity", [iou], name_out="iou_predictions")
        g.output("masks", TensorProto.FLOAT, [L, 3, 256, 256])
        g.output("iou_predictions", TensorProto.FLOAT, [L, 3])
    elif contract == "B":
        up = upsample_to_size(lg)
        g.op("Identity", [up], name_out="masks")
        g.op("Identity", [iou], name_out="iou_predictions")
        g.output("masks", TensorProto.FLOAT, [L, 3, "orig_im_height", "orig_im_width"])
        g.output("iou_predictions", TensorProto.FLOAT, [L, 3])
    else:
        up = upsample_to_size(lg)
        g.op("Greater", [up, g.const(0.0)], name_out="masks")
        g.op("Identity", [iou], name_out="iou_predictions")
        g.op("Identity", [lg], name_out="low_res_masks")
        g.output("masks", TensorProto.BOOL, [L, 3, "original_image_height", "original_image_width"])
        g.output("iou_predictions", TensorProto.FLOAT, [L, 3])
        g.output("low_res_masks", TensorProto.FLOAT, [L, 3, 256, 256])

    kind = "bench" if bench else "tiny"
    doc = "Synthetic SAM2 prompt decoder (%s, contract %s), 3 mask candidates." % (kind, contract)
    return g.model(doc, {"sam2.synthetic": kind, "sam2.contract": contract})


# ---------------------------------------------------------------------------

PAIRS = [
    # name, contract, kind, fp16 image input
    ("tiny_a", "A", "tiny", False),
    ("tiny_b", "B", "tiny", False),
    ("tiny_c", "C", "tiny", False),
    ("tiny_a_fp16", "A", "tiny", True),
    ("bench_a", "A", "bench", False),
]


def save(model, path):
    data = model.SerializeToString(deterministic=True)
    with open(path, "wb") as f:
        f.write(data)
    return data


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", default="models")
    ap.add_argument("--tiny-only", action="store_true", help="skip the ~100 MB bench pair")
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)
    tw = TinyWeights()
    manifest = []
    cache = {}
    for name, contract, kind, fp16 in PAIRS:
        if kind == "bench" and args.tiny_only:
            continue
        bench = kind == "bench"
        files = {}
        for part in ("encoder", "decoder"):
            t0 = time.perf_counter()
            fname = "%s_%s.onnx" % (name, part)
            if part == "encoder":
                key = ("enc", contract, fp16, bench)
                if key not in cache:
                    cache[key] = build_encoder(contract, tw, fp16=fp16, bench=bench).SerializeToString(
                        deterministic=True)
            else:
                key = ("dec", contract, bench)
                if key not in cache:
                    cache[key] = build_decoder(contract, tw, bench=bench).SerializeToString(deterministic=True)
            data = cache[key]
            with open(os.path.join(args.out, fname), "wb") as f:
                f.write(data)
            files[part] = fname
            print("%-28s contract %s %-5s %-7s %11d bytes  sha256 %s  (%.1fs)" % (
                fname, contract, kind, "float16" if (fp16 and part == "encoder") else "float32",
                len(data), hashlib.sha256(data).hexdigest()[:16], time.perf_counter() - t0))
        manifest.append({
            "name": name,
            "contract": contract,
            "encoder": files["encoder"],
            "decoder": files["decoder"],
            "image_dtype": "float16" if fp16 else "float32",
            "kind": kind,
        })
    data = save(build_faulty_encoder(tw), os.path.join(args.out, "faulty_a_encoder.onnx"))
    print("%-28s contract A faulty (fails on a white image) %d bytes" % ("faulty_a_encoder.onnx", len(data)))
    with open(os.path.join(args.out, "manifest.json"), "w") as f:
        json.dump(manifest, f, indent=2)
        f.write("\n")
    print("manifest.json: %d pairs" % len(manifest))


if __name__ == "__main__":
    sys.exit(main())
