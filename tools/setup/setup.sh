#!/usr/bin/env bash
# Idempotent set-up: system packages, the Python venv with the pinned ONNX Runtime wheel and the
# project's model tools, and the generated models. A second run downloads and regenerates nothing.
# Source it (`. tools/setup/setup.sh`) to get SAM2_ONNXRUNTIME_PATH and friends exported.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
VENV="$ROOT/.venv"
MODELS="$ROOT/models"
TOOLS="$ROOT/tools/sam2-tools/sam2_tools"  # the model tools' modules, whose content keys the caches
say() { printf '[setup] %s\n' "$*" >&2; }
. "$ROOT/tools/setup/setup-times.sh"

# ONNX Runtime 1.31 keeps telemetry ids under ~/.cache unless told not to; keep the user's home clean.
export ORT_DISABLE_TELEMETRY=1

# 1. System packages (cmake for the C tests, Mono for the C# tests, pkg-config for the packaging test).
setup_begin "system packages (cmake, pkg-config, Mono)"
need_apt=()
command -v cmake >/dev/null 2>&1 || need_apt+=(cmake)
command -v pkg-config >/dev/null 2>&1 || need_apt+=(pkg-config)
command -v mcs >/dev/null 2>&1 || need_apt+=(mono-mcs)
command -v mono >/dev/null 2>&1 || need_apt+=(mono-runtime)
if ((${#need_apt[@]})); then
    SUDO=""
    [ "$(id -u)" -ne 0 ] && SUDO="sudo"
    say "installing ${need_apt[*]} from Debian"
    $SUDO apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${need_apt[@]}" >/dev/null
    setup_end ran
else
    setup_end cached
fi

# 2. Python venv with the pinned wheels (the ONNX Runtime shared library comes from its wheel).
setup_begin "Python venv .venv (onnxruntime 1.31.1)"
req_hash="$(sha256sum "$ROOT/tools/setup/requirements.txt" | cut -c1-16)"
if [ ! -f "$VENV/.sam2-req-$req_hash" ]; then
    say "creating $VENV with $(grep -v '^#' "$ROOT/tools/setup/requirements.txt" | tr '\n' ' ')"
    rm -rf "$VENV"
    python3 -m venv "$VENV"
    "$VENV/bin/pip" install -q --disable-pip-version-check -r "$ROOT/tools/setup/requirements.txt"
    touch "$VENV/.sam2-req-$req_hash"
    setup_end ran
else
    setup_end cached
fi
ORT_LIB="$(ls "$VENV"/lib/python3*/site-packages/onnxruntime/capi/libonnxruntime.so.1.31.1 2>/dev/null | head -n1)"
if [ -z "$ORT_LIB" ]; then
    say "libonnxruntime.so.1.31.1 not found in the onnxruntime wheel"
    exit 1
fi
export SAM2_ONNXRUNTIME_PATH="$ORT_LIB"
export SAM2_PYTHON="$VENV/bin/python"

# 3. The project's model tools (tools/sam2-tools), editable: sam2-variant for step 5 and
# scripts/variant.sh, sam2_tools.make_variant for tools/references/variant_check.py.
install_tools "$VENV" editable

# 4. Generated models (deterministic; regenerated only when the generator changes).
setup_begin "generated models (models/), the tracking clip, their Python reference and the tracker check"
gen_hash="$(cat "$ROOT/tools/models/gen_models.py" "$ROOT/tools/models/gen_track_models.py" "$ROOT/tools/references/reference_check.py" \
    "$ROOT/tools/models/track_clip.py" "$ROOT/tools/references/track_check.py" "$ROOT/tools/setup/requirements.txt" | sha256sum | cut -c1-16)"
if [ ! -f "$MODELS/.sam2-gen-$gen_hash" ]; then
    say "generating models into $MODELS"
    rm -rf "$MODELS"
    mkdir -p "$MODELS"
    "$VENV/bin/python" "$ROOT/tools/models/gen_models.py" --out "$MODELS" >&2
    "$VENV/bin/python" "$ROOT/tools/models/gen_track_models.py" --out "$MODELS" >&2
    # The tracking clip every suite reads (tools/models/track_clip.py is its one definition).
    "$VENV/bin/python" "$ROOT/tools/models/track_clip.py" --out "$MODELS/track"
    "$VENV/bin/python" "$ROOT/tools/references/reference_check.py" --models "$MODELS" --testdata "$ROOT/testdata" \
        --dump "$MODELS/reference" >/dev/null
    # The tracking modules must really track (a generator bug fails set-up, with the table).
    if ! track_out="$("$VENV/bin/python" "$ROOT/tools/references/track_check.py" --models "$MODELS" 2>&1)"; then
        printf '%s\n' "$track_out" >&2
        exit 1
    fi
    touch "$MODELS/.sam2-gen-$gen_hash"
    setup_end ran
else
    setup_end cached
fi
# 5. The int8 and fp16 precision variants of a generated pair and of the generated tracker
# (sam2-variant, ONNX Runtime's quantiser and float16 converter; seconds), for the
# tests of variants (tests/it/precision.rs, tests/webgpu.rs, tests/it/video.rs), redone when the tool or
# the models change.
setup_begin "int8 and fp16 variants of the generated tiny_a pair and tracker (sam2-variant)"
variant_hash="$( (cat "$TOOLS/make_variant.py"; echo "$gen_hash tiny_a int8 fp16, track int8 fp16") | sha256sum | cut -c1-16)"
if [ ! -f "$MODELS/variants/.sam2-variants-$variant_hash" ]; then
    rm -rf "$MODELS/variants"
    mkdir -p "$MODELS/variants/tiny_a_int8"
    ORT_DISABLE_TELEMETRY=1 "$VENV/bin/sam2-variant" int8 --conv \
        "$MODELS/tiny_a_encoder.onnx" --out "$MODELS/variants/tiny_a_int8" >/dev/null 2>"$MODELS/variants/make.log" ||
        { cat "$MODELS/variants/make.log" >&2; exit 1; }
    ORT_DISABLE_TELEMETRY=1 "$VENV/bin/sam2-variant" fp16 \
        "$MODELS/tiny_a_encoder.onnx" --out "$MODELS/variants/tiny_a_fp16" >/dev/null 2>>"$MODELS/variants/make.log" ||
        { cat "$MODELS/variants/make.log" >&2; exit 1; }
    # The generated tracker's four modules, its image encoder int8 or fp16 (tests/it/video.rs; the
    # C and .NET tracker tests read the int8 one).
    for precision in int8 fp16; do
        ORT_DISABLE_TELEMETRY=1 "$VENV/bin/sam2-variant" "$precision" \
            "$MODELS/track" --out "$MODELS/variants/track_$precision" >/dev/null 2>>"$MODELS/variants/make.log" ||
            { cat "$MODELS/variants/make.log" >&2; exit 1; }
    done
    touch "$MODELS/variants/.sam2-variants-$variant_hash"
    setup_end ran
else
    setup_end cached
fi
export SAM2_MODELS="$MODELS"
export SAM2_TESTDATA="$ROOT/testdata"
