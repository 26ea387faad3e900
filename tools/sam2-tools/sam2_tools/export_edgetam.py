"""EdgeTAM exported to ONNX (issue 31): an image encoder/decoder pair the image API reads, and the
four video modules the tracker reads, from EdgeTAM's checkpoint or from seeded random weights.

EdgeTAM (Meta, CVPR 2025; PyPI `edgetam-dimos` 1.0.1, a fork of Meta's `sam2` package) keeps
SAM2's design, prompt encoder and mask decoder, with a RepViT-M1 image encoder, a spatial
perceiver that compresses each memory frame's 64x64 map to 512 tokens, and two memory-attention
layers. The network is built as EdgeTAM's `build_sam2_video_predictor` builds it from
configs/edgetam.yaml (edgetam_model.py: seeded random weights with the memory attention's
cross attention scaled, so that the memory matters, and larger mask logits; or `--checkpoint PATH`, trained weights
on a machine that can download them) and saved as an ordinary checkpoint (`edgetam.pt`), so that
tools/references/edgetam_reference.py runs EdgeTAM's own predictors on exactly these weights.

* The image pair: ONNX Runtime 1.31.1's SAM2 tools (inside the onnxruntime wheel, as
  export_real.py runs them for SAM2) on the EdgeTAM model object, unmodified: their
  wrappers call only the modules EdgeTAM shares with SAM2 (image_encoder, conv_s0/s1, no_mem_embed,
  the prompt encoder and the mask decoder), so the files have the contract of ONNX Runtime's SAM2
  exports, tensor for tensor (`edgetam_image_encoder.onnx`, `edgetam_image_decoder.onnx`,
  `edgetam_image_decoder_multi.onnx`).
* The video modules: SAM2's four-module contract (docs/video.md), with
  export_video.py's wrappers for the image encoder and the decoder (the same SAM2
  code paths), and EdgeTAM's own
  memory attention and memory encoder below. The perceiver is folded into the memory encoder,
  so a memory frame is 512 tokens of 64 channels (`maskmem_features` [1,512,64], its position
  encoding `maskmem_pos_enc` [512,1,64]) where SAM2's is a 64x64 map of 4096; memory attention
  takes `memory_1` [m,512,64] and `memory_pos_embed` [m*512 + 4n,1,64]. EdgeTAM's config adds no
  temporal encoding to the object pointers (add_tpos_enc_to_obj_ptrs false), so memory
  attention has no `obj_ptr_tpos` input; it has no no-object spatial embedding either, so the
  memory encoder's `object_score_logits` input changes nothing.

Runs where EdgeTAM's `sam2` package is installed (tools/setup/setup-edgetam.sh keeps such a venv);
deterministic (same seed, same files).

    sam2-export-edgetam --out DIR [--checkpoint edgetam.pt]
"""

import argparse
import json
import os
import sys
import time
import types

import torch
import torch.nn.functional as F

from sam2_tools import edgetam_model
from sam2_tools.export_real import classic_onnx_exporter, onnxruntime_sam2_tools
from sam2_tools.export_video import (  # SAM2's wrappers, for the modules EdgeTAM shares
    ImageDecoder,
    ImageEncoder,
    export,
    name_outputs,
    rope_attention,
    rotate,
    sha256,
)

OPSET = 17


def say(msg):
    print(f"[export-edgetam] {msg}", file=sys.stderr, flush=True)


# ----------------------------------------------------------------------------------------------
# image_decoder: export_video.py's wrapper, with a traceable point embedding


def embed_points_traceable(pe, points, labels, pad):
    """EdgeTAM's PromptEncoder._embed_points (SAM2's first one) in torch.where form: EdgeTAM's
    assigns through boolean masks (`embedding[labels == -1] = 0`), which the tracer records with
    the example's point count, so the graph fails for any other. Same arithmetic: a padding
    point (0,0) labelled -1 appended, coordinates + 0.5 sine-encoded, label -1 -> the
    not-a-point embedding alone, labels 0-3 -> + their embedding."""
    points = points + 0.5
    if pad:
        points = torch.cat([points, torch.zeros_like(points[:, :1])], dim=1)
        labels = torch.cat([labels, -torch.ones_like(labels[:, :1])], dim=1)
    embedding = pe.pe_layer.forward_with_coords(points, pe.input_image_size)
    lab = labels.unsqueeze(-1)
    embedding = torch.where(lab == -1, torch.zeros_like(embedding) + pe.not_a_point_embed.weight,
                            embedding)
    for i, point_embedding in enumerate(pe.point_embeddings):
        embedding = torch.where(lab == i, embedding + point_embedding.weight, embedding)
    return embedding


# ----------------------------------------------------------------------------------------------
# memory_attention


def cos_sin(cis):
    return cis.real.contiguous(), cis.imag.contiguous()


class MemoryAttention(torch.nn.Module):
    """SAM2Base._prepare_memory_conditioned_features from "Step 2" (the memory and its position
    encoding already gathered by the caller) + EdgeTAM's MemoryAttention.forward: self attention
    with rotary encoding on the 64x64 grid (RoPEAttention: its 32x32 table of the config is
    recomputed for 4096 queries on the first call), cross attention RoPEAttentionv2: queries
    rotated on the 64x64 grid, in every memory frame the 256 global latents unrotated and the
    256 2D latents rotated on their 16x16 grid, object pointer tokens unrotated."""

    def __init__(self, model):
        super().__init__()
        from sam2.modeling.sam.transformer import RoPEAttention, RoPEAttentionv2

        self.model = model
        ma = model.memory_attention
        for lyr in ma.layers:
            assert lyr.pos_enc_at_cross_attn_keys and not lyr.pos_enc_at_cross_attn_queries
            assert not lyr.pos_enc_at_attn
            assert isinstance(lyr.self_attn, RoPEAttention)
            assert isinstance(lyr.cross_attn_image, RoPEAttentionv2)
        assert ma.pos_enc_at_input and ma.batch_first
        assert not model.add_tpos_enc_to_obj_ptrs
        perceiver = model.spatial_perceiver
        self.tokens_per_frame = perceiver.num_latents + perceiver.num_latents_2d
        layer = ma.layers[0]
        cos_self, sin_self = cos_sin(layer.self_attn.compute_cis(end_x=64, end_y=64))
        cos_q, sin_q = cos_sin(layer.cross_attn_image.freqs_cis_q.cpu())
        cos_2d, sin_2d = cos_sin(layer.cross_attn_image.freqs_cis_k.cpu())
        assert cos_q.shape[0] == 4096 and cos_2d.shape[0] == perceiver.num_latents_2d
        # one memory frame's key table: the global latents first (unrotated: cos 1, sin 0),
        # then the 2D latents (apply_rotary_enc_v2: the first N/repeat - 256 tokens of each
        # frame are left as they are)
        unrotated = self.tokens_per_frame - cos_2d.shape[0]
        half = cos_2d.shape[1]
        self.register_buffer("cos_self", cos_self)
        self.register_buffer("sin_self", sin_self)
        self.register_buffer("cos_q", cos_q)
        self.register_buffer("sin_q", sin_q)
        self.register_buffer("cos_frame", torch.cat([torch.ones(unrotated, half), cos_2d]))
        self.register_buffer("sin_frame", torch.cat([torch.zeros(unrotated, half), sin_2d]))

    def forward(self, current_vision_feat, current_vision_pos_embed, memory_0, memory_1,
                memory_pos_embed):
        model = self.model
        C = model.hidden_dim  # 256
        mem_dim = model.mem_dim  # 64
        pix = current_vision_feat - model.no_mem_embed.reshape(1, -1, 1, 1)
        curr = pix.flatten(2).permute(2, 0, 1)  # [4096,1,256]
        curr_pos = current_vision_pos_embed
        # memory: m frames of 512 tokens, then the n pointers split in C // mem_dim tokens each
        spatial = memory_1.reshape(-1, 1, mem_dim)  # [m*512,1,64]
        ptrs = memory_0.reshape(-1, 1, C // mem_dim, mem_dim).permute(0, 2, 1, 3)
        ptrs = ptrs.reshape(-1, 1, mem_dim)  # [4n,1,64]
        memory = torch.cat([spatial, ptrs], dim=0)
        memory_pos = memory_pos_embed
        half = self.cos_frame.shape[-1]
        frames = torch.zeros_like(memory_1[:, :, :1])  # [m,512,1]
        ptr_tokens = torch.zeros_like(ptrs[:, 0, :1])  # [4n,1]
        cos_k = torch.cat([(frames + self.cos_frame).reshape(-1, half),
                           ptr_tokens.expand(-1, half) + 1.0], dim=0)
        sin_k = torch.cat([(frames + self.sin_frame).reshape(-1, half),
                           ptr_tokens.expand(-1, half)], dim=0)

        ma = model.memory_attention
        output = curr + 0.1 * curr_pos
        output = output.transpose(0, 1)
        memory = memory.transpose(0, 1)
        memory_pos = memory_pos.transpose(0, 1)
        for layer in ma.layers:
            tgt2 = layer.norm1(output)
            tgt2 = rope_attention(layer.self_attn, tgt2, tgt2, tgt2,
                                  self.cos_self, self.sin_self, self.cos_self, self.sin_self)
            output = output + tgt2
            tgt2 = layer.norm2(output)
            tgt2 = rope_attention(layer.cross_attn_image, tgt2, memory + memory_pos, memory,
                                  self.cos_q, self.sin_q, cos_k, sin_k)
            output = output + tgt2
            tgt2 = layer.norm3(output)
            tgt2 = layer.linear2(layer.activation(layer.linear1(tgt2)))
            output = output + tgt2
        output = ma.norm(output).transpose(0, 1)  # [4096,1,256]
        return output.permute(1, 2, 0).reshape(1, C, 64, 64)


# ----------------------------------------------------------------------------------------------
# memory_encoder


class MemoryEncoder(torch.nn.Module):
    """SAM2Base._encode_new_memory for one object, from mask_for_mem (the decoder's
    sigmoid(logits) * 20 - 10), with EdgeTAM's spatial perceiver at its end: 256 global latents
    (position encoding zero) and 256 2D latents, one per 4x4 window of the 64x64 map (position
    encoding: the sine encoding of their 16x16 grid), normed; then rounded to bfloat16 as the
    video predictor stores every memory."""

    def __init__(self, model):
        super().__init__()
        self.model = model
        assert model.binarize_mask_from_pts_for_mem_enc
        assert model.no_obj_embed_spatial is None and model.spatial_perceiver is not None

    def forward(self, mask_for_mem, pix_feat, object_score_logits, is_mask_from_pts):
        model = self.model
        scale, bias = model.sigmoid_scale_for_mem_enc, model.sigmoid_bias_for_mem_enc
        binary = (mask_for_mem > scale * 0.5 + bias).float() * scale + bias
        mask = torch.where(is_mask_from_pts.reshape(1, 1, 1, 1) > 0.5, binary, mask_for_mem)
        out = model.memory_encoder(pix_feat, mask, skip_mask_sigmoid=True)
        feats, pos = model.spatial_perceiver(out["vision_features"], out["vision_pos_enc"][0])
        feats = feats.to(torch.bfloat16).to(torch.float32)  # [1,512,64]
        temporal_code = model.maskmem_tpos_enc + torch.zeros_like(object_score_logits).reshape(1, 1, 1, 1)
        return feats, pos.permute(1, 0, 2), temporal_code


# ----------------------------------------------------------------------------------------------
# the image pair, by ONNX Runtime's SAM2 tools


def export_image_pair(model, out_dir):
    export_image_encoder_onnx, export_decoder_onnx = onnxruntime_sam2_tools()

    encoder = os.path.join(out_dir, f"{edgetam_model.NAME}_image_encoder.onnx")
    decoders = {False: os.path.join(out_dir, f"{edgetam_model.NAME}_image_decoder.onnx"),
                True: os.path.join(out_dir, f"{edgetam_model.NAME}_image_decoder_multi.onnx")}
    # torch.onnx.export leaves a module in its wrapper's mode, and ONNX Runtime's wrappers are
    # built in training mode: after each call the whole model is in training mode, where a
    # forward pass (theirs, or ours next) would update RepViT's BatchNorm statistics. Back to
    # eval before every call.
    with classic_onnx_exporter(), torch.no_grad():
        model.eval()
        export_image_encoder_onnx(model, encoder + ".tmp")
        os.replace(encoder + ".tmp", encoder)
        for multi, path in decoders.items():
            model.eval()
            export_decoder_onnx(model, path + ".tmp", multi)
            os.replace(path + ".tmp", path)
    model.eval()
    return [{"exporter": "onnxruntime 1.31.1 transformers/models/sam2", "family": "onnxruntime",
             "encoder": os.path.basename(encoder), "decoder": os.path.basename(path),
             "multimask_decoder": multi} for multi, path in decoders.items()]


# ----------------------------------------------------------------------------------------------


def export_video_modules(model, out_dir):
    files = {}
    g = torch.Generator().manual_seed(0)
    image = torch.randn(1, 3, 1024, 1024, generator=g)
    tokens = model.spatial_perceiver.num_latents + model.spatial_perceiver.num_latents_2d

    t = time.time()
    path = os.path.join(out_dir, "image_encoder.onnx")
    export(ImageEncoder(model).eval(), (image,), path, ["image"],
           ["pix_feat", "high_res_feat0", "high_res_feat1", "vision_feats", "vision_pos_embed"],
           None)
    files["image_encoder"] = path
    with torch.no_grad():
        pix, hr0, hr1, vf, vpos = ImageEncoder(model).eval()(image)
    say(f"image_encoder.onnx ({time.time() - t:.0f} s)")

    t = time.time()
    n, m = 3, 2
    path = os.path.join(out_dir, "memory_attention.onnx")
    export(MemoryAttention(model).eval(),
           (vf, vpos, torch.randn(n, 256, generator=g), torch.randn(m, tokens, 64, generator=g),
            torch.randn(m * tokens + 4 * n, 1, 64, generator=g)),
           path,
           ["current_vision_feat", "current_vision_pos_embed", "memory_0", "memory_1",
            "memory_pos_embed"],
           ["image_embed"],
           {"memory_0": {0: "n"}, "memory_1": {0: "m"}, "memory_pos_embed": {0: "mem_tokens"}})
    files["memory_attention"] = path
    say(f"memory_attention.onnx ({time.time() - t:.0f} s)")

    t = time.time()
    path = os.path.join(out_dir, "image_decoder.onnx")
    pe = model.sam_prompt_encoder
    pe._embed_points = types.MethodType(embed_points_traceable, pe)
    export(ImageDecoder(model).eval(),
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
    path = os.path.join(out_dir, "memory_encoder.onnx")
    export(MemoryEncoder(model).eval(),
           (torch.randn(1, 1, 1024, 1024, generator=g), pix, torch.ones(1, 1), torch.zeros(1)),
           path, ["mask_for_mem", "pix_feat", "object_score_logits", "is_mask_from_pts"],
           ["maskmem_features", "maskmem_pos_enc", "temporal_code"], None)
    name_outputs(path, ["maskmem_features", "maskmem_pos_enc", "temporal_code"])
    files["memory_encoder"] = path
    say(f"memory_encoder.onnx ({time.time() - t:.0f} s)")
    return files


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", required=True, help="the folder to write the files, the "
                        "checkpoint (random weights) and manifest.json into (created)")
    parser.add_argument("--checkpoint", help="export these weights (EdgeTAM's edgetam.pt) instead of "
                        "seeded random ones")
    args = parser.parse_args()
    os.makedirs(args.out, exist_ok=True)
    torch.set_num_threads(os.cpu_count() or 1)

    t0 = time.time()
    model = edgetam_model.build(video=True, checkpoint=args.checkpoint)
    weights = edgetam_model.weights_sha256(model)
    if args.checkpoint:
        checkpoint = os.path.abspath(args.checkpoint)
    else:
        checkpoint = os.path.join(args.out, f"{edgetam_model.NAME}.pt")
        torch.save({"model": model.state_dict()}, checkpoint + ".tmp")
        os.replace(checkpoint + ".tmp", checkpoint)
        say(f"random-weight EdgeTAM checkpoint written ({time.time() - t0:.0f} s)")

    t = time.time()
    pairs = export_image_pair(model, args.out)
    for pair in pairs:
        pair.update(model=edgetam_model.NAME, config=edgetam_model.CONFIG,
                    checkpoint=os.path.relpath(checkpoint, args.out))
        for key in ("encoder", "decoder"):
            pair[key + "_sha256"] = sha256(os.path.join(args.out, pair[key]))
    say(f"image pair by ONNX Runtime's SAM2 tools ({time.time() - t:.0f} s)")

    files = export_video_modules(model, args.out)
    assert edgetam_model.weights_sha256(model) == weights, "the exports changed the weights"
    perceiver = model.spatial_perceiver
    manifest = {
        "family": "edgetam",
        "model": edgetam_model.NAME,
        "config": edgetam_model.CONFIG,
        "builder": "sam2.build_sam.build_sam2_video_predictor (edgetam-dimos 1.0.1)",
        "seed": None if args.checkpoint else edgetam_model.SEED,
        # the changes to the seeded weights (edgetam_model.py)
        "weight_scales": None if args.checkpoint else {
            "cross_attention_qk": edgetam_model.CROSS_ATTENTION_QK_SCALE,
            "cross_attention_v": edgetam_model.CROSS_ATTENTION_V_SCALE,
            "mask_logits": edgetam_model.MASK_LOGIT_SCALE,
            "object_score_bias": edgetam_model.OBJECT_SCORE_BIAS},
        "torch": torch.__version__,
        "opset": OPSET,
        "checkpoint": os.path.relpath(checkpoint, args.out),
        "weights_sha256": weights,
        # the image pair, in export_real.py's manifest format
        # (tools/references/real_reference.py)
        "pairs": pairs,
        # the four video modules
        "files": {k: os.path.basename(v) for k, v in files.items()},
        "sha256": {k: sha256(v) for k, v in files.items()},
        "memory_tokens_per_frame": perceiver.num_latents + perceiver.num_latents_2d,
        "memory_tokens": {"global_latents": perceiver.num_latents,
                          "latents_2d": perceiver.num_latents_2d},
        "obj_ptr_tpos": False,
        "num_maskmem": model.num_maskmem,
        "max_obj_ptrs_in_encoder": model.max_obj_ptrs_in_encoder,
        "image_size": model.image_size,
        # written next by tools/references/edgetam_reference.py --out DIR/reference
        # (tools/setup/setup-edgetam.sh)
        "reference": "reference/reference.json",
    }
    with open(os.path.join(args.out, "manifest.json"), "w") as f:
        json.dump(manifest, f, indent=1)
    say(f"EdgeTAM exported in {time.time() - t0:.0f} s")


if __name__ == "__main__":
    main()
