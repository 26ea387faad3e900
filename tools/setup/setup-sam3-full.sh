#!/usr/bin/env bash
# SAM 3's full-size export for the benchmark (issue 59): sam2-export-sam3 --config full, Meta's
# architecture with seeded random weights (840 M parameters; about 90 s and 14 GB resident at
# peak; 3.4 GB on disk). Sourced by scripts/bench.sh, never by the test command (the size). Cached
# outside the repository:
#   $SAM2_DEV_CACHE/sam3/full-<hash>/   keyed by the exporter and the pins, as the reduced export
# Sources setup-sam3.sh first (the venv, CLIP's vocabulary). Exports SAM2_SAM3_FULL_MODELS (and
# SAM2_SAM3_PYTHON, the venv's interpreter, for tools/bench/sam3_torch.py) when the
# export is there; when it is missing and less than 16 GB of memory is available, it says so and
# leaves SAM2_SAM3_FULL_MODELS unset (the bench then skips SAM 3) rather than run the machine out
# of memory.

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
# shellcheck source=setup-sam3.sh
. "$ROOT/tools/setup/setup-sam3.sh"
say() { printf '[setup-sam3-full] %s\n' "$*" >&2; }

setup_begin "SAM 3's full export (sam2-export-sam3 --config full)"
# keyed as setup-sam3.sh keys the reduced export ($export_hash), which keeps it from its pruning
SAM3_FULL_MODELS="$CACHE/sam3/full-$export_hash"
unset SAM2_SAM3_FULL_MODELS
available_kb="$(awk '/^MemAvailable:/ { print $2 }' /proc/meminfo)"
if [ ! -f "$SAM3_FULL_MODELS/.sam2-sam3-export-done" ] && [ "${available_kb:-0}" -lt $((16 * 1024 * 1024)) ]; then
    say "not exporting SAM 3's full configuration: $((available_kb / 1024)) MiB available, the export peaks at 14 GB"
    setup_end skipped
else
    made_once "$SAM3_FULL_MODELS" .sam2-sam3-export-done export.log \
        "exporting SAM 3's full configuration into $SAM3_FULL_MODELS (about 90 s, 14 GB at peak)" \
        env PYTHONPATH="$ROOT/tools/sam2-tools" "$SAM3_VENV/bin/python" -m sam2_tools.export_sam3 \
        --config full --out "$SAM3_FULL_MODELS"
    touch "$SAM3_FULL_MODELS/.last-used"
    export SAM2_SAM3_FULL_MODELS="$SAM3_FULL_MODELS"
    export SAM2_SAM3_PYTHON="$SAM3_VENV/bin/python"
fi
