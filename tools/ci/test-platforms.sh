#!/usr/bin/env bash
# The platforms beyond this machine's Linux x86-64:
#   - older Linux: libsam2.so built against glibc 2.28 (tools/ci/build-portable.sh), its highest
#     GLIBC symbol version read with objdump, and the demo and the C tests that need no test hook
#     run against it (the demo's masks byte-identical to the native build's);
#   - macOS (x86-64, arm64) and Linux arm64: the library type-checked and linted (no linker or
#     machine for them here, so nothing is linked or run);
#   - Windows x64: tools/ci/test-windows.sh builds sam2.dll and runs it under Wine (left to the
#     caller with --no-windows: scripts/test.sh runs it as a stage of its own, to time it apart).
# Rust targets come from rustup (tools/ci/rust-targets.sh: installed once, then reused). Each check
# prints its seconds.
#
# Normally called by scripts/test.sh after `. tools/setup/setup.sh`; run alone it sets up itself.
#   tools/ci/test-platforms.sh [--no-windows]
set -euo pipefail
WINDOWS=1
[ "${1:-}" = --no-windows ] && WINDOWS=0
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
cd "$ROOT"
if [ -z "${SAM2_MODELS:-}" ] || [ -z "${SAM2_PYTHON:-}" ]; then
    . tools/setup/setup.sh
fi
started=$SECONDS
# Each line with the seconds since the one before.
say() {
    printf '[platforms] %s (%d s)\n' "$*" $((SECONDS - started))
    started=$SECONDS
}

# (A command substitution, not a process one, so that a failed install stops the run here.)
checked="$(bash tools/ci/rust-targets.sh --checked)"
mapfile -t CHECKED <<<"$checked"
for target in "${CHECKED[@]}"; do
    cargo clippy --release --lib --target "$target" --quiet -- -D warnings
    say "ok: $target: the library type-checks, clippy clean (not linked, not run)"
done
# ---- glibc 2.28 ----
DIR="$(bash tools/ci/build-portable.sh)"
highest="$(objdump -T "$DIR/libsam2.so" | grep -oE 'GLIBC_[0-9]+\.[0-9]+(\.[0-9]+)?' | sed 's/GLIBC_//' | sort -V | tail -1)"
[ "$(printf '%s\n2.28\n' "$highest" | sort -V | tail -1)" = 2.28 ] ||
    { echo "[platforms] FAILED: the portable libsam2.so needs GLIBC_$highest (more than 2.28)" >&2; exit 1; }
say "ok: the portable libsam2.so needs at most GLIBC_$highest (ONNX Runtime's wheel: manylinux_2_28)"
B=build/c-glibc-2.28
PORTABLE_TESTS=(test_lifecycle test_devices test_cache test_segment test_threads)
cmake -S tests/c -B "$B" -DCMAKE_BUILD_TYPE=Release -DSAM2_LIB_DIR="$DIR" >/dev/null
cmake --build "$B" -j 2 --target sam2_demo "${PORTABLE_TESTS[@]}" >/dev/null
(cd "$B" && ctest --output-on-failure -R "^($(IFS='|'; echo "${PORTABLE_TESTS[*]}"))\$" >/dev/null) ||
    { echo "[platforms] FAILED: C tests against the portable libsam2.so (see $B/Testing)" >&2; exit 1; }
rm -rf "$B/demo-out" && mkdir -p "$B/demo-out" "$B/demo-native"
"$B/sam2_demo" "$SAM2_MODELS/tiny_a_encoder.onnx" "$SAM2_MODELS/tiny_a_decoder.onnx" testdata/demo.ppm "$B/demo-out" >/dev/null
bash tools/ci/native-demo.sh "$B/demo-native"
for f in "$B"/demo-native/*.png; do
    cmp -s "$f" "$B/demo-out/$(basename "$f")" ||
        { echo "[platforms] FAILED: $(basename "$f") differs between the portable and the native build" >&2; exit 1; }
done
say "ok: ${#PORTABLE_TESTS[@]} C tests and the demo (identical masks) run against the portable libsam2.so"

[ "$WINDOWS" = 0 ] || bash tools/ci/test-windows.sh
