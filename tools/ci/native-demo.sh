#!/usr/bin/env bash
# Runs the demo, built natively against target/release/libsam2.so, into OUT: the masks the
# portable build (tools/ci/test-platforms.sh) and the Windows build under Wine
# (tools/ci/test-windows.sh) must reproduce byte for byte. Built in build/c-native, never in
# build/c: that directory belongs to scripts/test.sh's C suite, whose valgrind run may still be
# going on the library it names. Expects $SAM2_MODELS (tools/setup/setup.sh).
#   tools/ci/native-demo.sh OUT
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
OUT="$1"
cd "$ROOT"
cmake -S tests/c -B build/c-native -DCMAKE_BUILD_TYPE=Release -DSAM2_LIB_DIR="$ROOT/target/release" >/dev/null
cmake --build build/c-native -j 2 --target sam2_demo >/dev/null
build/c-native/sam2_demo "$SAM2_MODELS/tiny_a_encoder.onnx" "$SAM2_MODELS/tiny_a_decoder.onnx" testdata/demo.ppm "$OUT" >/dev/null
