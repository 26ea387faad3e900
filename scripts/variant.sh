#!/usr/bin/env bash
# Makes a precision variant of a SAM2 export (sam2-variant, the project's model tools, from the
# project's venv with the pinned ONNX Runtime wheel, whose quantisation and float16 tools do the
# work): int8 for CPUs, fp16 for GPUs.
#
#   scripts/variant.sh int8 ~/exports/sam2.1_hiera_tiny --out ~/exports/sam2.1_hiera_tiny-int8
#   scripts/variant.sh fp16 ~/exports/sam2.1_hiera_tiny --out ~/exports/sam2.1_hiera_tiny-fp16
#
# The variant's pair is written under the source's file names in the --out directory (the encoder
# converted, the decoder copied), so `--model OUT` finds it as it finds the original; `sam2 info`
# says which variant a model is ([Models](docs/models.md#precision-variants)).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
. "$ROOT/tools/setup/setup.sh"
export ORT_DISABLE_TELEMETRY=1
exec "$VENV/bin/sam2-variant" "$@"  # installed by the set-up (tools/sam2-tools)
