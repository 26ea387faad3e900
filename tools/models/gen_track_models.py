#!/usr/bin/env python3
"""Generate a tiny four-module SAM2 *video tracking* model whose masks mean something.

    python tools/models/gen_track_models.py --out models     (writes models/track/; the set-up runs it after gen_models.py)

Files, in the subdirectory track/ under the exact file names of the four-module contract of the
SAM2Export lineage (a directory of their own: in models/ itself, image_encoder.onnx and
image_decoder.onnx would read as one more encoder/decoder pair):
  track/image_encoder.onnx, track/memory_attention.onnx, track/image_decoder.onnx,
  track/memory_encoder.onnx
with exactly the names and shapes of that contract plus our optional inputs/outputs
(obj_ptr_tpos; mask_input/has_mask_input; multimask_output; object_score_logits in and out;
is_mask_from_pts). Batch is 1. All weights inline, opset 17, IR version 8, seeded: two runs
write byte-identical files.

What it does: a colour tracker with SAM2's data flow. The image encoder is the tiny image
encoder of tools/models/gen_models.py (its features are the ImageNet-normalised colour, pooled, in a
random orthonormal 3-d subspace). On a frame with clicks or a box the decoder is the tiny
decoder ("segment what looks like the clicked colour"). The memory encoder remembers the
colour under the mask; memory attention writes the remembered colour (a weighted mean over
memory frames and object pointers) into image_embed, in directions orthogonal to the colour
subspace; on a frame without clicks the decoder segments the pixels of that colour and says
"absent" when no 3x3 patch of the low-res grid has it.

Shared constants: the colour subspace Q (256x3) = gen_models.TinyWeights().q[2] with bias b;
the "track" directions E (256x5), orthonormal and orthogonal to Q: E0..E2 remembered colour,
E3 memory valid, E4 no-memory flag. NO_MEM_EMBED = 1.0 * E4. colour(f) = Q^T (f - b).
Memory feature channels (64): 0..2 colour, 3 valid, 4 no-object, 5 mask (AvgPool16 of the
mask probability), 6..63 zero. Object pointer channels (256): 0..2 colour, 3 valid,
4 no-object, the rest zero. NO_OBJ_PTR = e4; NO_OBJ_EMBED_SPATIAL = -e3 + e4.
SIGMOID_SCALE 20, SIGMOID_BIAS -10 (SAM2.1's sigmoid_scale/bias_for_mem_enc), NUM_MASKMEM 7,
NO_OBJ_SCORE -1024.
"""

import argparse
import hashlib
import os
import sys

import numpy as np
from onnx import TensorProto, helper

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gen_models as gm  # noqa: E402

NUM_MASKMEM = 7
MEM_DIM = 64
SIGMOID_SCALE = 20.0
SIGMOID_BIAS = -10.0
NO_OBJ_SCORE = -1024.0
DYN_STAB_THRESH = 0.95        # single-mask mode: medium candidate unless its stability is lower
SCORE_POOL = 3                # object present iff a SCORE_POOL^2 patch of the chosen mask is positive
MEM_SHARPNESS = 8             # memory encoder: weight of a 64x64 cell = (mask fraction)^8
N_TRACK_DIRS = 5
BINARIZE_SLOPE = 1.0e7        # memory encoder, masks from clicks


class TrackWeights:
    def __init__(self, tw, seed=4321):
        rng = np.random.default_rng(seed)
        q = tw.q[2]
        a = np.concatenate([q, rng.standard_normal((256, N_TRACK_DIRS))], axis=1)
        qq, r = np.linalg.qr(a)
        qq = qq * np.sign(np.diag(r))[None, :]
        self.E = qq[:, 3:3 + N_TRACK_DIRS]                         # 256 x 5, orthogonal to q
        assert np.abs(q.T @ self.E).max() < 1e-12
        self.no_mem_embed = self.E[:, 4].astype(np.float32)
        # maskmem_tpos_enc: small fixed values; channel 63 of row k holds t_pos / 6 with
        # t_pos = NUM_MASKMEM - 1 - k (the caller adds row NUM_MASKMEM - t_pos - 1), so memory
        # attention can read how recent a memory frame is.
        tc = rng.normal(0.0, 0.02, size=(NUM_MASKMEM, 1, 1, MEM_DIM)).astype(np.float32)
        tc[..., 62:] = 0.0
        for k in range(NUM_MASKMEM):
            tc[k, 0, 0, 63] = (NUM_MASKMEM - 1 - k) / (NUM_MASKMEM - 1)
        self.temporal_code = tc
        self.no_obj_ptr = np.zeros(256, np.float32)
        self.no_obj_ptr[4] = 1.0
        self.no_obj_embed_spatial = np.zeros(MEM_DIM, np.float32)
        self.no_obj_embed_spatial[3] = -1.0
        self.no_obj_embed_spatial[4] = 1.0


def grid_centres(n):
    """Centres of an n x n grid in [0, 1], flattened row-major: [n*n, 2] (x, y)."""
    c = (np.arange(n, dtype=np.float64) + 0.5) / n
    return np.stack([np.tile(c, n), np.repeat(c, n)], axis=1).astype(np.float32)


def sine_pos(g, n, dim, zero_tail=0):
    """In-graph 2-d sine position code of an n x n grid: [n*n, 1, dim] (the last zero_tail
    channels are zero)."""
    half = (dim - zero_tail) // 2
    freqs = np.zeros((2, half), np.float32)
    k = half // 2
    freqs[0, :k] = 2.0 * np.pi / 10000.0 ** (np.arange(k) / k)                # x, as SAM2's sine code
    freqs[1, k:] = 2.0 * np.pi / 10000.0 ** (np.arange(half - k) / (half - k))   # y
    proj = g.op("MatMul", [g.const(grid_centres(n)), g.const(freqs)])
    parts = [g.op("Sin", [proj]), g.op("Cos", [proj])]
    if zero_tail:
        parts.append(g.const(np.zeros((n * n, zero_tail), np.float32)))
    pe = g.op("Concat", parts, axis=1)
    return g.reshape(pe, [n * n, 1, dim])


def colour_matmul(g, f0, f1, f2, tw):
    """gen_models.tiny_colour computed with MatMul instead of 1x1 Conv: the same map G, without
    the channel-blocked layout copies ONNX Runtime makes around a Conv on a 256x256 map."""
    def project(f, level, c, n):
        w, b = tw.dec(level, gm.BLEND[level])
        y = g.op("MatMul", [g.const(w.astype(np.float32)), g.reshape(f, [c, n * n])])
        y = g.add(y, g.const(b.astype(np.float32).reshape(3, 1)))
        return g.reshape(y, [1, 3, n, n])

    c0 = project(f0, 0, 32, 256)
    c1 = g.upsample(project(f1, 1, 64, 128), 2)
    c2 = g.upsample(project(f2, 2, 256, 64), 4)
    return g.add(g.add(c0, c1), c2, hint="colour")


def meta(module):
    return {"sam2.synthetic": "track", "sam2.module": module, "sam2.contract": "sam2export-video"}


# ---------------------------------------------------------------------------

def build_image_encoder(tw, kw):
    g = gm.Graph("sam2_track_image_encoder")
    x = g.input("image", TensorProto.FLOAT, [1, 3, 1024, 1024])
    f0, f1, f2 = gm.tiny_encoder_body(g, x, tw)
    vis = g.add(f2, g.const(kw.no_mem_embed.reshape(1, 256, 1, 1)))
    pos = sine_pos(g, 64, 256)
    for src, name, shape in ((f2, "pix_feat", [1, 256, 64, 64]),
                             (f0, "high_res_feat0", [1, 32, 256, 256]),
                             (f1, "high_res_feat1", [1, 64, 128, 128]),
                             (vis, "vision_feats", [1, 256, 64, 64]),
                             (pos, "vision_pos_embed", [4096, 1, 256])):
        g.op("Identity", [src], name_out=name)
        g.output(name, TensorProto.FLOAT, shape)
    doc = ("Synthetic SAM2 video image encoder (tiny, colour tracker). image: RGB /255, ImageNet "
           "mean/std, 1024x1024 stretched. high_res_feat0/1 and pix_feat are the tiny image "
           "encoder's features (the colour, average-pooled 4x4 / 8x8 / 16x16, projected by fixed "
           "orthonormal 3->C matrices plus a bias); vision_feats = pix_feat + no_mem_embed (a unit "
           "vector orthogonal to the colour subspace); vision_pos_embed is a fixed 2-d sine code.")
    return g.model(doc, meta("image_encoder"))


def build_memory_attention(tw, kw):
    g = gm.Graph("sam2_track_memory_attention")
    cur = g.input("current_vision_feat", TensorProto.FLOAT, [1, 256, 64, 64])
    g.input("current_vision_pos_embed", TensorProto.FLOAT, [4096, 1, 256])
    ptrs = g.input("memory_0", TensorProto.FLOAT, ["num_obj_ptrs", 256])
    mem = g.input("memory_1", TensorProto.FLOAT, ["num_mem_frames", MEM_DIM, 64, 64])
    mpos = g.input("memory_pos_embed", TensorProto.FLOAT, ["num_mem_tokens", 1, MEM_DIM])
    tpos = g.input("obj_ptr_tpos", TensorProto.FLOAT, ["num_obj_ptrs"])

    base = g.sub(cur, g.const(kw.no_mem_embed.reshape(1, 256, 1, 1)), hint="without_no_mem")

    # memory frames: colour and validity (spatial means), recency from the temporal code
    stats = g.op("ReduceMean", [mem], axes=[2, 3], keepdims=0, hint="mem_stats")       # [m,64]
    mc = g.slice(stats, [0], [3], [1])                                                  # [m,3]
    mv = g.op("Relu", [g.slice(stats, [3], [4], [1])])                                  # [m,1]
    m1 = g.slice(g.op("Shape", [mem]), [0], [1], [0])                                   # [1]
    rows = g.mul(m1, g.const([4096], np.int64))
    fpos = g.op("Slice", [mpos, g.const([0], np.int64), rows, g.const([0], np.int64)])  # [m*4096,1,64]
    fpos = g.reshape(fpos, [-1, 4096, MEM_DIM])
    recency = g.slice(g.op("ReduceMean", [fpos], axes=[1], keepdims=0), [63], [64], [1])  # [m,1] t_pos/6
    wf = g.mul(mv, g.add(recency, g.const(1.0)), hint="frame_weight")

    # object pointers: colour and validity, nearer pointers weigh more
    pc = g.slice(ptrs, [0], [3], [1])                                                   # [n,3]
    pv = g.op("Relu", [g.slice(ptrs, [3], [4], [1])])                                   # [n,1]
    near = g.sub(g.const(1.0), g.mul(g.op("Abs", [g.unsqueeze(tpos, [1])]), g.const(0.5)))
    wp = g.mul(pv, g.op("Relu", [near]), hint="ptr_weight")

    num = g.add(g.reduce_sum(g.mul(wf, mc), [0], 1), g.reduce_sum(g.mul(wp, pc), [0], 1))   # [1,3]
    den = g.add(g.reduce_sum(wf, [0], 1), g.reduce_sum(wp, [0], 1))                       # [1,1]
    remembered = g.div(num, g.max(den, g.const(1e-6)), hint="remembered_colour")
    valid = g.min(g.mul(den, g.const(1e3)), g.const(1.0), hint="memory_valid")
    vec = g.op("MatMul", [g.op("Concat", [remembered, valid], axis=1),
                          g.const(kw.E[:, :4].T.astype(np.float32))])                       # [1,256]
    out = g.add(base, g.reshape(vec, [1, 256, 1, 1]))
    g.op("Identity", [out], name_out="image_embed")
    g.output("image_embed", TensorProto.FLOAT, [1, 256, 64, 64])
    doc = ("Synthetic SAM2 memory attention (tiny, colour tracker). image_embed = "
           "current_vision_feat - no_mem_embed + E[:,0:3] r + E[:,3] v, where r is the remembered "
           "colour: the weighted mean of the colour channels (0..2) of each memory frame "
           "(memory_1, spatial mean; weight = max(channel 3, 0) * (1 + t_pos/6), t_pos read from "
           "channel 63 of the frame's memory_pos_embed rows, i.e. the temporal code) and of each "
           "object pointer (memory_0; weight = max(channel 3, 0) * max(1 - |obj_ptr_tpos|/2, 0)); "
           "v = min(1000 * total weight, 1). E is orthogonal to the colour subspace, so the "
           "decoder's colour estimate is unchanged. current_vision_pos_embed and the pointer rows "
           "of memory_pos_embed are accepted and not used.")
    return g.model(doc, meta("memory_attention"))


def build_image_decoder(tw, kw):
    g = gm.Graph("sam2_track_image_decoder")
    N = "num_points"
    coords = g.input("point_coords", TensorProto.FLOAT, [1, N, 2])
    labels = g.input("point_labels", TensorProto.FLOAT, [1, N])
    emb = g.input("image_embed", TensorProto.FLOAT, [1, 256, 64, 64])
    f0 = g.input("high_res_feats_0", TensorProto.FLOAT, [1, 32, 256, 256])
    f1 = g.input("high_res_feats_1", TensorProto.FLOAT, [1, 64, 128, 128])
    mask_in = g.input("mask_input", TensorProto.FLOAT, [1, 1, 256, 256])
    has_mask = g.input("has_mask_input", TensorProto.FLOAT, [1])
    multimask = g.input("multimask_output", TensorProto.FLOAT, [1])

    G = colour_matmul(g, f0, f1, emb, tw)                       # colour at 256x256

    def prompted(b):
        """The tiny image decoder (clicks, box, mask input)."""
        lg_click, _ = gm.tiny_decoder_core(b, f0, f1, emb, coords, labels, mask_in, has_mask, tw, colour=G)
        return lg_click

    def tracking(b):
        """The pixels of the remembered colour."""
        # the memory directions' spatial mean (projection and mean commute)
        rv = b.op("MatMul", [b.op("ReduceMean", [emb], axes=[2, 3], keepdims=0),
                             b.const(kw.E[:, :4].astype(np.float32))])                      # [1,4]
        rv = b.reshape(rv, [1, 4, 1, 1])
        r = b.slice(rv, [0], [3], [1])
        valid = b.slice(rv, [3], [4], [1])
        diff = b.sub(G, r)
        d = b.op("Sqrt", [b.reduce_sum(b.mul(diff, diff), [1], 1)], hint="dist_remembered")  # [1,1,256,256]
        taus = b.const(np.asarray(gm.TAUS, np.float32).reshape(1, 3, 1, 1))
        lg = b.mul(b.sub(taus, d), b.const(gm.SCALE))
        lg = b.add(lg, b.mul(b.reshape(has_mask, [1, 1, 1, 1]), mask_in))
        lg = b.op("Where", [b.op("Greater", [valid, b.const(0.5)]), lg, b.const(-gm.LOGIT_CLAMP)])
        return b.op("Clip", [lg, b.const(-gm.LOGIT_CLAMP), b.const(gm.LOGIT_CLAMP)])

    def branch(name, offset, build):
        b = gm.Graph(name)
        b._n = offset                                           # value names unique across scopes
        b.op("Identity", [build(b)], name_out=name + "_logits")
        out = helper.make_tensor_value_info(name + "_logits", TensorProto.FLOAT, [1, 3, 256, 256])
        return helper.make_graph(b.nodes, name, [], [out], b.inits)

    real_pt = g.cast(g.op("Not", [g.op("Equal", [labels, g.const(-1.0)])]), TensorProto.FLOAT)
    has_pts = g.op("Greater", [g.op("ReduceMax", [real_pt], keepdims=0), g.const(0.5)], hint="has_points")
    # only the path in use runs: a tracking frame skips the per-point distances
    lg = g.op("If", [has_pts], hint="candidates", then_branch=branch("prompted", 100000, prompted),
              else_branch=branch("tracking", 200000, tracking))                      # [1,3,256,256]

    # predicted IoU = prior * stability, as the tiny decoders
    def count_above(v):
        return g.reduce_sum(g.cast(g.op("Greater", [lg, g.const(v)]), TensorProto.FLOAT), [2, 3], 0)

    stab = g.div(g.add(count_above(gm.STAB_DELTA), g.const(0.5)), g.add(count_above(-gm.STAB_DELTA), g.const(1.0)))
    iou = g.mul(stab, g.const(np.asarray(gm.PRIORS, np.float32).reshape(1, 3)))          # [1,3]
    best = g.reshape(g.op("ArgMax", [iou], axis=1, keepdims=0), [1])                      # [1] int64
    medium_stable = g.op("Not", [g.op("Less", [g.slice(stab, [1], [2], [1]), g.const(DYN_STAB_THRESH)])])
    # multimask: best by predicted IoU; single: medium unless unstable (SAM2's dynamic multimask)
    use_best = g.op("Or", [g.op("Greater", [multimask, g.const(0.5)]),
                           g.op("Not", [g.reshape(medium_stable, [1])])])
    idx = g.op("Where", [use_best, best, g.const([1], np.int64)])
    sel = g.op("Gather", [lg, idx], axis=1, hint="chosen")                                 # [1,1,256,256]

    pooled = g.op("AveragePool", [sel], kernel_shape=[SCORE_POOL, SCORE_POOL], strides=[1, 1],
                  pads=[SCORE_POOL // 2] * 4, count_include_pad=0)
    score = g.reshape(g.op("ReduceMax", [pooled], keepdims=0), [1, 1], hint="object_score")
    present = g.op("Greater", [score, g.const(0.0)])                                      # [1,1] bool
    present_f = g.cast(present, TensorProto.FLOAT)
    pred = g.op("Where", [g.reshape(present, [1, 1, 1, 1]), sel, g.const(NO_OBJ_SCORE)])
    # sigmoid(x) * 20 - 10 = 10 * tanh(x / 2); the halving commutes with the bilinear resize
    assert SIGMOID_SCALE == -2.0 * SIGMOID_BIAS
    hi = g.upsample(g.mul(pred, g.const(0.5)), 4)
    mfm = g.mul(g.op("Tanh", [hi]), g.const(SIGMOID_SCALE / 2.0), hint="mask_for_mem")

    on = g.cast(g.op("Greater", [sel, g.const(0.0)]), TensorProto.FLOAT)
    ptr_col = g.div(g.reduce_sum(g.mul(G, on), [2, 3], 0),
                    g.max(g.reduce_sum(on, [2, 3], 0), g.const(1.0)))                          # [1,3]
    ptr = g.op("Concat", [ptr_col, g.const(np.ones((1, 1), np.float32)),
                          g.const(np.zeros((1, 252), np.float32))], axis=1)
    # SAM2 with fixed_no_obj_ptr: lambda * ptr + (1 - lambda) * no_obj_ptr, lambda = score > 0
    obj_ptr = g.add(g.mul(present_f, ptr),
                    g.mul(g.sub(g.const(1.0), present_f), g.const(kw.no_obj_ptr.reshape(1, 256))))

    for src, name, shape in ((obj_ptr, "obj_ptr", [1, 256]),
                             (mfm, "mask_for_mem", [1, 1, 1024, 1024]),
                             (pred, "pred_mask", [1, 1, 256, 256]),
                             (score, "object_score_logits", [1, 1])):
        g.op("Identity", [src], name_out=name)
        g.output(name, TensorProto.FLOAT, shape)
    doc = ("Synthetic SAM2 video mask decoder (tiny, colour tracker). With a real point "
           "(label != -1; an If node runs only the path in use) it is the tiny image decoder "
           "(3 candidates by colour distance to the clicked colour, negatives, box, + "
           "has_mask_input * mask_input). With only padding points the 3 candidates are "
           "6 * (TAU_k - |G(p) - r|) + has_mask_input * mask_input, TAU = (0.4, 0.9, 1.5), where "
           "G is the colour at 256x256 (ImageNet-normalised RGB, as the tiny decoder estimates "
           "it) and r the remembered colour that memory attention put into image_embed (all "
           "-32 when image_embed holds no memory). "
           "Candidates are clipped to +-32; predicted IoU = prior * stability; multimask_output=1 "
           "takes the best by predicted IoU, 0 takes the medium one unless its stability is "
           "< 0.95. object_score_logits = max over the 3x3 average-pooled chosen logits (> 0: "
           "present). pred_mask = chosen logits, or -1024 everywhere when absent; mask_for_mem = "
           "sigmoid(bilinear x4 of pred_mask) * 20 - 10; obj_ptr = [mean colour under the mask, "
           "1 (valid), 0...] when present, else no_obj_ptr = e4.")
    return g.model(doc, meta("image_decoder"))


def build_memory_encoder(tw, kw):
    g = gm.Graph("sam2_track_memory_encoder")
    mfm = g.input("mask_for_mem", TensorProto.FLOAT, [1, 1, 1024, 1024])
    pix = g.input("pix_feat", TensorProto.FLOAT, [1, 256, 64, 64])
    score = g.input("object_score_logits", TensorProto.FLOAT, [1, 1])
    from_pts = g.input("is_mask_from_pts", TensorProto.FLOAT, [1])

    # p = clip(k * mask_for_mem + 0.5, 0, 1): k = 1/20 gives the sigmoid's probability back
    # ((m + 10) / 20); for a mask from clicks k = 1e7 binarizes at the midpoint 0 (SAM2's
    # binarize_mask_from_pts_for_mem_enc), one pass over the 1024x1024 mask either way.
    assert SIGMOID_SCALE == -2.0 * SIGMOID_BIAS
    binarize = g.cast(g.op("Greater", [from_pts, g.const(0.5)]), TensorProto.FLOAT, hint="binarize")
    k = g.add(g.const(1.0 / SIGMOID_SCALE), g.mul(binarize, g.const(BINARIZE_SLOPE)))
    prob = g.op("Clip", [g.add(g.mul(mfm, g.reshape(k, [1, 1, 1, 1])), g.const(0.5)), g.const(0.0), g.const(1.0)],
                hint="mask_prob")
    p64 = g.op("AveragePool", [prob], kernel_shape=[16, 16], strides=[16, 16], hint="mask64")   # [1,1,64,64]
    w = p64
    for _ in range(int(np.log2(MEM_SHARPNESS))):                # p^8: cells well inside the mask
        w = g.mul(w, w)
    col = g.conv1x1(pix, *tw.dec(2, 1.0))                                                   # [1,3,64,64]
    wsum = g.reduce_sum(w, [2, 3], 1)                                                       # [1,1,1,1]
    colour = g.div(g.reduce_sum(g.mul(col, w), [2, 3], 1), g.max(wsum, g.const(1e-6)))     # [1,3,1,1]
    valid = g.min(g.mul(wsum, g.const(1e4)), g.const(1.0))

    def spread(v, c):                                           # [1,c,1,1] -> [1,c,64,64]
        return g.op("Expand", [v, g.const([1, c, 64, 64], np.int64)])

    zero = g.const(np.zeros((1, 1, 1, 1), np.float32))
    feats = g.op("Concat", [spread(colour, 3), spread(valid, 1), spread(zero, 1), p64], axis=1)  # [1,6,64,64]
    feats = g.op("Pad", [feats, g.const([0, 0, 0, 0, 0, MEM_DIM - 6, 0, 0], np.int64)], mode="constant")
    absent = g.cast(g.op("Not", [g.op("Greater", [score, g.const(0.0)])]), TensorProto.FLOAT)   # [1,1]
    feats = g.add(feats, g.mul(g.reshape(absent, [1, 1, 1, 1]),
                               g.const(kw.no_obj_embed_spatial.reshape(1, MEM_DIM, 1, 1))))
    pos = sine_pos(g, 64, MEM_DIM, zero_tail=2)
    tcode = g.const(kw.temporal_code)
    for src, name, shape in ((feats, "maskmem_features", [1, MEM_DIM, 64, 64]),
                             (pos, "maskmem_pos_enc", [4096, 1, MEM_DIM]),
                             (tcode, "temporal_code", [NUM_MASKMEM, 1, 1, MEM_DIM])):
        g.op("Identity", [src], name_out=name)
        g.output(name, TensorProto.FLOAT, shape)
    doc = ("Synthetic SAM2 memory encoder (tiny, colour tracker). p = clip(k * mask_for_mem + 0.5, 0, 1) "
           "with k = 1/20 (the sigmoid probability back), or k = 1/20 + 1e7 when is_mask_from_pts "
           "> 0.5 (binarized at the sigmoid's midpoint 0, within 5e-8); p64 = its 16x16 "
           "average pool; weight w = p64^8. maskmem_features channels: 0..2 the w-weighted mean "
           "colour of pix_feat (decoded from its colour subspace), 3 valid = min(1e4 * sum w, 1), "
           "4 zero, 5 p64, 6..63 zero, all broadcast over 64x64; plus no_obj_embed_spatial "
           "(-1 on channel 3, +1 on channel 4) when object_score_logits <= 0. maskmem_pos_enc is "
           "a fixed 2-d sine code (channels 62, 63 zero); temporal_code row k holds t_pos/6 on "
           "channel 63 (t_pos = 6 - k).")
    return g.model(doc, meta("memory_encoder"))


SUBDIR = "track"
MODULES = (
    ("image_encoder.onnx", build_image_encoder),
    ("memory_attention.onnx", build_memory_attention),
    ("image_decoder.onnx", build_image_decoder),
    ("memory_encoder.onnx", build_memory_encoder),
)


def write_all(out, tw=None):
    """Writes the four modules into out/track/."""
    tw = tw or gm.TinyWeights()
    kw = TrackWeights(tw)
    os.makedirs(os.path.join(out, SUBDIR), exist_ok=True)
    for fname, build in MODULES:
        rel = os.path.join(SUBDIR, fname)
        data = gm.save(build(tw, kw), os.path.join(out, rel))
        print("%-28s video track      %11d bytes  sha256 %s" % (
            rel, len(data), hashlib.sha256(data).hexdigest()[:16]))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", default="models")
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)
    write_all(args.out)


if __name__ == "__main__":
    sys.exit(main())
