#!/usr/bin/env bash
# Real-architecture SAM2 models (issue 16): Meta's SAM2 code with seeded random weights, exported
# by samexporter 0.5.0 and by ONNX Runtime 1.31.1's SAM2 tools (sam2-export-image), and
# the reference masks the tests compare against (tools/references/real_reference.py).
#
# Idempotent and cached outside the repository, so that every clone reuses one copy:
#   $SAM2_DEV_CACHE (default ${XDG_CACHE_HOME:-$HOME/.cache}/sam2-dev)/
#     real-venv/                  torch 2.10 and the exporters (about 7 GB; torch needs its NVIDIA
#                                 packages even to import on a CPU), and a copy of the project's
#                                 model tools (tools/sam2-tools)
#     real-models/<hash>/         the exports, checkpoints, manifest.json and reference.json, keyed
#                                 by the export script, its pins and the reference inputs
#       hostile-<hash>/           hostile copies of the exports for the tests (cases.tsv lists them),
#                                 keyed by tools/models/hostile_models.py, the export and tiny_a's
#                                 encoder
#     video/<hash>/               our four-module video export and the reference run of Meta's
#                                 video predictor (tools/setup/setup-video.sh, sourced at the end)
# A second run downloads and exports nothing. Source it (`. tools/setup/setup-real.sh`) to get
# SAM2_REAL_MODELS, SAM2_REAL_HOSTILE and SAM2_VIDEO_MODELS exported; scripts/test.sh does.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
CACHE="${SAM2_DEV_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/sam2-dev}"
REAL_VENV="$CACHE/real-venv"
TOOLS="$ROOT/tools/sam2-tools/sam2_tools"  # the model tools' modules, whose content keys the caches
say() { printf '[setup-real] %s\n' "$*" >&2; }
. "$ROOT/tools/setup/setup-times.sh"
export ORT_DISABLE_TELEMETRY=1

# 1. The exporters' venv.
setup_begin "real exporters' venv (torch, sam-2-uni, samexporter)"
real_req_hash="$(sha256sum "$ROOT/tools/setup/real-requirements.txt" | cut -c1-16)"
if [ ! -f "$REAL_VENV/.sam2-req-$real_req_hash" ]; then
    say "creating $REAL_VENV: torch 2.10.0, sam-2-uni 1.0, samexporter 0.5.0, onnxruntime 1.31.1"
    say "(the first time downloads about 3 GB of wheels; later runs reuse the venv)"
    rm -rf "$REAL_VENV"
    mkdir -p "$CACHE"
    python3 -m venv "$REAL_VENV"
    "$REAL_VENV/bin/pip" install -q --disable-pip-version-check --progress-bar off \
        -r "$ROOT/tools/setup/real-requirements.txt"
    touch "$REAL_VENV/.sam2-req-$real_req_hash"
    setup_end ran
else
    setup_end cached
fi
install_tools "$REAL_VENV" copy

# 2. The exports, then the reference masks (each regenerated only when its inputs change).
# Keeps the entries NAME... of the cache folder PARENT (marking them used now) and removes the
# others once unused for a week: another clone of another version shares the cache, and what it
# is computing or still needs must not vanish under it (a fresh entry counts as used).
prune_unused() {
    local parent="$1"
    shift
    prune_unused_named "$parent" "" "$@"
}
# The same for the entries of PARENT whose names begin with PREFIX only (the others stay):
#   prune_unused_named PARENT PREFIX NAME...
prune_unused_named() {
    local parent="$1" prefix="$2" d name keep
    shift 2
    for name in "$@"; do
        [ -d "$parent/$name" ] && touch "$parent/$name/.last-used"
    done
    for d in "$parent/$prefix"*/; do
        [ -d "$d" ] || continue
        name="$(basename "$d")"
        keep=0
        for n in "$@"; do [ "$n" = "$name" ] && keep=1; done
        [ "$keep" = 1 ] && continue
        if [ -z "$(find "$d" -maxdepth 1 -name .last-used -mtime -7)" ] &&
            [ -z "$(find "$d" -maxdepth 0 -mtime -7)" ]; then
            rm -rf "$d"
        fi
    done
}

setup_begin "real SAM2 exports (sam2-export-image)"
export_hash="$(cat "$TOOLS/export_real.py" "$ROOT/tools/setup/real-requirements.txt" | sha256sum | cut -c1-16)"
REAL_MODELS="$CACHE/real-models/$export_hash"
if [ ! -f "$REAL_MODELS/.sam2-exported" ]; then
    say "exporting the real SAM2 architecture into $REAL_MODELS (a few minutes)"
    mkdir -p "$REAL_MODELS"
    logged "$REAL_MODELS/export.log" "$REAL_VENV/bin/sam2-export-image" --out "$REAL_MODELS"
    touch "$REAL_MODELS/.sam2-exported"
    setup_end ran
else
    setup_end cached
fi
prune_unused "$CACHE/real-models" "$export_hash"
setup_begin "reference masks of the real exports (tools/references/real_reference.py)"
ref_hash="$(cat "$ROOT/tools/references/real_reference.py" "$ROOT/testdata/demo.ppm" | sha256sum | cut -c1-16)"
if [ ! -f "$REAL_MODELS/.sam2-reference-$ref_hash" ]; then
    say "computing the reference masks (Python pipeline and Meta's PyTorch predictor)"
    logged "$REAL_MODELS/reference.log" "$REAL_VENV/bin/python" "$ROOT/tools/references/real_reference.py" \
        --models "$REAL_MODELS" --image "$ROOT/testdata/demo.ppm"
    rm -f "$REAL_MODELS"/.sam2-reference-*
    touch "$REAL_MODELS/.sam2-reference-$ref_hash"
    setup_end ran
else
    setup_end cached
fi
# Meta's resize on images larger than the model's input (issue 32): SAM2ImagePredictor's transforms,
# embedding and two prompts on a 1920x1080 and a 1080x1920 image, in $REAL_MODELS/resize.
setup_begin "Meta's resize of large images (tools/references/resize_reference.py image)"
resize_hash="$(cat "$ROOT/tools/references/resize_reference.py" "$ROOT/tools/setup/real-requirements.txt" | sha256sum | cut -c1-16)"
if [ ! -f "$REAL_MODELS/resize/.sam2-resize-$resize_hash" ]; then
    say "running SAM2ImagePredictor on a 1920x1080 and a 1080x1920 image (under a minute)"
    rm -rf "$REAL_MODELS/resize"
    mkdir -p "$REAL_MODELS/resize"
    logged "$REAL_MODELS/resize.log" "$REAL_VENV/bin/python" "$ROOT/tools/references/resize_reference.py" image \
        --models "$REAL_MODELS" --out "$REAL_MODELS/resize"
    touch "$REAL_MODELS/resize/.sam2-resize-$resize_hash"
    setup_end ran
else
    setup_end cached
fi
# int8 and fp16 precision variants of the SAM2.1 tiny pairs of both exporters
# (sam2-variant, ONNX Runtime's quantiser and float16 converter; about half a
# minute each), for tests/it/precision.rs and the benchmark.
setup_begin "int8 and fp16 variants of the real SAM2.1 tiny pairs (sam2-variant)"
variants_hash="$( (cat "$TOOLS/make_variant.py"; echo "$export_hash") | sha256sum | cut -c1-16)"
REAL_VARIANTS="$REAL_MODELS/variants-$variants_hash"
if [ ! -f "$REAL_VARIANTS/.sam2-variants-done" ]; then
    say "making the int8 and fp16 variants of the SAM2.1 tiny encoders into $REAL_VARIANTS"
    rm -rf "$REAL_VARIANTS"
    mkdir -p "$REAL_VARIANTS"
    for precision in int8 fp16; do
        suffix=""
        [ "$precision" = int8 ] || suffix="-$precision"
        logged "$REAL_VARIANTS/samexporter$suffix.log" "$REAL_VENV/bin/sam2-variant" \
            "$precision" "$REAL_MODELS/sam2.1_hiera_tiny.encoder.onnx" --out "$REAL_VARIANTS/samexporter$suffix"
        logged "$REAL_VARIANTS/onnxruntime$suffix.log" "$REAL_VENV/bin/sam2-variant" \
            "$precision" "$REAL_MODELS/sam2.1_hiera_tiny_image_encoder.onnx" --out "$REAL_VARIANTS/onnxruntime$suffix"
    done
    touch "$REAL_VARIANTS/.sam2-variants-done"
    setup_end ran
else
    setup_end cached
fi
# Other versions' variants go once unused for a week: a clone of another version sharing the
# cache may be reading them now.
prune_unused_named "$REAL_MODELS" variants- "variants-$variants_hash"
# Hostile copies of the real SAM2.1 tiny pairs and of the generated tiny_a encoder (truncated,
# bit-flipped, external data outside the directory, huge declared dimensions;
# tools/models/hostile_models.py, 1.6 GB in 15 s), listed in cases.tsv, for tests/it/hostile_models.rs
# and test_bad_input.c.
setup_begin "hostile copies of the real SAM2.1 tiny pairs (tools/models/hostile_models.py)"
GENERATED_MODELS="${SAM2_MODELS:-$ROOT/models}"
if [ ! -f "$GENERATED_MODELS/tiny_a_encoder.onnx" ]; then
    say "$GENERATED_MODELS/tiny_a_encoder.onnx is missing: source tools/setup/setup.sh first"
    false
fi
hostile_hash="$( (cat "$ROOT/tools/models/hostile_models.py" "$GENERATED_MODELS/tiny_a_encoder.onnx"; echo "$export_hash") |
    sha256sum | cut -c1-16)"
REAL_HOSTILE="$REAL_MODELS/hostile-$hostile_hash"
if [ ! -f "$REAL_HOSTILE/.sam2-hostile-done" ]; then
    say "writing the hostile copies into $REAL_HOSTILE"
    rm -rf "$REAL_HOSTILE"
    mkdir -p "$REAL_HOSTILE"
    logged "$REAL_HOSTILE/hostile.log" "$REAL_VENV/bin/python" "$ROOT/tools/models/hostile_models.py" \
        --models "$REAL_MODELS" --generated "$GENERATED_MODELS" --out "$REAL_HOSTILE"
    touch "$REAL_HOSTILE/.sam2-hostile-done"
    setup_end ran
else
    setup_end cached
fi
prune_unused_named "$REAL_MODELS" hostile- "hostile-$hostile_hash"
export SAM2_REAL_MODELS="$REAL_MODELS"
export SAM2_REAL_VARIANTS="$REAL_VARIANTS"
export SAM2_REAL_HOSTILE="$REAL_HOSTILE"
export SAM2_REAL_PYTHON="$REAL_VENV/bin/python"

# 3. Video tracking: our four-module export and the reference of Meta's video predictor.
. "$ROOT/tools/setup/setup-video.sh"
