#!/usr/bin/env bash
# The GPU checks, for a machine with an NVIDIA GPU and a CUDA build of ONNX Runtime 1.30+:
#   SAM2_ONNXRUNTIME_PATH=/path/to/onnxruntime-gpu/capi/libonnxruntime.so.1.31.1 scripts/test-gpu.sh
# (for example from `pip install onnxruntime-gpu==1.31.1`, with CUDA 12 and cuDNN 9 on the library
# path). Runs tests/it/gpu.rs and the device suite the test command runs on WebGPU (tests/webgpu.rs)
# on CUDA. Without a CUDA provider every check of tests/it/gpu.rs reports itself skipped, and the
# device suite fails (it asks for CUDA under FAIL). The device suite's checks of the real exports
# (the SAM2.1 encoder, decoder and tracker, EdgeTAM) need tools/setup/setup-real.sh and
# setup-edgetam.sh, which download torch: where SAM2_REAL_MODELS, SAM2_VIDEO_MODELS or
# SAM2_EDGETAM_MODELS is unset (a machine that cannot reach PyPI), they are skipped, and the
# script says so.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
GPU_ORT="${SAM2_ONNXRUNTIME_PATH:-}"
. tools/setup/setup.sh
[ -n "$GPU_ORT" ] && export SAM2_ONNXRUNTIME_PATH="$GPU_ORT"
echo "ONNX Runtime: $SAM2_ONNXRUNTIME_PATH"
cargo test --release --test it gpu:: -- --nocapture --test-threads=1
skip=()
if [ -z "${SAM2_REAL_MODELS:-}" ] || [ -z "${SAM2_VIDEO_MODELS:-}" ]; then
    echo "SAM2_REAL_MODELS or SAM2_VIDEO_MODELS unset: the real SAM2.1 checks of the device suite are skipped"
    skip+=(--skip the_real_sam2)
fi
if [ -z "${SAM2_EDGETAM_MODELS:-}" ]; then
    echo "SAM2_EDGETAM_MODELS unset: the EdgeTAM check of the device suite is skipped"
    skip+=(--skip edgetam)
fi
SAM2_DEVICE_PROVIDER=cuda SAM2_WEBGPU_ONNXRUNTIME="$SAM2_ONNXRUNTIME_PATH" SAM2_WEBGPU_REQUIRED=1 \
    cargo test --release --test webgpu -- --nocapture --test-threads=1 "${skip[@]}"
