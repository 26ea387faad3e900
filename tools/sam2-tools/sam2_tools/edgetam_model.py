"""EdgeTAM built as its own code builds it, for export_edgetam.py and the project's references
(tools/references/edgetam_reference.py; run in EdgeTAM's venv, tools/setup/setup-edgetam.sh).

EdgeTAM's code is PyPI `edgetam-dimos` 1.0.1, a fork of Meta's `sam2` package (its top-level
package is `sam2` too) with `configs/edgetam.yaml`: a RepViT-M1 image encoder from timm, SAM2's
prompt encoder and mask decoder, two memory-attention layers whose cross attention
(RoPEAttentionv2) reads 512 tokens a memory frame, and the spatial perceiver
(`modeling/perceiver.py`) that makes those 512 tokens out of the memory encoder's 64x64 map.

Its TimmBackbone asks timm for `repvit_m1.dist_in1k` with pretrained=True, which downloads
ImageNet weights; `no_pretrained_download()` makes the one call it makes build the network
without them (the weights are ours, seeded, or a checkpoint's: loading a checkpoint replaces
every parameter anyway).
"""

import contextlib
import hashlib

import torch

CONFIG = "configs/edgetam.yaml"
NAME = "edgetam"
SEED = 20261202
# Random weights make attention nearly uniform (queries and keys of unit-variance features
# through N(0, 1/d) projections give logits of order 1 over thousands of keys), and what memory
# attention reads is a small part of the features it returns, so a tracker that attended to the
# wrong memory, or to none, would give nearly the same result. Memory attention's cross
# attention gets its q and k projections multiplied by CROSS_ATTENTION_QK_SCALE each (logits by
# its square), so that each query picks a few memory tokens, and its v projection by
# CROSS_ATTENTION_V_SCALE, so that what it picks weighs in the result: then dropping one memory
# frame changes the mask (tools/references/edgetam_reference.py measures by how much, with and
# without).
CROSS_ATTENTION_QK_SCALE = 4.0
CROSS_ATTENTION_V_SCALE = 3.0
# The mask decoder's random hypernetworks give low-res logits of about +-0.06: no pixel would
# reach the |logit| >= 1 over which the parity tests compare masks. Their last layers are
# multiplied by this, and so are the logits (of every mask token).
MASK_LOGIT_SCALE = 20.0
# With random weights the object-score head gives about -0.04 for every prompt and frame: every
# object absent, every mask SAM2's -1024 no-object fill, nothing left to compare. Its last bias is
# shifted by this much, so that the objects are present and their masks depend on the prompts
# and the memory.
OBJECT_SCORE_BIAS = 1.0


@contextlib.contextmanager
def no_pretrained_download():
    """timm's create_model with pretrained=False while EdgeTAM builds its backbone."""
    import sam2.modeling.backbones.timm as edgetam_timm

    original = edgetam_timm.create_model

    def create_model(*args, **kwargs):
        kwargs["pretrained"] = False
        return original(*args, **kwargs)

    edgetam_timm.create_model = create_model
    try:
        yield
    finally:
        edgetam_timm.create_model = original


def perceiver_per_object():
    """EdgeTAM's PerceiverResampler.forward_2d fails on a batch of more than one object (it
    `view`s an `expand`ed tensor: "view size is not compatible with input tensor's size and
    stride"), which the video predictor makes whenever it tracks two objects at once. Each
    object's memory depends on that object alone, so the 2D part is run object by object on
    the predictor's own code, and the results stacked. A batch of one (the export) is
    untouched."""
    from sam2.modeling.perceiver import PerceiverResampler

    original = PerceiverResampler.forward_2d
    if getattr(original, "per_object", False):
        return

    def forward_2d(self, x):
        if x.shape[0] == 1:
            return original(self, x)
        parts = [original(self, x[i:i + 1]) for i in range(x.shape[0])]
        return torch.cat([p[0] for p in parts]), torch.cat([p[1] for p in parts])

    forward_2d.per_object = True
    PerceiverResampler.forward_2d = forward_2d


def check_edgetam_package():
    """The `sam2` on the path must be EdgeTAM's (a venv with sam-2-uni has no perceiver)."""
    try:
        import sam2.modeling.perceiver  # noqa: F401
    except ImportError as e:
        raise SystemExit("this needs EdgeTAM's `sam2` package (edgetam-dimos, tools/setup/setup-edgetam.sh), "
                         f"not Meta's: {e}")


def seed_weights(model, seed):
    """export_real.py's recipe (the module's own initialisation under a fixed seed, then
    N(0, 0.02) noise on every all-zero floating parameter, so that biases and embeddings are not
    degenerate), then the cross-attention scales, the mask-logit scale and the object-score bias
    above."""
    generator = torch.Generator().manual_seed(seed + 1)
    with torch.no_grad():
        for _, p in sorted(model.named_parameters()):
            if p.dtype.is_floating_point and not torch.any(p != 0):
                p.copy_(torch.randn(p.shape, generator=generator) * 0.02)
        for layer in model.memory_attention.layers:
            attn = layer.cross_attn_image
            for proj, scale in ((attn.q_proj, CROSS_ATTENTION_QK_SCALE),
                                (attn.k_proj, CROSS_ATTENTION_QK_SCALE),
                                (attn.v_proj, CROSS_ATTENTION_V_SCALE)):
                proj.weight.mul_(scale)
                proj.bias.mul_(scale)
        for mlp in model.sam_mask_decoder.output_hypernetworks_mlps:
            mlp.layers[-1].weight.mul_(MASK_LOGIT_SCALE)
            mlp.layers[-1].bias.mul_(MASK_LOGIT_SCALE)
        model.sam_mask_decoder.pred_obj_score_head.layers[-1].bias.add_(OBJECT_SCORE_BIAS)
    return model


def build(video, checkpoint=None, seed=SEED):
    """EdgeTAM as `build_sam2_video_predictor` (video=True: SAM2VideoPredictor, with its hydra
    overrides) or `build_sam2` (video=False: SAM2Base, for SAM2ImagePredictor) builds it from
    configs/edgetam.yaml, on the CPU, with `checkpoint`'s weights or seeded random ones."""
    check_edgetam_package()
    from sam2.build_sam import build_sam2, build_sam2_video_predictor

    builder = build_sam2_video_predictor if video else build_sam2
    perceiver_per_object()
    torch.manual_seed(seed)
    with no_pretrained_download(), contextlib.redirect_stdout(None):
        # (EdgeTAM's build_sam2_video_predictor prints its progress on stdout)
        model = builder(CONFIG, ckpt_path=checkpoint, device="cpu")
    if checkpoint is None:
        seed_weights(model, seed)
    return model.eval()


def weights_sha256(model):
    """A hash of the weights' values (names in order, dtypes, shapes, bytes): what the reference
    depends on, independent of how torch.save lays the checkpoint out."""
    h = hashlib.sha256()
    for name, tensor in sorted(model.state_dict().items()):
        t = tensor.detach().cpu().contiguous()
        h.update(f"{name} {t.dtype} {tuple(t.shape)}\n".encode())
        h.update(t.reshape(-1).view(torch.uint8).numpy().tobytes() if t.numel() else b"")
    return h.hexdigest()
