#!/usr/bin/env bash
# Video tracking (issue 19): our four-module ONNX export of SAM2.1 tiny
# (sam2-export-video, seeded random weights, built as build_sam2_video_predictor builds
# it) and the reference run of Meta's SAM2VideoPredictor on a generated 11-frame clip
# (tools/references/video_reference.py).
#
# Sourced by tools/setup/setup-real.sh after the real exports (it needs that script's venv, with
# the model tools installed, and $CACHE, $REAL_VENV, $TOOLS, say and logged). Cached outside the
# repository in two parts, so that a change to the export alone (seconds) never reruns the
# reference (minutes of memory attention):
#   $CACHE/video/export-<hash>/     keyed by export_video.py and the venv's pins: the four
#                                   modules, the checkpoint, manifest.json; `reference` links to
#   $CACHE/video/reference-<hash>/  keyed by video_reference.py, the pins and the weights' own
#                                   hash (manifest.json's weights_sha256): clip, prompts, arrays
#   $CACHE/video/resize-<hash>/     keyed by resize_reference.py, the pins and the weights: Meta's
#                                   frame loader and predictor on a 640x480 clip (`resize` links)
#   $CACHE/video/int8-<hash>/       keyed by make_variant.py and the export: its int8 variant
# A second run recomputes nothing. Exports SAM2_VIDEO_MODELS (and SAM2_VIDEO_REFERENCE,
# SAM2_VIDEO_RESIZE, SAM2_VIDEO_INT8). tools/references/video_track_check.py
# (SAM2's tracker in numpy on the four modules, against the reference) is a developer's check, not
# run here: the Rust tests compare the library itself with the same reference.

export_hash="$(cat "$TOOLS/export_video.py" "$ROOT/tools/setup/real-requirements.txt" | sha256sum | cut -c1-16)"
VIDEO_MODELS="$CACHE/video/export-$export_hash"
setup_begin "video modules of SAM2.1 tiny (sam2-export-video)"
if [ ! -f "$VIDEO_MODELS/.sam2-video-export-done" ]; then
    say "exporting the four video modules into $VIDEO_MODELS (about a minute)"
    rm -rf "$VIDEO_MODELS"
    mkdir -p "$VIDEO_MODELS"
    logged "$VIDEO_MODELS/export.log" "$REAL_VENV/bin/sam2-export-video" --out "$VIDEO_MODELS"
    touch "$VIDEO_MODELS/.sam2-video-export-done"
    setup_end ran
else
    setup_end cached
fi
weights="$("$REAL_VENV/bin/python" -c 'import json, sys; print(json.load(open(sys.argv[1]))["weights_sha256"])' \
    "$VIDEO_MODELS/manifest.json")"
reference_hash="$( (cat "$ROOT/tools/references/video_reference.py" "$ROOT/tools/setup/real-requirements.txt"; echo "$weights") | sha256sum | cut -c1-16)"
VIDEO_REFERENCE="$CACHE/video/reference-$reference_hash"
setup_begin "Meta's SAM2VideoPredictor on the 11-frame clip (tools/references/video_reference.py)"
if [ ! -f "$VIDEO_REFERENCE/.sam2-video-reference-done" ]; then
    say "running Meta's SAM2VideoPredictor on the generated clip into $VIDEO_REFERENCE (minutes: memory attention costs seconds a frame)"
    rm -rf "$VIDEO_REFERENCE"
    mkdir -p "$VIDEO_REFERENCE"
    logged "$VIDEO_REFERENCE/reference.log" "$REAL_VENV/bin/python" "$ROOT/tools/references/video_reference.py" \
        --models "$VIDEO_MODELS" --out "$VIDEO_REFERENCE"
    touch "$VIDEO_REFERENCE/.sam2-video-reference-done"
    setup_end ran
else
    setup_end cached
fi
ln -sfn "$VIDEO_REFERENCE" "$VIDEO_MODELS/reference"
# Meta's frame loader and predictor on a 640x480 clip (issue 32: the resize to 1024x1024 matters
# there), keyed like the reference; `resize` links to it.
resize_hash="$( (cat "$ROOT/tools/references/resize_reference.py" "$ROOT/tools/setup/real-requirements.txt"; echo "$weights") | sha256sum | cut -c1-16)"
VIDEO_RESIZE="$CACHE/video/resize-$resize_hash"
setup_begin "Meta's frame loader on a 640x480 clip (tools/references/resize_reference.py video)"
if [ ! -f "$VIDEO_RESIZE/.sam2-video-resize-done" ]; then
    say "running Meta's frame loader and SAM2VideoPredictor on a 640x480 clip into $VIDEO_RESIZE (under a minute)"
    rm -rf "$VIDEO_RESIZE"
    mkdir -p "$VIDEO_RESIZE"
    logged "$VIDEO_RESIZE/reference.log" "$REAL_VENV/bin/python" "$ROOT/tools/references/resize_reference.py" video \
        --models "$VIDEO_MODELS" --out "$VIDEO_RESIZE"
    touch "$VIDEO_RESIZE/.sam2-video-resize-done"
    setup_end ran
else
    setup_end cached
fi
ln -sfn "$VIDEO_RESIZE" "$VIDEO_MODELS/resize"
# The int8 variant of the export (sam2-variant --attention-scores int8: the image
# encoder's MatMul weights int8; memory attention's and the memory encoder's feed-forward layers
# int8, memory attention marked for int8 attention scores; the decoder copied; seconds), for
# tests/it/video_real.rs and the benchmark.
variant_hash="$( (cat "$TOOLS/make_variant.py"; echo "$export_hash --attention-scores int8") | sha256sum | cut -c1-16)"
VIDEO_INT8="$CACHE/video/int8-$variant_hash"
setup_begin "int8 variant of the video modules (sam2-variant)"
if [ ! -f "$VIDEO_INT8/.sam2-video-int8-done" ]; then
    say "making the int8 variant of the video modules into $VIDEO_INT8"
    rm -rf "$VIDEO_INT8"
    mkdir -p "$VIDEO_INT8"
    logged "$VIDEO_INT8/make.log" "$REAL_VENV/bin/sam2-variant" int8 --attention-scores int8 \
        "$VIDEO_MODELS" --out "$VIDEO_INT8"
    touch "$VIDEO_INT8/.sam2-video-int8-done"
    setup_end ran
else
    setup_end cached
fi
# Outputs of other versions of the scripts go once unused for a week (prune_unused, setup-real.sh).
prune_unused "$CACHE/video" "export-$export_hash" "reference-$reference_hash" "resize-$resize_hash" \
    "int8-$variant_hash"
export SAM2_VIDEO_MODELS="$VIDEO_MODELS"
# The reference this checkout's scripts made, by its own path: the `reference` link in the shared
# export folder names the one made last, by whichever clone ran last.
export SAM2_VIDEO_REFERENCE="$VIDEO_REFERENCE"
export SAM2_VIDEO_RESIZE="$VIDEO_RESIZE"
export SAM2_VIDEO_INT8="$VIDEO_INT8"
