#!/usr/bin/env bash
# The benchmarks (bench/, the sam2-bench package), in one command (not part of the test run):
#
#     ./scripts/bench.sh [--quick]
#
# Sets up (as tools/setup/setup.sh does), installs the peer's and the chart's pinned Python packages
# (tools/bench/bench-requirements.txt: opencv-python-headless, matplotlib) into .venv, builds the
# release bench and the process-wide allocation counter, and runs the bench: it prints a table and
# writes out/bench.json and out/bench.png. Idempotent; takes about five minutes on 2 cores.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
# shellcheck source=../tools/setup/setup.sh
. "$ROOT/tools/setup/setup.sh"
# The real SAM2.1 hiera-tiny export is what the bench measures (SAM2_BENCH_ENCODER/_DECODER
# name another pair).
# shellcheck source=../tools/setup/setup-real.sh
. "$ROOT/tools/setup/setup-real.sh"
say() { printf '[bench] %s\n' "$*" >&2; }

# Peer and chart packages, pinned; constrained by tools/setup/requirements.txt so that numpy and
# onnxruntime stay exactly what the rest of the project pins.
req_hash="$(cat "$ROOT/tools/bench/bench-requirements.txt" "$ROOT/tools/setup/requirements.txt" | sha256sum | cut -c1-16)"
if [ ! -f "$ROOT/.venv/.sam2-bench-req-$req_hash" ]; then
    say "installing $(grep -v '^#' "$ROOT/tools/bench/bench-requirements.txt" | head -2 | tr '\n' ' ')into .venv"
    "$ROOT/.venv/bin/pip" install -q --disable-pip-version-check \
        -r "$ROOT/tools/bench/bench-requirements.txt" -c "$ROOT/tools/setup/requirements.txt"
    rm -f "$ROOT"/.venv/.sam2-bench-req-*
    touch "$ROOT/.venv/.sam2-bench-req-$req_hash"
fi

say "building the release benches (the sam2-bench package, bench/)"
cargo build --release -p sam2-bench --quiet

# The process-wide allocation counter (LD_PRELOAD), which sees ONNX Runtime's allocations too.
shim="$ROOT/target/release/libbench_alloc_count.so"
preload=""
if command -v cc >/dev/null 2>&1; then
    if [ ! -f "$shim" ] || [ "$ROOT/tools/bench/bench_alloc_count.c" -nt "$shim" ]; then
        cc -O2 -shared -fPIC -o "$shim" "$ROOT/tools/bench/bench_alloc_count.c"
    fi
    preload="$shim"
else
    say "no C compiler: allocations are counted on the Rust side only"
fi

mkdir -p "$ROOT/out"
# matplotlib keeps its font cache and config under the build directory, not the home.
export MPLCONFIGDIR="$ROOT/build/matplotlib"
say "running (uptime: $(uptime))"
LD_PRELOAD="$preload" "$ROOT/target/release/bench" --out "$ROOT/out" "$@"

# The simulated annotation session: first-mask latency without and with pre-encoding.
session_args=()
for a in "$@"; do [ "$a" = "--quick" ] && session_args=(--images 8); done
say "annotation session (uptime: $(uptime))"
"$ROOT/target/release/bench_session" --out "$ROOT/out" "${session_args[@]}"

# Segment everything: the 32x32 grid against ONNX Runtime alone, one predict per point
# and Meta's PyTorch generator.
say "segment everything (uptime: $(uptime))"
"$ROOT/target/release/bench_everything" --out "$ROOT/out"

# What each load-time rewrite buys: every family with each rewrite that ran on it switched off
# alone, and with all off, against every rewrite on (the real exports, set up below when missing).
# Writes out/bench_rewrites.json.
for f in setup-real.sh setup-video.sh setup-edgetam.sh; do
    if [ -f "$ROOT/tools/setup/$f" ]; then
        # shellcheck source=/dev/null
        . "$ROOT/tools/setup/$f"
    fi
done
say "what each rewrite buys (uptime: $(uptime))"
"$ROOT/target/release/bench_rewrites" --out "$ROOT/out"

# Video tracking: the tracker's per-frame cost at steady state against ONNX Runtime
# alone on the same four modules, on the generated tracker and (SAM2_VIDEO_MODELS: the real
# SAM2.1 tiny export of sam2-export-video, tools/setup/setup-video.sh when present) at
# 1280x720 beside its int8 variant (SAM2_VIDEO_INT8) and Meta's PyTorch SAM2VideoPredictor,
# and EdgeTAM's (SAM2_EDGETAM_MODELS: sam2-export-edgetam's export,
# tools/setup/setup-edgetam.sh) beside its int8 variant and its own PyTorch predictor;
# first the real memory attention and image
# encoder alone, the library's sessions (attention fused at load) against ONNX Runtime alone on
# the same files and inputs. Writes out/bench_video.json.
if [ -z "${SAM2_VIDEO_MODELS:-}" ] && [ -f "$ROOT/tools/setup/setup-video.sh" ]; then
    # shellcheck source=/dev/null
    . "$ROOT/tools/setup/setup-video.sh"
fi
if [ -z "${SAM2_EDGETAM_MODELS:-}" ] && [ -f "$ROOT/tools/setup/setup-edgetam.sh" ]; then
    # shellcheck source=/dev/null
    . "$ROOT/tools/setup/setup-edgetam.sh"
fi
say "video tracking (uptime: $(uptime))"
"$ROOT/target/release/bench_video" --out "$ROOT/out"

# SAM 3 (issue 59): encode, a phrase on ready features, memory and the int8 image encoder against
# ONNX Runtime alone, and the encode against Meta's PyTorch, on the full-size export
# (tools/setup/setup-sam3-full.sh: made once, about 90 s and 14 GB at peak, skipped when the
# memory is not there; then cached). The int8 variant is sam2-variant's image encoder beside the
# export's other two graphs, cached in the export's folder. Writes out/bench_sam3.json.
if [ -f "$ROOT/tools/setup/setup-sam3-full.sh" ]; then
    # shellcheck source=../tools/setup/setup-sam3-full.sh
    . "$ROOT/tools/setup/setup-sam3-full.sh"
fi
if [ -n "${SAM2_SAM3_FULL_MODELS:-}" ]; then
    sam3_int8="$SAM2_SAM3_FULL_MODELS/int8-$(sha256sum "$ROOT/tools/sam2-tools/sam2_tools/make_variant.py" | cut -c1-16)"
    if [ ! -f "$sam3_int8/.sam2-variant-done" ]; then
        say "making the int8 variant of SAM 3's image encoder into $sam3_int8"
        rm -rf "$sam3_int8"
        mkdir -p "$sam3_int8"
        # sam2-variant reads one encoder per folder and copies SAM2's decoders only: it is given
        # the image encoder's file, and the language encoder and decoder are linked beside it.
        if "$ROOT/.venv/bin/sam2-variant" int8 "$SAM2_SAM3_FULL_MODELS/sam3_image_encoder.onnx" \
            --out "$sam3_int8" >"$sam3_int8/variant.log" 2>&1; then
            ln -sf "$SAM2_SAM3_FULL_MODELS/sam3_language_encoder.onnx" "$SAM2_SAM3_FULL_MODELS/sam3_decoder.onnx" "$sam3_int8/"
            touch "$sam3_int8/.sam2-variant-done"
        else
            say "sam2-variant failed on SAM 3's image encoder (the end of $sam3_int8/variant.log):"
            tail -n 20 "$sam3_int8/variant.log" >&2
        fi
    fi
    [ -f "$sam3_int8/.sam2-variant-done" ] && export SAM2_SAM3_INT8="$sam3_int8"
    say "SAM 3 (uptime: $(uptime))"
    "$ROOT/target/release/bench_sam3" --out "$ROOT/out"
else
    say "SAM 3 skipped: no full export (tools/setup/setup-sam3-full.sh)"
fi
