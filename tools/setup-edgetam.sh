#!/usr/bin/env bash
# EdgeTAM (issue 31): our ONNX export of EdgeTAM (tools/export_edgetam.py: seeded random weights,
# built as EdgeTAM's build_sam2_video_predictor builds it; an image pair by ONNX Runtime's SAM2
# tools and the four video modules) and the reference run of EdgeTAM's own PyTorch predictors on
# the same weights (tools/edgetam_reference.py: image cases, and the generated 12-frame clip of
# tools/video_reference.py with two objects and a correction).
#
# EdgeTAM's code (PyPI edgetam-dimos) is a fork of Meta's `sam2` package under the same top-level
# name, so it has a venv of its own, beside setup-real.sh's. Idempotent and cached outside the
# repository, in three parts, so that a change to one never redoes the ones before it:
#   $SAM2_DEV_CACHE (default ${XDG_CACHE_HOME:-$HOME/.cache}/sam2-dev)/edgetam/
#     venv/                 torch 2.10, edgetam-dimos 1.0.1, timm, onnxruntime 1.31.1 (about
#                           7 GB, tools/edgetam-requirements.txt: the real exporters' pins where
#                           they share a package, so pip's cache, when it holds them, serves the
#                           torch wheels once)
#     export-<hash>/        keyed by the export scripts and the pins: the image pair, the four
#                           video modules, the checkpoint, manifest.json; `reference` links to
#     reference-<hash>/     keyed by the reference scripts, the pins and the weights' own hash
#                           (manifest.json's weights_sha256): clip, prompts, arrays, reference.json
# Measured 2026-12-02 on 2 cores shared with a load of 15-20: the venv 6 minutes (pip's cache here
# held none of the real venv's wheels: all downloaded), the export 75-160 s, the reference 14-18
# minutes. A second run recomputes nothing (0.2 s). Source it (`. tools/setup-edgetam.sh`) to get
# SAM2_EDGETAM_MODELS (the export directory) and SAM2_EDGETAM_PYTHON exported.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
CACHE="${SAM2_DEV_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/sam2-dev}"
EDGETAM_VENV="$CACHE/edgetam/venv"
say() { printf '[setup-edgetam] %s\n' "$*" >&2; }
. "$ROOT/tools/setup-times.sh"
# Runs a step with its (chatty) output in a log, showing only its progress lines; on failure,
# the end of the log.
logged() {
    local log="$1"
    shift
    if ! "$@" >"$log" 2>&1; then
        say "failed: $*; the end of $log:"
        tail -n 40 "$log" >&2
        return 1
    fi
    grep -h '^\[' "$log" >&2 || true
}
export ORT_DISABLE_TELEMETRY=1

# 1. EdgeTAM's venv.
setup_begin "EdgeTAM's venv (torch, edgetam-dimos, timm)"
edgetam_req_hash="$(sha256sum "$ROOT/tools/edgetam-requirements.txt" | cut -c1-16)"
if [ ! -f "$EDGETAM_VENV/.sam2-req-$edgetam_req_hash" ]; then
    say "creating $EDGETAM_VENV: torch 2.10.0, edgetam-dimos 1.0.1, timm 1.0.31, onnxruntime 1.31.1"
    say "(the first time downloads the wheels pip's cache lacks; later runs reuse the venv)"
    rm -rf "$EDGETAM_VENV"
    mkdir -p "$CACHE/edgetam"
    python3 -m venv "$EDGETAM_VENV"
    "$EDGETAM_VENV/bin/pip" install -q --disable-pip-version-check --progress-bar off \
        -r "$ROOT/tools/edgetam-requirements.txt"
    touch "$EDGETAM_VENV/.sam2-req-$edgetam_req_hash"
    setup_end ran
else
    setup_end cached
fi

# 2. The export (a few minutes), then the reference (minutes), each redone only when its inputs
# change.
setup_begin "EdgeTAM export (tools/export_edgetam.py)"
export_hash="$(cat "$ROOT/tools/export_edgetam.py" "$ROOT/tools/edgetam_model.py" \
    "$ROOT/tools/export_video.py" "$ROOT/tools/edgetam-requirements.txt" | sha256sum | cut -c1-16)"
EDGETAM_MODELS="$CACHE/edgetam/export-$export_hash"
if [ ! -f "$EDGETAM_MODELS/.sam2-edgetam-export-done" ]; then
    say "exporting EdgeTAM (image pair and four video modules) into $EDGETAM_MODELS (minutes)"
    rm -rf "$EDGETAM_MODELS"
    mkdir -p "$EDGETAM_MODELS"
    logged "$EDGETAM_MODELS/export.log" "$EDGETAM_VENV/bin/python" "$ROOT/tools/export_edgetam.py" \
        --out "$EDGETAM_MODELS"
    touch "$EDGETAM_MODELS/.sam2-edgetam-export-done"
    setup_end ran
else
    setup_end cached
fi
setup_begin "EdgeTAM reference (tools/edgetam_reference.py)"
weights="$("$EDGETAM_VENV/bin/python" -c 'import json, sys; print(json.load(open(sys.argv[1]))["weights_sha256"])' \
    "$EDGETAM_MODELS/manifest.json")"
reference_hash="$( (cat "$ROOT/tools/edgetam_reference.py" "$ROOT/tools/edgetam_model.py" \
    "$ROOT/tools/video_reference.py" "$ROOT/tools/real_reference.py" "$ROOT/tools/reference_check.py" \
    "$ROOT/testdata/demo.ppm" "$ROOT/tools/edgetam-requirements.txt"; echo "$weights") \
    | sha256sum | cut -c1-16)"
EDGETAM_REFERENCE="$CACHE/edgetam/reference-$reference_hash"
if [ ! -f "$EDGETAM_REFERENCE/.sam2-edgetam-reference-done" ]; then
    say "running EdgeTAM's PyTorch predictors (image cases, the generated clip) into $EDGETAM_REFERENCE"
    rm -rf "$EDGETAM_REFERENCE"
    mkdir -p "$EDGETAM_REFERENCE"
    logged "$EDGETAM_REFERENCE/reference.log" "$EDGETAM_VENV/bin/python" "$ROOT/tools/edgetam_reference.py" \
        --models "$EDGETAM_MODELS" --image "$ROOT/testdata/demo.ppm" --out "$EDGETAM_REFERENCE"
    touch "$EDGETAM_REFERENCE/.sam2-edgetam-reference-done"
    setup_end ran
else
    setup_end cached
fi
ln -sfn "$EDGETAM_REFERENCE" "$EDGETAM_MODELS/reference"
# Outputs of older versions of the scripts are not needed any more.
find "$CACHE/edgetam" -mindepth 1 -maxdepth 1 ! -name venv ! -name "export-$export_hash" \
    ! -name "reference-$reference_hash" -exec rm -rf {} +
export SAM2_EDGETAM_MODELS="$EDGETAM_MODELS"
export SAM2_EDGETAM_PYTHON="$EDGETAM_VENV/bin/python"
