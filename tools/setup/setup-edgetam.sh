#!/usr/bin/env bash
# EdgeTAM (issue 31): our ONNX export of EdgeTAM (sam2-export-edgetam: seeded random
# weights, built as EdgeTAM's build_sam2_video_predictor builds it; an image pair by ONNX Runtime's
# SAM2 tools and the four video modules) and the reference run of EdgeTAM's own PyTorch predictors
# on the same weights (tools/references/edgetam_reference.py: image cases, and the generated
# 11-frame clip of tools/references/video_reference.py with two objects and a correction).
#
# EdgeTAM's code (PyPI edgetam-dimos) is a fork of Meta's `sam2` package under the same top-level
# name, so it cannot be installed into setup-real.sh's venv beside sam-2-uni; it gets a small venv
# of its own that reuses that one's torch and the rest, the project's model tools included
# (sourcing setup-real.sh first when that venv is missing). Idempotent and cached outside the
# repository, in three parts, so that a change to one never redoes the ones before it:
#   $SAM2_DEV_CACHE (default ${XDG_CACHE_HOME:-$HOME/.cache}/sam2-dev)/edgetam/
#     venv/                 edgetam-dimos 1.0.1 alone (tools/setup/edgetam-requirements.txt,
#                           --no-deps, about 1 MB), then a .pth line adding setup-real.sh's venv
#                           (real-venv/: torch 2.10, timm, onnxruntime 1.31.1, OpenCV, ...) after
#                           it: `import sam2` is EdgeTAM's, everything else the real venv's. Keyed
#                           by both requirement files.
#     export-<hash>/        keyed by the exporter's modules and both pins: the image pair, the four
#                           video modules, the checkpoint, manifest.json; `reference` links to
#     reference-<hash>/     keyed by the reference scripts, the pins and the weights' own hash
#                           (manifest.json's weights_sha256): clip, prompts, arrays, reference.json
#     fp16-<hash>/, int8-<hash>/  keyed by make_variant.py and the export: the video modules'
#                           fp16 and int8 variants
# Measured 2026-12-02 on 2 cores shared with a load of 5-8: the venv 20 s (one 1 MB wheel; before,
# a second 7 GB venv took 6 minutes), the export 86 s, the reference 423 s. A second run
# recomputes nothing. Source it
# (`. tools/setup/setup-edgetam.sh`) to get SAM2_EDGETAM_MODELS (the export directory),
# SAM2_EDGETAM_PYTHON, SAM2_EDGETAM_FP16 and SAM2_EDGETAM_INT8 exported.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
CACHE="${SAM2_DEV_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/sam2-dev}"
EDGETAM_VENV="$CACHE/edgetam/venv"
TOOLS="$ROOT/tools/sam2-tools/sam2_tools"  # the model tools' modules, whose content keys the caches
say() { printf '[setup-edgetam] %s\n' "$*" >&2; }
. "$ROOT/tools/setup/setup-times.sh"
export ORT_DISABLE_TELEMETRY=1

# 1. EdgeTAM's venv: edgetam-dimos over setup-real.sh's venv.
REAL_VENV="$CACHE/real-venv"
real_req_hash="$(sha256sum "$ROOT/tools/setup/real-requirements.txt" | cut -c1-16)"
if [ ! -f "$REAL_VENV/.sam2-req-$real_req_hash" ]; then
    say "setup-real.sh's venv is missing: making it first"
    . "$ROOT/tools/setup/setup-real.sh"
    say() { printf '[setup-edgetam] %s\n' "$*" >&2; }
fi
setup_begin "EdgeTAM's venv (edgetam-dimos over the real exporters' venv)"
edgetam_req_hash="$(cat "$ROOT/tools/setup/edgetam-requirements.txt" "$ROOT/tools/setup/real-requirements.txt" \
    | sha256sum | cut -c1-16)"
if [ ! -f "$EDGETAM_VENV/.sam2-req-$edgetam_req_hash" ]; then
    say "creating $EDGETAM_VENV: edgetam-dimos 1.0.1 over $REAL_VENV"
    venv_over_real "$EDGETAM_VENV" "$ROOT/tools/setup/edgetam-requirements.txt"
    "$EDGETAM_VENV/bin/python" - <<'PY'
import os, torch, timm, onnxruntime, sam2
assert os.path.exists(os.path.join(os.path.dirname(sam2.__file__), "configs", "edgetam.yaml")), \
    f"`import sam2` is not EdgeTAM's: {sam2.__file__}"
import sam2.modeling.perceiver  # noqa: F401
print(f"[setup-edgetam] sam2 from {os.path.dirname(sam2.__file__)}, torch {torch.__version__}, "
      f"timm {timm.__version__}, onnxruntime {onnxruntime.__version__}")
PY
    touch "$EDGETAM_VENV/.sam2-req-$edgetam_req_hash"
    setup_end ran
else
    setup_end cached
fi
# The model tools in the real venv, which this one reads (redone here when they change, for a run
# of this script without setup-real.sh).
install_tools "$REAL_VENV" copy

# 2. The export (a few minutes), then the reference (minutes), each redone only when its inputs
# change.
setup_begin "EdgeTAM export (sam2-export-edgetam)"
export_hash="$(cat "$TOOLS/export_edgetam.py" "$TOOLS/edgetam_model.py" "$TOOLS/export_video.py" \
    "$TOOLS/export_real.py" "$ROOT/tools/setup/edgetam-requirements.txt" \
    "$ROOT/tools/setup/real-requirements.txt" | sha256sum | cut -c1-16)"
EDGETAM_MODELS="$CACHE/edgetam/export-$export_hash"
# (as a module of this venv's Python: the command in the real venv would run Meta's `sam2`)
made_once "$EDGETAM_MODELS" .sam2-edgetam-export-done export.log \
    "exporting EdgeTAM (image pair and four video modules) into $EDGETAM_MODELS (minutes)" \
    "$EDGETAM_VENV/bin/python" -m sam2_tools.export_edgetam --out "$EDGETAM_MODELS"
setup_begin "EdgeTAM reference (tools/references/edgetam_reference.py)"
weights="$("$EDGETAM_VENV/bin/python" -c 'import json, sys; print(json.load(open(sys.argv[1]))["weights_sha256"])' \
    "$EDGETAM_MODELS/manifest.json")"
reference_hash="$( (cat "$ROOT/tools/references/edgetam_reference.py" "$TOOLS/edgetam_model.py" \
    "$ROOT/tools/references/video_reference.py" "$ROOT/tools/references/real_reference.py" "$ROOT/tools/references/reference_check.py" \
    "$ROOT/testdata/demo.ppm" "$ROOT/tools/setup/edgetam-requirements.txt" \
    "$ROOT/tools/setup/real-requirements.txt"; echo "$weights") \
    | sha256sum | cut -c1-16)"
EDGETAM_REFERENCE="$CACHE/edgetam/reference-$reference_hash"
made_once "$EDGETAM_REFERENCE" .sam2-edgetam-reference-done reference.log \
    "running EdgeTAM's PyTorch predictors (image cases, the generated clip) into $EDGETAM_REFERENCE" \
    "$EDGETAM_VENV/bin/python" "$ROOT/tools/references/edgetam_reference.py" \
    --models "$EDGETAM_MODELS" --image "$ROOT/testdata/demo.ppm" --out "$EDGETAM_REFERENCE"
ln -sfn "$EDGETAM_REFERENCE" "$EDGETAM_MODELS/reference"
# 3. The precision variants of the video modules (sam2-variant; seconds): fp16
# (the image encoder in float16, the three other modules copied) for the device tests
# (tests/webgpu.rs), and int8 with --attention-scores int8 (memory attention's and the memory
# encoder's feed-forward layers over the image's positions int8, memory attention marked for int8
# attention scores; the RepViT encoder, without MatMuls, and the decoder copied) for
# tests/it/video_real.rs and the bench.
variant_hash="$( (cat "$TOOLS/make_variant.py"; echo "$export_hash --attention-scores int8") | sha256sum | cut -c1-16)"
for precision in fp16 int8; do
    extra=()
    if [ "$precision" = int8 ]; then
        extra=(--attention-scores int8)
    fi
    setup_begin "EdgeTAM's $precision video variant (sam2-variant)"
    out="$CACHE/edgetam/$precision-$variant_hash"
    made_once "$out" ".sam2-edgetam-$precision-done" make.log \
        "making the $precision variant of EdgeTAM's video modules into $out" \
        "$REAL_VENV/bin/sam2-variant" "$precision" "${extra[@]}" "$EDGETAM_MODELS" --out "$out"
done
EDGETAM_FP16="$CACHE/edgetam/fp16-$variant_hash"
EDGETAM_INT8="$CACHE/edgetam/int8-$variant_hash"
# Outputs of other versions of the scripts go once unused for a week (setup-real.sh's
# prune_unused: another clone sharing the cache may still need them), when that script was sourced.
if declare -F prune_unused >/dev/null; then
    prune_unused "$CACHE/edgetam" venv "export-$export_hash" "reference-$reference_hash" \
        "fp16-$variant_hash" "int8-$variant_hash"
fi
export SAM2_EDGETAM_MODELS="$EDGETAM_MODELS"
export SAM2_EDGETAM_PYTHON="$EDGETAM_VENV/bin/python"
export SAM2_EDGETAM_FP16="$EDGETAM_FP16"
export SAM2_EDGETAM_INT8="$EDGETAM_INT8"
# The reference this checkout's scripts made, by its own path (the export's `reference` link names
# the one made last, by whichever clone ran last).
export SAM2_EDGETAM_REFERENCE="$EDGETAM_REFERENCE"
