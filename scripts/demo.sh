#!/usr/bin/env bash
# Runs the demos, C host programs that load libsam2.so through its header:
#  - sam2_demo encodes the bundled demo image once, runs a click, a box and a click with a
#    negative click, and writes each mask and an overlay PNG into out/;
#  - sam2_track_demo follows a disc (and a square) through the generated 24-frame clip with the
#    generated video tracker, prints per frame whether each is present and its IoU with the
#    ground truth, and writes out/track_NN.png overlays and out/track.png, an animated PNG.
# Does its own set-up (tools/setup/setup.sh).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
. tools/setup/setup.sh
cargo build --release --lib
cmake -S tests/c -B build/c -DCMAKE_BUILD_TYPE=Release -DSAM2_LIB_DIR="$ROOT/target/release" >/dev/null
cmake --build build/c -j 2 --target sam2_demo sam2_track_demo >/dev/null
mkdir -p out
build/c/sam2_demo "$SAM2_MODELS/tiny_a_encoder.onnx" "$SAM2_MODELS/tiny_a_decoder.onnx" testdata/demo.ppm out
build/c/sam2_track_demo "$SAM2_MODELS/track" out
