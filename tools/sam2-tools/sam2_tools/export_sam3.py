"""sam2-export-sam3: SAM 3's image model as the ONNX graphs the library loads, in the layout
samexporter 0.5.0 writes (so one contract serves both): `sam3_image_encoder.onnx` (an RGB image
of 1008x1008 as uint8 CHW → three 256-channel feature levels and their positions),
`sam3_language_encoder.onnx` (32 token ids → the text features and their padding mask), and
`sam3_decoder.onnx` (features, text and exemplar boxes → 200 queries' boxes, logits and masks
and the presence logit).

Built with Meta's own code (PyPI sam3 0.1.4) on the CPU: its two constructors that ask for CUDA
and its `pin_memory` are worked around here, never in the install, and its complex-valued
rotary embedding is applied in real arithmetic (the same numbers) so the graphs need no complex
type. Without --checkpoint the weights are random, seeded, and their scores sharpened so that
Meta's 0.5 threshold keeps a few queries (`sharpen`, recorded in manifest.json); `--config
reduced` keeps every shape at the boundary (1008² input, 5184 image tokens, 32 text tokens,
200 queries, 288² masks, 256 channels) and the graph's structure, with thin and shallow inner
layers, for fast tests.

With --interactive the model is built with Meta's SAM 2-style click head as well
(`enable_inst_interactivity`), so that one encode serves both the concepts and the clicks: the
image encoder gains the click head's embedding in samexporter's SAM 2 names (`image_embed`
[1,256,72,72], `high_res_feats_0` [1,32,288,288], `high_res_feats_1` [1,64,144,144]) beside its
six outputs, and a fourth graph, `sam3_interactive_decoder.onnx`, takes them with points, boxes
and a mask as samexporter's SAM 2 decoder does (`InteractiveDecoder`). The concept graphs'
outputs are the same as without it.

    sam2-export-sam3 --out DIR [--config full|reduced] [--checkpoint sam3.pt] [--seed N]
                     [--vocab bpe_simple_vocab_16e6.txt.gz] [--interactive]
"""

import argparse
import hashlib
import importlib.util
import json
import os
import shutil
import sys
import time
import types

CONTEXT_LENGTH = 32
SIDE = 1008


def say(text):
    print(f"[export-sam3] {text}", flush=True)


def default_vocab():
    """CLIP's vocabulary from samexporter's wheel (sam3's wheel lacks it)."""
    spec = importlib.util.find_spec("samexporter")
    if spec is None or not spec.submodule_search_locations:
        return None
    path = os.path.join(list(spec.submodule_search_locations)[0], "assets", "bpe_simple_vocab_16e6.txt.gz")
    return path if os.path.exists(path) else None


def import_sam3_on_cpu():
    """Imports Meta's sam3 with what it needs on a machine without CUDA worked around."""
    import torch

    try:
        import triton  # noqa: F401  (the CUDA torch wheels bring it; its kernels are never run)
    except ImportError:
        edt = types.ModuleType("sam3.model.edt")
        edt.edt_triton = None
        sys.modules["sam3.model.edt"] = edt
    import sam3  # noqa: F401
    from sam3.model import decoder, position_encoding

    # The positional encoding warms a cache on "cuda" for sizes the image model never uses.
    sine_init = position_encoding.PositionEmbeddingSine.__init__

    def init_without_warmup(self, *args, **kwargs):
        kwargs["precompute_resolution"] = None
        return sine_init(self, *args, **kwargs)

    position_encoding.PositionEmbeddingSine.__init__ = init_without_warmup
    # The decoder fills its coordinate cache on "cuda".
    get_coords = decoder.TransformerDecoder._get_coords
    decoder.TransformerDecoder._get_coords = staticmethod(
        lambda h, w, device: get_coords(h, w, "cpu"))
    if not torch.cuda.is_available():
        torch.Tensor.pin_memory = lambda t, *a, **k: t
    return torch


# Inner sizes of the reduced configuration, by the class the builder makes and its argument.
REDUCED = {
    "ViT": {"embed_dim": 64, "depth": 2, "num_heads": 2, "mlp_ratio": 1.0, "global_att_blocks": (1,)},
    "VETextEncoder": {"width": 64, "heads": 2, "layers": 2},
    "TransformerEncoderFusion": {"num_layers": 1},
    "TransformerDecoder": {"num_layers": 2},
    "TransformerEncoderLayer": {"dim_feedforward": 64},
    "TransformerDecoderLayer": {"dim_feedforward": 64},
    "SequenceGeometryEncoder": {"num_layers": 1},
}


def reduce_builder(model_builder):
    """Makes the builder build the reduced configuration: each class it calls by name gets the
    smaller arguments above (the builder looks the classes up when it runs)."""
    for name, smaller in REDUCED.items():
        cls = getattr(model_builder, name)

        def make(*args, _cls=cls, _smaller=smaller, **kwargs):
            kwargs.update(_smaller)
            return _cls(*args, **kwargs)

        setattr(model_builder, name, make)
    # The scoring MLP's hidden width (the only MLP of the builder with 2048).
    mlp = model_builder.MLP

    def make_mlp(*args, **kwargs):
        if kwargs.get("hidden_dim") == 2048:
            kwargs["hidden_dim"] = 64
        return mlp(*args, **kwargs)

    model_builder.MLP = make_mlp


def real_rope(model):
    """The ViT's rotary embedding in real arithmetic: each (even, odd) pair of a head's channels
    is a complex number turned by the position's angle, as Meta's complex code computes it; the
    angles' cosines and sines are buffers of each attention block, made here from its own
    complex table."""
    import torch
    from sam3.model import vitdet

    for block in model.modules():
        if isinstance(block, vitdet.Attention) and getattr(block, "freqs_cis", None) is not None:
            block.register_buffer("rope_cos", block.freqs_cis.real.clone(), persistent=False)
            block.register_buffer("rope_sin", block.freqs_cis.imag.clone(), persistent=False)

    def apply_rope(self, q, k):
        if not self.use_rope:
            return q, k

        def turn(x):
            pairs = x.float().reshape(*x.shape[:-1], -1, 2)
            re, im = pairs[..., 0], pairs[..., 1]
            cos, sin = self.rope_cos, self.rope_sin
            turned = torch.stack((re * cos - im * sin, re * sin + im * cos), dim=-1)
            return turned.flatten(-2).type_as(x)

        return turn(q), turn(k)

    vitdet.Attention._apply_rope = apply_rope


def build(config, checkpoint, seed, vocab, sharpening=None, interactive=False):
    """Meta's image model, CPU-ready. Random weights (no checkpoint) are seeded and their scores
    sharpened (`sharpen`): afresh, or as `sharpening` (a manifest's record) says; the record is
    `model.export_sharpening` (None with a checkpoint, whose weights are never changed).

    `interactive` adds Meta's SAM 2-style click head. Meta's builder makes it after every part of
    the concept model and draws nothing from the random generator before then, so the concept
    model's random weights are the same with it or without it."""
    torch = import_sam3_on_cpu()
    from sam3 import model_builder

    if config == "reduced":
        reduce_builder(model_builder)
    torch.manual_seed(seed)
    model = model_builder.build_sam3_image_model(
        bpe_path=vocab, device="cpu", eval_mode=True, checkpoint_path=checkpoint,
        load_from_HF=False, enable_segmentation=True, enable_inst_interactivity=interactive)
    if checkpoint is None:
        # Two text-encoder parameters are made with torch.empty and never initialised.
        text = model.backbone.language_backbone.encoder
        generator = torch.Generator().manual_seed(seed + 1)
        with torch.no_grad():
            for p in (text.positional_embedding, text.text_projection):
                p.copy_(torch.randn(p.shape, generator=generator) * 0.01)
        if interactive:
            # Meta's second neck starts as a copy of the first (a checkpoint then loads its own
            # weights); random weights of its own make a click head wired to the wrong neck
            # visible in the check. Drawn from a generator of their own, after the rest.
            with torch.random.fork_rng(devices=[]):
                torch.manual_seed(seed + 2)
                for module in model.backbone.vision_backbone.sam2_convs.modules():
                    if isinstance(module, (torch.nn.Conv2d, torch.nn.ConvTranspose2d)):
                        module.reset_parameters()
    tensors = list(model.named_parameters())
    if interactive:  # the click head's random tables are buffers (the prompt encoder's)
        tensors += [(f"inst_interactive_predictor.{name}", b)
                    for name, b in model.inst_interactive_predictor.named_buffers()]
    for name, p in tensors:
        if p.is_floating_point() and not torch.isfinite(p).all():
            sys.exit(f"parameter {name} is not finite")
    real_rope(model)
    model.eval()
    model.export_sharpening = None
    if checkpoint is None:
        model.export_sharpening = sharpen(torch, model, sharpening)
    return torch, model


# The sharpened scores of random weights: a query's logit is SLOPE per standard deviation of its
# position along the direction in which the example's 200 queries differ most, 0 at CUT standard
# deviations above their mean, plus what is left of Meta's dot product with the prompt; the
# presence logit is PRESENCE on the example.
SLOPE = 32.0
CUT = 2.0
PRESENCE = 2.5


def sharpen(torch, model, record=None):
    """Random weights score every query near 0.5 (logits and presence logit near 0), so that
    Meta's 0.5 threshold keeps a coin toss. The last layers of the scoring head and of the
    presence head are moved so that a few queries score clearly above it and the rest clearly
    below; measured on the example the graphs are traced with (`example_inputs`) unless
    `record` (what this function returned before) gives the numbers. Returns the record.

    The scoring head (Meta's DotProductScoring) computes scale * hs_proj(h) . prompt_proj(p).
    With u the unit direction of the largest spread of the 200 queries' hs_proj(h) on the
    example, m and sd their positions' mean and standard deviation along it, hs_proj's bias
    loses (m + CUT sd) u and prompt_proj's output its component along u, which becomes the
    constant SLOPE / (scale sd): the logit is then SLOPE ((position - m) / sd - CUT) plus
    Meta's dot product without its u part (Meta clamps it to +-12 after). The presence head's
    last bias is shifted so that the example's presence logit is PRESENCE."""
    scoring = model.dot_prod_scoring
    presence = model.transformer.decoder.presence_token_head.layers[-1]
    if record is None:
        captured = {}
        hook = scoring.hs_proj.register_forward_hook(
            lambda module, inputs, output: captured.update(hs=output[-1, 0].detach().double()))
        _, _, decoder_inputs = example_inputs(torch, model)
        with torch.no_grad():
            presence_logit = Decoder.module(torch, model)(*decoder_inputs)[3]
        hook.remove()
        hs = captured["hs"]
        centred = hs - hs.mean(0)
        u = torch.linalg.svd(centred, full_matrices=False).Vh[0]
        if ((centred @ u) ** 3).mean() < 0:  # the longer tail above
            u = -u
        positions = hs @ u
        mean, sd = float(positions.mean()), float(positions.std(correction=0))
        record = {"slope": SLOPE, "cut": CUT, "mean": mean, "sd": sd,
                  "hs_proj_bias_shift": mean + CUT * sd,
                  "prompt_proj_constant": SLOPE / (scoring.scale * sd),
                  "presence_bias_shift": PRESENCE - float(presence_logit.reshape(-1)[0]),
                  "direction": [float(x) for x in u.float()]}
    u = torch.tensor(record["direction"], dtype=torch.float32)
    with torch.no_grad():
        scoring.hs_proj.bias.sub_(record["hs_proj_bias_shift"] * u)
        weight, bias = scoring.prompt_proj.weight, scoring.prompt_proj.bias
        weight.sub_(torch.outer(u, u @ weight))
        bias.sub_((u @ bias) * u).add_(record["prompt_proj_constant"] * u)
        presence.bias.add_(record["presence_bias_shift"])
    return record


class ImageEncoder:
    """uint8 RGB [3,1008,1008] → the backbone's three levels and their positions; with the click
    head (a model built interactive), its embedding too, from the same pass of the ViT: the
    second neck's levels as Meta's `Sam3Processor.set_image` and `Sam3Image.predict_inst` make
    them (`conv_s0` on the 288² level, `conv_s1` on the 144² level, `no_mem_embed` added to the
    72² level)."""

    @staticmethod
    def module(torch, model):
        predictor = model.inst_interactive_predictor

        class Wrapped(torch.nn.Module):
            def __init__(self):
                super().__init__()
                self.backbone = model.backbone
                self.clicks = predictor.model if predictor is not None else None

            def forward(self, image):
                x = image.float().unsqueeze(0) / 255.0
                x = (x - 0.5) / 0.5
                out = self.backbone._forward_image_no_act_ckpt(x)
                pos, fpn = out["vision_pos_enc"], out["backbone_fpn"]
                concepts = (pos[0], pos[1], pos[2], fpn[0], fpn[1], fpn[2])
                if self.clicks is None:
                    return concepts
                second = out["sam2_backbone_out"]["backbone_fpn"]
                decoder = self.clicks.sam_mask_decoder
                embed = second[2] + self.clicks.no_mem_embed.reshape(1, -1, 1, 1)
                return (*concepts, decoder.conv_s0(second[0]), decoder.conv_s1(second[1]), embed)

        return Wrapped()

    @staticmethod
    def outputs_of(model):
        if model.inst_interactive_predictor is None:
            return ImageEncoder.outputs
        return ImageEncoder.outputs + ImageEncoder.click_outputs

    inputs = ["image"]
    outputs = ["vision_pos_enc_0", "vision_pos_enc_1", "vision_pos_enc_2",
               "backbone_fpn_0", "backbone_fpn_1", "backbone_fpn_2"]
    # samexporter's SAM 2 names and order.
    click_outputs = ["high_res_feats_0", "high_res_feats_1", "image_embed"]


class LanguageEncoder:
    """int64 token ids [1,32] → padding mask (True = pad), text features [32,1,256], and the
    token embeddings [32,1,width]."""

    @staticmethod
    def module(torch, model):
        text = model.backbone.language_backbone

        class Wrapped(torch.nn.Module):
            def __init__(self):
                super().__init__()
                self.text = text

            def forward(self, tokens):
                mask = tokens == 0
                embeds = self.text.encoder.token_embedding(tokens)
                _, memory = self.text.encoder(tokens)
                memory = self.text.resizer(memory.transpose(0, 1))
                return mask, memory, embeds.transpose(0, 1)

        return Wrapped()

    inputs = ["tokens"]
    outputs = ["text_attention_mask", "text_memory", "text_embeds"]


MAX_BOXES = 8


class Decoder:
    """The features, the text and up to MAX_BOXES exemplar boxes → 200 queries' boxes (cx, cy, w,
    h in [0, 1]), logits, mask logits at 288² and the presence logit: Meta's
    `forward_grounding` whole (exemplar encoder, fusion encoder, decoder, scoring, masks).
    Boxes are cx, cy, w, h normalised to the image; a box slot marked True in `box_masks` is
    empty."""

    @staticmethod
    def module(torch, model):
        from sam3.model.data_misc import FindStage
        from sam3.model.geometry_encoders import Prompt

        class Wrapped(torch.nn.Module):
            def __init__(self):
                super().__init__()
                self.model = model

            def forward(self, vision_pos_enc_0, vision_pos_enc_1, vision_pos_enc_2,
                        backbone_fpn_0, backbone_fpn_1, backbone_fpn_2,
                        language_mask, language_features, box_coords, box_labels, box_masks):
                find = FindStage(
                    img_ids=torch.zeros(1, dtype=torch.long),
                    text_ids=torch.zeros(1, dtype=torch.long),
                    input_boxes=None, input_boxes_mask=None, input_boxes_label=None,
                    input_points=None, input_points_mask=None)
                backbone_out = {
                    "vision_features": backbone_fpn_2,
                    "vision_pos_enc": [vision_pos_enc_0, vision_pos_enc_1, vision_pos_enc_2],
                    "backbone_fpn": [backbone_fpn_0, backbone_fpn_1, backbone_fpn_2],
                    "language_features": language_features,
                    "language_mask": language_mask,
                }
                # One point slot, always empty: an empty point sequence would give the graph
                # tensors of size 0, which the exporter folds into shapes that do not meet.
                prompt = Prompt(box_embeddings=box_coords, box_mask=box_masks,
                                box_labels=box_labels,
                                point_embeddings=torch.zeros(1, 1, 2),
                                point_mask=torch.ones(1, 1, dtype=torch.bool),
                                point_labels=torch.ones(1, 1, dtype=torch.long))
                out = self.model.forward_grounding(backbone_out=backbone_out, find_input=find,
                                                   find_target=None, geometric_prompt=prompt)
                return (out["pred_boxes"], out["pred_logits"], out["pred_masks"],
                        out["presence_logit_dec"])

        return Wrapped()

    inputs = ["vision_pos_enc_0", "vision_pos_enc_1", "vision_pos_enc_2",
              "backbone_fpn_0", "backbone_fpn_1", "backbone_fpn_2",
              "language_mask", "language_features", "box_coords", "box_labels", "box_masks"]
    outputs = ["pred_boxes", "pred_logits", "pred_masks", "presence_logit_dec"]


class InteractiveDecoder:
    """SAM 3's SAM 2-style click head (Meta's prompt encoder and mask decoder of the tracker) in
    the contract of samexporter 0.5.0's SAM 2 decoder, at SAM 3's sizes: the image encoder's
    `image_embed` [1,256,72,72], `high_res_feats_0` [1,32,288,288] and `high_res_feats_1`
    [1,64,144,144]; `point_coords` [L,N,2] (x, y in the 1008x1008 input frame), `point_labels`
    [L,N] (1 positive, 0 negative, 2 and 3 a box's top-left and bottom-right corners, -1
    padding), `mask_input` [L,1,288,288] (low-resolution logits) weighted by `has_mask_input` [1]
    → `masks` [L,3,288,288] (the three multimask candidates' low-resolution logits, clamped to
    ±32) and `iou_predictions` [L,3]. Meta's prompt encoder appends one padding point, as it does
    for points without a separate box."""

    @staticmethod
    def module(torch, model):
        clicks = model.inst_interactive_predictor.model

        class Wrapped(torch.nn.Module):
            def __init__(self):
                super().__init__()
                self.prompt_encoder = clicks.sam_prompt_encoder
                self.mask_decoder = clicks.sam_mask_decoder

            def forward(self, image_embed, high_res_feats_0, high_res_feats_1, point_coords,
                        point_labels, mask_input, has_mask_input):
                encoder = self.prompt_encoder
                sparse = encoder._embed_points(point_coords, point_labels, pad=True)
                no_mask = encoder.no_mask_embed.weight.reshape(1, -1, 1, 1)
                dense = (has_mask_input * encoder.mask_downscaling(mask_input)
                         + (1 - has_mask_input) * no_mask)
                masks, iou, _, _ = self.mask_decoder.predict_masks(
                    image_embeddings=image_embed, image_pe=encoder.get_dense_pe(),
                    sparse_prompt_embeddings=sparse, dense_prompt_embeddings=dense,
                    repeat_image=False, high_res_features=[high_res_feats_0, high_res_feats_1])
                # Meta's multimask output: the three candidates after the single-mask token.
                return torch.clamp(masks[:, 1:], -32.0, 32.0), iou[:, 1:]

        return Wrapped()

    @staticmethod
    def example(torch, features):
        """What the graph is traced with: a box and a positive and a negative click."""
        coords = torch.tensor([[[300.0, 250.0], [700.0, 650.0], [500.0, 450.0], [320.0, 900.0]]])
        labels = torch.tensor([[2.0, 3.0, 1.0, 0.0]])
        mask = torch.randn(1, 1, 288, 288, generator=torch.Generator().manual_seed(2))
        return (*features, coords, labels, mask, torch.tensor([1.0]))

    inputs = ["image_embed", "high_res_feats_0", "high_res_feats_1", "point_coords",
              "point_labels", "mask_input", "has_mask_input"]
    outputs = ["masks", "iou_predictions"]
    # samexporter's dynamic axes.
    dynamic_axes = {"point_coords": {0: "num_labels", 1: "num_points"},
                    "point_labels": {0: "num_labels", 1: "num_points"},
                    "mask_input": {0: "num_labels"},
                    "has_mask_input": {0: "num_labels"}}


def roi_align_translation():
    """torchvision's roi_align as ONNX's RoiAlign (the exporter's own translation takes other
    arguments than torchvision 0.25 gives it): boxes are rows of (image index, x1, y1, x2, y2);
    a sampling ratio of -1 (adaptive) is ONNX's 0; `aligned` is the half-pixel convention."""
    import onnx
    from onnxscript import opset18 as op

    def roi_align(input, rois, spatial_scale: float = 1.0, pooled_height: int = 7,
                  pooled_width: int = 7, sampling_ratio: int = -1, aligned: bool = False):
        index = op.Cast(op.Squeeze(op.Slice(rois, op.Constant(value_ints=[0]), op.Constant(value_ints=[1]),
                                            op.Constant(value_ints=[1])), op.Constant(value_ints=[1])),
                        to=onnx.TensorProto.INT64)
        corners = op.Slice(rois, op.Constant(value_ints=[1]), op.Constant(value_ints=[5]),
                           op.Constant(value_ints=[1]))
        return op.RoiAlign(input, corners, index,
                           coordinate_transformation_mode="half_pixel" if aligned else "output_half_pixel",
                           mode="avg", output_height=pooled_height, output_width=pooled_width,
                           sampling_ratio=max(sampling_ratio, 0), spatial_scale=spatial_scale)

    return roi_align


def export(torch, module, example, path, inputs, outputs, dynamo=False, dynamic_axes=None):
    """One graph. The encoders go through the TorchScript exporter; the decoder, whose exemplar
    encoder uses torchvision's roi_align and shapes that depend on the prompt, through
    torch.export, with Meta's code told it is being compiled (it then takes its cached box
    coordinates and skips checks that read tensor values) for the time of the export."""
    started = time.time()
    module = module.eval()
    with torch.no_grad():
        if dynamo:
            compiling = torch.compiler.is_dynamo_compiling
            torch.compiler.is_dynamo_compiling = lambda: True
            try:
                program = torch.onnx.export(
                    module, example, input_names=inputs, output_names=outputs, opset_version=18,
                    dynamo=True, external_data=False,
                    custom_translation_table={torch.ops.torchvision.roi_align.default: roi_align_translation()})
            finally:
                torch.compiler.is_dynamo_compiling = compiling
            program.save(path)
        else:
            torch.onnx.export(module, example, path, input_names=inputs, output_names=outputs,
                              opset_version=18, dynamo=False, do_constant_folding=True,
                              dynamic_axes=dynamic_axes)
    say(f"{os.path.basename(path)} ({os.path.getsize(path) / 1e6:.1f} MB, {time.time() - started:.0f} s)")


def example_inputs(torch, model):
    """An image, a phrase and one exemplar box: what the graphs are traced with."""
    image = torch.randint(0, 256, (3, SIDE, SIDE), dtype=torch.uint8,
                          generator=torch.Generator().manual_seed(1))
    tokens = torch.zeros(1, CONTEXT_LENGTH, dtype=torch.int64)
    tokens[0, :6] = torch.tensor([49406, 320, 4481, 1228, 2840, 49407])
    with torch.no_grad():
        features = ImageEncoder.module(torch, model).eval()(image)[:len(ImageEncoder.outputs)]
        mask, memory, _ = LanguageEncoder.module(torch, model).eval()(tokens)
    boxes = torch.zeros(MAX_BOXES, 1, 4)
    boxes[0, 0] = torch.tensor([0.5, 0.5, 0.2, 0.3])
    labels = torch.ones(MAX_BOXES, 1, dtype=torch.int64)
    empty = torch.ones(1, MAX_BOXES, dtype=torch.bool)
    empty[0, 0] = False
    return image, tokens, (*features, mask, memory, boxes, labels, empty)


def main(argv=None):
    parser = argparse.ArgumentParser(prog="sam2-export-sam3", description=__doc__.splitlines()[0])
    parser.add_argument("--out", required=True)
    parser.add_argument("--config", choices=["full", "reduced"], default="full")
    parser.add_argument("--checkpoint")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--vocab", default=None)
    parser.add_argument("--interactive", action="store_true",
                        help="also the SAM 2-style click head: three more image encoder outputs "
                             "and sam3_interactive_decoder.onnx")
    args = parser.parse_args(argv)
    vocab = args.vocab or default_vocab()
    if vocab is None:
        sys.exit("CLIP's vocabulary (bpe_simple_vocab_16e6.txt.gz) was not found: give --vocab")
    os.makedirs(args.out, exist_ok=True)
    started = time.time()
    torch, model = build(args.config, args.checkpoint, args.seed, vocab,
                         interactive=args.interactive)
    say(f"built the {args.config} image model ({sum(p.numel() for p in model.parameters()) / 1e6:.1f} M "
        f"parameters, {time.time() - started:.0f} s)")
    image, tokens, decoder_inputs = example_inputs(torch, model)
    export(torch, ImageEncoder.module(torch, model), (image,),
           os.path.join(args.out, "sam3_image_encoder.onnx"), ImageEncoder.inputs,
           ImageEncoder.outputs_of(model))
    for part, example, name, dynamo in [
            (LanguageEncoder, (tokens,), "sam3_language_encoder.onnx", False),
            (Decoder, decoder_inputs, "sam3_decoder.onnx", True)]:
        export(torch, part.module(torch, model), example, os.path.join(args.out, name),
               part.inputs, part.outputs, dynamo)
    if args.interactive:
        with torch.no_grad():
            features = ImageEncoder.module(torch, model).eval()(image)[len(ImageEncoder.outputs):]
        high_res_0, high_res_1, embed = features
        export(torch, InteractiveDecoder.module(torch, model),
               InteractiveDecoder.example(torch, (embed, high_res_0, high_res_1)),
               os.path.join(args.out, "sam3_interactive_decoder.onnx"), InteractiveDecoder.inputs,
               InteractiveDecoder.outputs, dynamic_axes=InteractiveDecoder.dynamic_axes)
    manifest = {"config": args.config, "seed": args.seed, "checkpoint": args.checkpoint,
                "vocab_sha256": hashlib.sha256(open(vocab, "rb").read()).hexdigest(),
                "sharpening": model.export_sharpening}
    if args.interactive:  # only then, so that a plain export's manifest is as it was
        manifest["interactive"] = True
    with open(os.path.join(args.out, "manifest.json"), "w") as f:
        json.dump(manifest, f, indent=1)
    # The vocabulary travels with the graphs, as exports carry it: the library finds it beside
    # them (an export is then one folder to give).
    shutil.copyfile(vocab, os.path.join(args.out, "bpe_simple_vocab_16e6.txt.gz"))


if __name__ == "__main__":
    main()
