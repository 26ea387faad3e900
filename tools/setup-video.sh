#!/usr/bin/env bash
# Video tracking (issue 19): our four-module ONNX export of SAM2.1 tiny (tools/export_video.py,
# seeded random weights, built as build_sam2_video_predictor builds it) and the reference run of
# Meta's SAM2VideoPredictor on a generated 30-frame clip (tools/video_reference.py).
#
# Sourced by tools/setup-real.sh after the real exports (it needs that script's venv, $CACHE,
# $REAL_VENV, say and logged). Cached outside the repository, keyed by the two scripts and the
# venv's pins:
#   $CACHE/video/<hash>/   image_encoder.onnx, memory_attention.onnx, image_decoder.onnx,
#                          memory_encoder.onnx, the checkpoint, manifest.json (names the four
#                          files and the reference), reference/ (clip, prompts, reference arrays)
# A second run recomputes nothing. Exports SAM2_VIDEO_MODELS.

video_hash="$(cat "$ROOT/tools/export_video.py" "$ROOT/tools/video_reference.py" \
    "$ROOT/tools/real-requirements.txt" | sha256sum | cut -c1-16)"
VIDEO_MODELS="$CACHE/video/$video_hash"
if [ ! -f "$VIDEO_MODELS/.sam2-video-done" ]; then
    say "exporting the four video modules and running Meta's video predictor into $VIDEO_MODELS (a few minutes)"
    rm -rf "$VIDEO_MODELS"
    mkdir -p "$VIDEO_MODELS"
    logged "$VIDEO_MODELS/export.log" "$REAL_VENV/bin/python" "$ROOT/tools/export_video.py" \
        --out "$VIDEO_MODELS"
    logged "$VIDEO_MODELS/reference.log" "$REAL_VENV/bin/python" "$ROOT/tools/video_reference.py" \
        --models "$VIDEO_MODELS" --out "$VIDEO_MODELS/reference"
    touch "$VIDEO_MODELS/.sam2-video-done"
    # Outputs of older versions of the scripts are not needed any more.
    find "$CACHE/video" -mindepth 1 -maxdepth 1 -type d ! -name "$video_hash" -exec rm -rf {} +
fi
export SAM2_VIDEO_MODELS="$VIDEO_MODELS"
