"""SAM2's image encoder/decoder pairs, exported by samexporter and by ONNX Runtime's SAM2 tools from
a checkpoint, or from seeded random weights for the tests (issue 16).

No SAM2 checkpoint can be downloaded where this project is built, so this script builds the real
networks from Meta's SAM2 code (PyPI `sam-2-uni`, a repackage of facebookresearch/sam2) with
seeded random weights, writes them as an ordinary SAM2 checkpoint, and exports them with the
exporters users run:

* samexporter 0.5.0's `samexporter.export_sam2`, run as its own command line, unmodified
  (`<name>.encoder.onnx`, `<name>.decoder.onnx`);
* ONNX Runtime's SAM2 tools from the onnxruntime 1.31.1 wheel
  (`onnxruntime/transformers/models/sam2`: `export_image_encoder_onnx`, `export_decoder_onnx`),
  called as a library with the classic TorchScript exporter (their `torch.onnx.export` calls
  name no exporter, and torch 2.9+ defaults to dynamo, which their decoder does not support)
  (`<name>_image_encoder.onnx`, `<name>_image_decoder.onnx`, `<name>_image_decoder_multi.onnx`).

Runs where the exporters are installed (tools/setup/setup-real.sh keeps such a venv). Deterministic: the same seed gives the
same checkpoint and byte-identical exports. Writes `manifest.json` listing every pair.

    sam2-export-image --out DIR [--only sam2.1_hiera_tiny ...]

With real weights (a checkpoint from Meta's SAM2 release, on a machine that can download it), the
same exporters make the models a user runs:

    sam2-export-image --out DIR --only sam2.1_hiera_tiny --checkpoint sam2.1_hiera_tiny.pt
"""

import argparse
import contextlib
import functools
import hashlib
import json
import os
import subprocess
import sys
import time

import torch

SEED = 20261130

# name -> (config in the sam2 package, exporters to run). Tiny gets every exporter; small and
# SAM 2.0 one each, enough to show that the library does not depend on the model size or version.
MODELS = {
    "sam2.1_hiera_tiny": ("configs/sam2.1/sam2.1_hiera_t.yaml", ["samexporter", "onnxruntime"]),
    "sam2.1_hiera_small": ("configs/sam2.1/sam2.1_hiera_s.yaml", ["samexporter"]),
    "sam2_hiera_tiny": ("configs/sam2/sam2_hiera_t.yaml", ["onnxruntime"]),
}


def say(msg):
    print(f"[export-real] {msg}", file=sys.stderr, flush=True)


def build_random(config, seed):
    """Meta's SAM2 network with seeded random weights. Parameters that SAM2 initialises to zero
    (biases, some embeddings) get small noise too: an all-zero bias or embedding makes masks
    degenerate (every prompt the same), which would hide bugs in prompt handling."""
    from sam2.build_sam import build_sam2

    torch.manual_seed(seed)
    model = build_sam2(config, ckpt_path=None, device="cpu")
    generator = torch.Generator().manual_seed(seed + 1)
    with torch.no_grad():
        for _, p in sorted(model.named_parameters()):
            if p.dtype.is_floating_point and not torch.any(p != 0):
                p.copy_(torch.randn(p.shape, generator=generator) * 0.02)
    return model.eval()


def sha256(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def write_checkpoint(name, config, out_dir, given=None):
    if given:
        return os.path.abspath(given)
    path = os.path.join(out_dir, f"{name}.pt")
    if not os.path.exists(path):
        t0 = time.time()
        model = build_random(config, SEED)
        tmp = path + ".tmp"
        torch.save({"model": model.state_dict()}, tmp)
        os.replace(tmp, path)
        say(f"{name}: random-weight checkpoint written ({time.time() - t0:.0f} s)")
    return path


def export_samexporter(name, checkpoint, out_dir):
    encoder = os.path.join(out_dir, f"{name}.encoder.onnx")
    decoder = os.path.join(out_dir, f"{name}.decoder.onnx")
    if not (os.path.exists(encoder) and os.path.exists(decoder)):
        t0 = time.time()
        say(f"{name}: samexporter.export_sam2 (contract: samexporter)")
        subprocess.run(
            [sys.executable, "-m", "samexporter.export_sam2", "--checkpoint", checkpoint,
             "--output_encoder", encoder + ".tmp", "--output_decoder", decoder + ".tmp",
             "--model_type", name],
            check=True, stdout=subprocess.DEVNULL,
        )
        os.replace(encoder + ".tmp", encoder)
        os.replace(decoder + ".tmp", decoder)
        say(f"{name}: samexporter done ({time.time() - t0:.0f} s)")
    return [{"exporter": "samexporter 0.5.0", "family": "samexporter", "encoder": encoder,
             "decoder": decoder, "multimask_decoder": True}]


@contextlib.contextmanager
def classic_onnx_exporter():
    """torch.onnx.export with dynamo=False unless the caller says otherwise."""
    original = torch.onnx.export
    torch.onnx.export = functools.partial(original, dynamo=False)
    try:
        yield
    finally:
        torch.onnx.export = original


def onnxruntime_sam2_tools():
    """ONNX Runtime's SAM2 tools, (export_image_encoder_onnx, export_decoder_onnx). The onnxruntime
    wheel ships them as scripts in `onnxruntime/transformers/models/sam2` that import one another
    by bare name (`from sam2_utils import ...`), not as a package, so their folder goes on
    sys.path to import them."""
    import onnxruntime

    tools = os.path.join(os.path.dirname(onnxruntime.__file__), "transformers", "models", "sam2")
    if tools not in sys.path:
        sys.path.insert(0, tools)
    from image_decoder import export_decoder_onnx
    from image_encoder import export_image_encoder_onnx

    return export_image_encoder_onnx, export_decoder_onnx


def export_onnxruntime(name, checkpoint, out_dir):
    export_image_encoder_onnx, export_decoder_onnx = onnxruntime_sam2_tools()
    from sam2.build_sam import build_sam2

    config = MODELS[name][0]
    encoder = os.path.join(out_dir, f"{name}_image_encoder.onnx")
    decoders = {
        False: os.path.join(out_dir, f"{name}_image_decoder.onnx"),
        True: os.path.join(out_dir, f"{name}_image_decoder_multi.onnx"),
    }
    todo = [p for p in [encoder, *decoders.values()] if not os.path.exists(p)]
    if todo:
        t0 = time.time()
        say(f"{name}: ONNX Runtime's SAM2 tools (contract: onnxruntime)")
        model = build_sam2(config, ckpt_path=checkpoint, device="cpu")
        with classic_onnx_exporter(), torch.no_grad():
            if not os.path.exists(encoder):
                export_image_encoder_onnx(model, encoder + ".tmp")
                os.replace(encoder + ".tmp", encoder)
            for multi, path in decoders.items():
                if not os.path.exists(path):
                    export_decoder_onnx(model, path + ".tmp", multi)
                    os.replace(path + ".tmp", path)
        say(f"{name}: ONNX Runtime's tools done ({time.time() - t0:.0f} s)")
    return [{"exporter": "onnxruntime 1.31.1 transformers/models/sam2", "family": "onnxruntime",
             "encoder": encoder, "decoder": path, "multimask_decoder": multi}
            for multi, path in decoders.items()]


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", required=True, help="the folder to write the pairs, the "
                        "checkpoints and manifest.json into (created)")
    parser.add_argument("--only", nargs="*", choices=sorted(MODELS),
                        help="the models to export (default: all)")
    parser.add_argument("--checkpoint", help="export these weights instead of seeded random ones "
                        "(one model: give --only NAME)")
    args = parser.parse_args()
    if args.checkpoint and (not args.only or len(args.only) != 1):
        parser.error("--checkpoint needs --only with the one model it holds")
    os.makedirs(args.out, exist_ok=True)
    torch.set_num_threads(os.cpu_count() or 1)

    pairs = []
    for name, (config, exporters) in MODELS.items():
        if args.only and name not in args.only:
            continue
        checkpoint = write_checkpoint(name, config, args.out, args.checkpoint)
        for exporter in exporters:
            made = {"samexporter": export_samexporter, "onnxruntime": export_onnxruntime}[exporter](
                name, checkpoint, args.out)
            for pair in made:
                pair["model"] = name
                pair["config"] = config
                pair["checkpoint"] = os.path.relpath(checkpoint, args.out)
                for key in ("encoder", "decoder"):
                    pair[key + "_sha256"] = sha256(pair[key])
                    pair[key] = os.path.basename(pair[key])
                pairs.append(pair)
    manifest = {"seed": None if args.checkpoint else SEED, "torch": torch.__version__, "pairs": pairs}
    with open(os.path.join(args.out, "manifest.json"), "w") as f:
        json.dump(manifest, f, indent=1)
    say(f"{len(pairs)} pairs in {args.out}/manifest.json")


if __name__ == "__main__":
    main()
