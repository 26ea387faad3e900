"""SAM2.1 hiera-tiny exported to ONNX as the four modules the library's tracker reads (issue 19),
from a checkpoint or from seeded random weights.

The network is built as `sam2.build_sam.build_sam2_video_predictor` builds it (its hydra
overrides: dynamic multimask via stability, binarize_mask_from_pts_for_mem_enc, fill_hole_area),
with the weights of `--checkpoint` (Meta's sam2.1_hiera_tiny.pt) or, without it, weights drawn as
export_real.py draws them (the module's own initialisation under a fixed seed, then small noise
on every all-zero parameter) and saved as an ordinary checkpoint (`sam2.1_hiera_tiny_video.pt`)
so that tools/references/video_reference.py runs Meta's SAM2VideoPredictor on exactly these
weights.

The four graphs and their names are the contract of docs/video.md (the Aimol-l/SAM2Export
lineage) plus our optional inputs/outputs; the wrappers below are written here from Meta's
modules (sam2/modeling), calling the modules' own layers:

* image_encoder.onnx     image -> pix_feat, high_res_feat0/1, vision_feats, vision_pos_embed
* memory_attention.onnx  current frame + n object pointers + m memory frames -> image_embed
* image_decoder.onnx     prompts (+ previous logits, multimask flag) -> pointer, masks, score
* memory_encoder.onnx    mask + pix_feat (+ score, from-clicks flag) -> memory of one frame

The only part rewritten rather than called is the rotary position encoding of the memory
attention: Meta's uses complex tensors (which ONNX has not), ours the same rotation in real
arithmetic ((a + ib)(c + is) = (ac - bs) + i(as + bc)) with the module's own cos/sin tables.

Runs where torch and Meta's `sam2` package are installed (tools/setup/setup-real.sh keeps such a
venv); deterministic (same seed, same files).

    sam2-export-video --out DIR [--checkpoint sam2.1_hiera_tiny.pt]
"""

import argparse
import hashlib
import json
import os
import sys
import time

import torch
import torch.nn.functional as F

SEED = 20261201
CONFIG = "configs/sam2.1/sam2.1_hiera_t.yaml"
NAME = "sam2.1_hiera_tiny"
OPSET = 17


def say(msg):
    print(f"[export-video] {msg}", file=sys.stderr, flush=True)


def build_random_video_predictor(seed):
    """SAM2VideoPredictor as build_sam2_video_predictor builds it, with seeded random weights
    (export_real.py's recipe: all-zero floating parameters get N(0, 0.02) noise, so that biases
    and embeddings are not degenerate)."""
    from sam2.build_sam import build_sam2_video_predictor

    torch.manual_seed(seed)
    model = build_sam2_video_predictor(CONFIG, ckpt_path=None, device="cpu")
    generator = torch.Generator().manual_seed(seed + 1)
    with torch.no_grad():
        for _, p in sorted(model.named_parameters()):
            if p.dtype.is_floating_point and not torch.any(p != 0):
                p.copy_(torch.randn(p.shape, generator=generator) * 0.02)
    return model.eval()


# ----------------------------------------------------------------------------------------------
# image_encoder


class ImageEncoder(torch.nn.Module):
    """forward_image + _prepare_backbone_features of SAM2Base, for one frame."""

    def __init__(self, model):
        super().__init__()
        self.model = model

    def forward(self, image):
        out = self.model.forward_image(image)
        fpn = out["backbone_fpn"]  # conv_s0 / conv_s1 already applied by forward_image
        pix_feat = fpn[2]  # [1,256,64,64]
        # the embedding SAM2 decodes on an initial conditioning frame (directly_add_no_mem_embed)
        vision_feats = pix_feat + self.model.no_mem_embed.reshape(1, -1, 1, 1)
        vision_pos_embed = out["vision_pos_enc"][2].flatten(2).permute(2, 0, 1)  # [4096,1,256]
        return pix_feat, fpn[0], fpn[1], vision_feats, vision_pos_embed


# ----------------------------------------------------------------------------------------------
# memory_attention


def rotate(x, cos, sin):
    """Meta's apply_rotary_enc in real arithmetic: consecutive channel pairs (x0, x1) are complex
    numbers x0 + i x1, multiplied by cos + i sin. x [..., T, C]; cos, sin [T, C/2]."""
    pairs = x.reshape(*x.shape[:-1], -1, 2)
    x0, x1 = pairs[..., 0], pairs[..., 1]
    return torch.stack([x0 * cos - x1 * sin, x0 * sin + x1 * cos], dim=-1).flatten(-2)


def rope_attention(attn, q, k, v, cos_q, sin_q, cos_k, sin_k):
    """sam2.modeling.sam.transformer.RoPEAttention.forward (eval, batch 1) with the rotation of
    rotate(); keys that must not be rotated (object pointers) come with cos 1, sin 0."""
    q = attn._separate_heads(attn.q_proj(q), attn.num_heads)
    k = attn._separate_heads(attn.k_proj(k), attn.num_heads)
    v = attn._separate_heads(attn.v_proj(v), attn.num_heads)
    q = rotate(q, cos_q, sin_q)
    k = rotate(k, cos_k, sin_k)
    out = F.scaled_dot_product_attention(q, k, v)
    return attn.out_proj(attn._recombine_heads(out))


class MemoryAttention(torch.nn.Module):
    """SAM2Base._prepare_memory_conditioned_features from "Step 2" (the memory and its position
    encoding already gathered by the caller) + MemoryAttention.forward."""

    def __init__(self, model):
        super().__init__()
        self.model = model
        ma = model.memory_attention
        layer = ma.layers[0]
        for lyr in ma.layers:
            assert lyr.pos_enc_at_cross_attn_keys and not lyr.pos_enc_at_cross_attn_queries
            assert not lyr.pos_enc_at_attn
        assert ma.pos_enc_at_input and ma.batch_first
        # The module's own rotation tables (64x64 positions, complex64 -> cos, sin).
        self_cis = layer.self_attn.freqs_cis.cpu()
        cross_cis = layer.cross_attn_image.freqs_cis.cpu()
        self.register_buffer("cos_self", self_cis.real.contiguous())
        self.register_buffer("sin_self", self_cis.imag.contiguous())
        self.register_buffer("cos_cross", cross_cis.real.contiguous())
        self.register_buffer("sin_cross", cross_cis.imag.contiguous())

    def forward(self, current_vision_feat, current_vision_pos_embed, memory_0, memory_1,
                memory_pos_embed, obj_ptr_tpos):
        model = self.model
        C = model.hidden_dim  # 256
        mem_dim = model.mem_dim  # 64
        # curr: the backbone feature without no_mem_embed, (HW)BC
        pix = current_vision_feat - model.no_mem_embed.reshape(1, -1, 1, 1)
        curr = pix.flatten(2).permute(2, 0, 1)  # [4096,1,256]
        curr_pos = current_vision_pos_embed
        # memory: m frames of [64,64,64] as (HW) tokens each, then the n pointers split in
        # C // mem_dim tokens each (SAM2's layout)
        spatial = memory_1.flatten(2).permute(0, 2, 1).reshape(-1, 1, mem_dim)  # [m*4096,1,64]
        ptrs = memory_0.reshape(-1, 1, C // mem_dim, mem_dim).permute(0, 2, 1, 3)
        ptrs = ptrs.reshape(-1, 1, mem_dim)  # [4n,1,64]
        memory = torch.cat([spatial, ptrs], dim=0)
        # temporal position of the pointers (add_tpos_enc_to_obj_ptrs, proj_tpos_enc_in_obj_ptrs)
        from sam2.modeling.sam2_utils import get_1d_sine_pe

        tpos = model.obj_ptr_tpos_proj(get_1d_sine_pe(obj_ptr_tpos, dim=C))  # [n,64]
        tpos = tpos.unsqueeze(1).expand(-1, C // mem_dim, -1).reshape(-1, 1, mem_dim)
        memory_pos = memory_pos_embed + torch.cat([torch.zeros_like(spatial), tpos], dim=0)

        # rotation tables of the keys: the 64x64 table once per memory frame, identity (cos 1,
        # sin 0) for the pointer tokens (num_k_exclude_rope)
        cos_k = torch.cat([
            (torch.zeros_like(memory_1[:, :1]).flatten(2).permute(0, 2, 1)
             + self.cos_cross.unsqueeze(0)).reshape(-1, self.cos_cross.shape[-1]),
            torch.zeros_like(ptrs[:, 0, :]).repeat(1, 2) + 1.0,
        ], dim=0)
        sin_k = torch.cat([
            (torch.zeros_like(memory_1[:, :1]).flatten(2).permute(0, 2, 1)
             + self.sin_cross.unsqueeze(0)).reshape(-1, self.sin_cross.shape[-1]),
            torch.zeros_like(ptrs[:, 0, :]).repeat(1, 2),
        ], dim=0)

        ma = model.memory_attention
        output = curr + 0.1 * curr_pos
        output = output.transpose(0, 1)
        curr_pos_b = curr_pos.transpose(0, 1)  # unused by the layers (pos_enc_at_attn False)
        del curr_pos_b
        memory = memory.transpose(0, 1)
        memory_pos = memory_pos.transpose(0, 1)
        for layer in ma.layers:
            # self attention
            tgt2 = layer.norm1(output)
            tgt2 = rope_attention(layer.self_attn, tgt2, tgt2, tgt2,
                                  self.cos_self, self.sin_self, self.cos_self, self.sin_self)
            output = output + tgt2
            # cross attention to the memory (keys with their position encoding)
            tgt2 = layer.norm2(output)
            tgt2 = rope_attention(layer.cross_attn_image, tgt2, memory + memory_pos, memory,
                                  self.cos_cross, self.sin_cross, cos_k, sin_k)
            output = output + tgt2
            # feed-forward
            tgt2 = layer.norm3(output)
            tgt2 = layer.linear2(layer.activation(layer.linear1(tgt2)))
            output = output + tgt2
        output = ma.norm(output).transpose(0, 1)  # [4096,1,256]
        return output.permute(1, 2, 0).reshape(1, C, 64, 64)


# ----------------------------------------------------------------------------------------------
# image_decoder


class ImageDecoder(torch.nn.Module):
    """SAM2Base._forward_sam_heads for one object, both of SAM2's modes in one graph:
    multimask_output 1 -> best of masks 1..3 by predicted IoU and its token for the pointer;
    0 -> mask 0, or the best multimask when mask 0 is unstable (dynamic_multimask_via_stability),
    pointer from token 0 (MaskDecoder.forward)."""

    def __init__(self, model):
        super().__init__()
        self.model = model
        md = model.sam_mask_decoder
        assert md.dynamic_multimask_via_stability and md.use_multimask_token_for_obj_ptr
        assert model.pred_obj_scores and model.fixed_no_obj_ptr and not model.soft_no_obj_ptr

    def forward(self, point_coords, point_labels, image_embed, high_res_feats_0,
                high_res_feats_1, mask_input, has_mask_input, multimask_output):
        from sam2.modeling.sam2_base import NO_OBJ_SCORE

        model = self.model
        pe = model.sam_prompt_encoder
        md = model.sam_mask_decoder
        # prompt encoder: SAM2 calls it with boxes=None, so one padding point is always appended
        sparse = pe._embed_points(point_coords, point_labels, pad=True)
        has = has_mask_input.reshape(1, 1, 1, 1)
        no_mask = pe.no_mask_embed.weight.reshape(1, -1, 1, 1)
        dense = has * pe._embed_masks(mask_input) + (1.0 - has) * no_mask
        masks, ious, tokens, score = md.predict_masks(
            image_embeddings=image_embed,
            image_pe=pe.get_dense_pe(),
            sparse_prompt_embeddings=sparse,
            dense_prompt_embeddings=dense,
            repeat_image=False,
            high_res_features=[high_res_feats_0, high_res_feats_1],
        )
        # best of the three multimask candidates (argmax: first maximum, as torch)
        best = torch.argmax(ious[:, 1:], dim=-1) + 1  # [1]
        best_mask = torch.index_select(masks, 1, best)  # [1,1,256,256]
        best_token = torch.index_select(tokens, 1, best)[:, 0]  # [1,256]
        # stability of mask 0 (MaskDecoder._get_stability_scores)
        m0 = masks[:, 0:1]
        flat = m0.flatten(-2)
        delta = md.dynamic_multimask_stability_delta
        area_i = torch.sum((flat > delta).float(), dim=-1)
        area_u = torch.sum((flat > -delta).float(), dim=-1)
        stability = torch.where(area_u > 0, area_i / area_u, torch.ones_like(area_u))
        stable = stability >= md.dynamic_multimask_stability_thresh  # [1,1]
        single_mask = torch.where(stable.reshape(1, 1, 1, 1), m0, best_mask)
        multi = multimask_output.reshape(1, 1, 1, 1) > 0.5
        low = torch.where(multi, best_mask, single_mask)
        token = torch.where(multi.reshape(1, 1), best_token, tokens[:, 0])
        # object presence: absent -> NO_OBJ_SCORE logits, no_obj_ptr pointer
        appearing = score > 0  # [1,1]
        low = torch.where(appearing.reshape(1, 1, 1, 1), low, torch.full_like(low, NO_OBJ_SCORE))
        high = F.interpolate(low, size=(model.image_size, model.image_size), mode="bilinear",
                             align_corners=False)
        lam = appearing.float()
        obj_ptr = model.obj_ptr_proj(token)
        obj_ptr = lam * obj_ptr
        obj_ptr = obj_ptr + (1 - lam) * model.no_obj_ptr
        mask_for_mem = torch.sigmoid(high) * model.sigmoid_scale_for_mem_enc \
            + model.sigmoid_bias_for_mem_enc
        return obj_ptr, mask_for_mem, low, score


# ----------------------------------------------------------------------------------------------
# memory_encoder


class MemoryEncoder(torch.nn.Module):
    """SAM2Base._encode_new_memory for one object, from mask_for_mem (the decoder's
    sigmoid(logits) * scale + bias)."""

    def __init__(self, model):
        super().__init__()
        self.model = model
        assert model.binarize_mask_from_pts_for_mem_enc and model.no_obj_embed_spatial is not None

    def forward(self, mask_for_mem, pix_feat, object_score_logits, is_mask_from_pts):
        model = self.model
        scale, bias = model.sigmoid_scale_for_mem_enc, model.sigmoid_bias_for_mem_enc
        # binarize_mask_from_pts_for_mem_enc: (logits > 0) * scale + bias; logits > 0 is
        # sigmoid > 1/2, i.e. mask_for_mem > scale / 2 + bias
        binary = (mask_for_mem > scale * 0.5 + bias).float() * scale + bias
        mask = torch.where(is_mask_from_pts.reshape(1, 1, 1, 1) > 0.5, binary, mask_for_mem)
        out = model.memory_encoder(pix_feat, mask, skip_mask_sigmoid=True)
        feats = out["vision_features"]
        pos = out["vision_pos_enc"][0]
        absent = 1.0 - (object_score_logits > 0).float()  # [1,1]
        feats = feats + absent.reshape(1, 1, 1, 1) * model.no_obj_embed_spatial.reshape(1, -1, 1, 1)
        # SAM2VideoPredictor stores every memory as bfloat16 and attends to it in float32 (R10 of
        # tools/references/video_track_check.py): rounded here, in the graph, so that a tracker
        # keeps the memory where the model runs and never touches it.
        feats = feats.to(torch.bfloat16).to(torch.float32)
        # maskmem_tpos_enc, as an output of the graph (the + 0 keeps it a computed output: a
        # graph output that is a bare constant loses its name in the exporter)
        temporal_code = model.maskmem_tpos_enc + torch.zeros_like(object_score_logits).reshape(1, 1, 1, 1)
        return feats, pos.flatten(2).permute(2, 0, 1), temporal_code


# ----------------------------------------------------------------------------------------------


def sha256(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def export(module, args, path, input_names, output_names, dynamic_axes):
    tmp = path + ".tmp"
    with torch.no_grad():
        torch.onnx.export(module, args, tmp, input_names=input_names, output_names=output_names,
                          dynamic_axes=dynamic_axes, opset_version=OPSET, dynamo=False,
                          do_constant_folding=True)
    os.replace(tmp, path)


def name_outputs(path, names):
    """Gives the graph's outputs their contract names: the exporter renames an output that is a
    parameter passed through (`temporal_code` came out as `925`)."""
    import onnx

    model = onnx.load(path)
    renames = {o.name: n for o, n in zip(model.graph.output, names) if o.name != n}
    if not renames:
        return
    for node in model.graph.node:
        for i, o in enumerate(node.output):
            if o in renames:
                node.output[i] = renames[o]
        for i, o in enumerate(node.input):
            if o in renames:
                node.input[i] = renames[o]
    for init in model.graph.initializer:
        if init.name in renames:
            init.name = renames[init.name]
    for o in model.graph.output:
        if o.name in renames:
            o.name = renames[o.name]
    onnx.checker.check_model(model)
    onnx.save(model, path)


def weights_sha256(model):
    """A hash of the weights' values (names in order, dtypes, shapes, bytes): what the reference run
    depends on, independent of how torch.save lays the checkpoint out."""
    h = hashlib.sha256()
    for name, tensor in sorted(model.state_dict().items()):
        t = tensor.detach().cpu().contiguous()
        h.update(f"{name} {t.dtype} {tuple(t.shape)}\n".encode())
        h.update(t.reshape(-1).view(torch.uint8).numpy().tobytes() if t.numel() else b"")
    return h.hexdigest()


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", required=True, help="the folder to write the four modules, the "
                        "checkpoint (random weights) and manifest.json into (created)")
    parser.add_argument("--checkpoint", help="export these weights (a SAM2.1 hiera-tiny checkpoint, "
                        "Meta's sam2.1_hiera_tiny.pt) instead of seeded random ones")
    args = parser.parse_args()
    os.makedirs(args.out, exist_ok=True)
    torch.set_num_threads(os.cpu_count() or 1)

    t0 = time.time()
    if args.checkpoint:
        from sam2.build_sam import build_sam2_video_predictor

        checkpoint = os.path.abspath(args.checkpoint)
        torch.manual_seed(SEED)  # as for random weights, so that the files are the same either way
        model = build_sam2_video_predictor(CONFIG, ckpt_path=checkpoint, device="cpu").eval()
        say(f"SAM2VideoPredictor built with {checkpoint} ({time.time() - t0:.0f} s)")
    else:
        model = build_random_video_predictor(SEED)
        checkpoint = os.path.join(args.out, f"{NAME}_video.pt")
        torch.save({"model": model.state_dict()}, checkpoint + ".tmp")
        os.replace(checkpoint + ".tmp", checkpoint)
        say(f"random-weight SAM2VideoPredictor checkpoint written ({time.time() - t0:.0f} s)")

    files = {}
    g = torch.Generator().manual_seed(0)
    image = torch.randn(1, 3, 1024, 1024, generator=g)

    t = time.time()
    path = os.path.join(args.out, "image_encoder.onnx")
    export(ImageEncoder(model), (image,), path, ["image"],
           ["pix_feat", "high_res_feat0", "high_res_feat1", "vision_feats", "vision_pos_embed"],
           None)
    files["image_encoder"] = path
    with torch.no_grad():
        pix, hr0, hr1, vf, vpos = ImageEncoder(model)(image)
    say(f"image_encoder.onnx ({time.time() - t:.0f} s)")

    t = time.time()
    n, m = 3, 2
    path = os.path.join(args.out, "memory_attention.onnx")
    export(MemoryAttention(model),
           (vf, vpos, torch.randn(n, 256, generator=g), torch.randn(m, 64, 64, 64, generator=g),
            torch.randn(m * 4096 + 4 * n, 1, 64, generator=g), torch.rand(n, generator=g)),
           path,
           ["current_vision_feat", "current_vision_pos_embed", "memory_0", "memory_1",
            "memory_pos_embed", "obj_ptr_tpos"],
           ["image_embed"],
           {"memory_0": {0: "n"}, "memory_1": {0: "m"}, "memory_pos_embed": {0: "mem_tokens"},
            "obj_ptr_tpos": {0: "n"}})
    files["memory_attention"] = path
    say(f"memory_attention.onnx ({time.time() - t:.0f} s)")

    t = time.time()
    path = os.path.join(args.out, "image_decoder.onnx")
    export(ImageDecoder(model),
           (torch.tensor([[[500.0, 400.0], [0.0, 0.0]]]), torch.tensor([[1.0, -1.0]]), vf, hr0,
            hr1, torch.zeros(1, 1, 256, 256), torch.zeros(1), torch.ones(1)),
           path,
           ["point_coords", "point_labels", "image_embed", "high_res_feats_0", "high_res_feats_1",
            "mask_input", "has_mask_input", "multimask_output"],
           ["obj_ptr", "mask_for_mem", "pred_mask", "object_score_logits"],
           {"point_coords": {1: "N"}, "point_labels": {1: "N"}})
    files["image_decoder"] = path
    say(f"image_decoder.onnx ({time.time() - t:.0f} s)")

    t = time.time()
    path = os.path.join(args.out, "memory_encoder.onnx")
    export(MemoryEncoder(model),
           (torch.randn(1, 1, 1024, 1024, generator=g), pix, torch.ones(1, 1), torch.zeros(1)),
           path, ["mask_for_mem", "pix_feat", "object_score_logits", "is_mask_from_pts"],
           ["maskmem_features", "maskmem_pos_enc", "temporal_code"], None)
    name_outputs(path, ["maskmem_features", "maskmem_pos_enc", "temporal_code"])
    files["memory_encoder"] = path
    say(f"memory_encoder.onnx ({time.time() - t:.0f} s)")

    manifest = {
        "model": NAME,
        "config": CONFIG,
        "builder": "sam2.build_sam.build_sam2_video_predictor",
        "seed": None if args.checkpoint else SEED,
        "torch": torch.__version__,
        "opset": OPSET,
        "checkpoint": os.path.relpath(checkpoint, args.out),
        "weights_sha256": weights_sha256(model),
        "files": {k: os.path.basename(v) for k, v in files.items()},
        "sha256": {k: sha256(v) for k, v in files.items()},
        "num_maskmem": model.num_maskmem,
        "max_obj_ptrs_in_encoder": model.max_obj_ptrs_in_encoder,
        "image_size": model.image_size,
        # written next by tools/references/video_reference.py --out DIR/reference
        # (tools/setup/setup-video.sh)
        "reference": "reference/reference.json",
    }
    with open(os.path.join(args.out, "manifest.json"), "w") as f:
        json.dump(manifest, f, indent=1)
    say(f"four modules exported in {time.time() - t0:.0f} s")


if __name__ == "__main__":
    main()
