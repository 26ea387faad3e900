#!/usr/bin/env bash
# Windows x64: cross-builds sam2.dll (and its import library) with Debian's mingw-w64, checks it
# exports exactly the functions of include/sam2.h, then runs the demo and the portable part of
# the C suite under Wine against ONNX Runtime's own Windows DLL, taken from the pinned
# onnxruntime==1.31.1 win_amd64 wheel on PyPI. The demo's masks must be byte-identical to the
# Linux demo's.
#
# Set-up (idempotent, cached): Debian's gcc-mingw-w64-x86-64-posix and wine64, the
# x86_64-pc-windows-gnu Rust target, and the wheel (kept in .venv/ort-win/).
#
# Wine 8.0 (Debian 12) has no bcryptprimitives.dll, which Rust's standard library imports for
# its random numbers (ProcessPrng); a two-line stand-in that forwards to BCryptGenRandom is
# built into build/windows/ for Wine only. Windows itself has the real one; nothing shipped
# contains the stand-in.
#
# Normally called by scripts/test.sh after `. tools/setup/setup.sh` and
# `. tools/setup/setup-real.sh`; run alone it sets up itself.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
cd "$ROOT"
if [ -z "${SAM2_MODELS:-}" ] || [ -z "${SAM2_PYTHON:-}" ]; then
    . tools/setup/setup.sh
fi
# The real SAM2 exports, for test_real_models (its first pair under Wine), and their hostile
# copies, for the bad-input sweep.
if [ -z "${SAM2_REAL_MODELS:-}" ] || [ -z "${SAM2_REAL_HOSTILE:-}" ]; then
    . tools/setup/setup-real.sh
fi
# EdgeTAM's image pair, for test_real_models.
if [ -z "${SAM2_EDGETAM_MODELS:-}" ]; then
    . tools/setup/setup-edgetam.sh
fi
say() { printf '[windows] %s\n' "$*"; }
fail() { printf '[windows] FAILED: %s\n' "$*" >&2; exit 1; }

TARGET="$(bash tools/ci/rust-targets.sh --windows)"
MINGW=x86_64-w64-mingw32-gcc
WINE=/usr/lib/wine/wine64

# ---- set-up ----
need_apt=()
command -v "$MINGW" >/dev/null 2>&1 || need_apt+=(gcc-mingw-w64-x86-64-posix)
[ -x "$WINE" ] || need_apt+=(wine64)
if ((${#need_apt[@]})); then
    SUDO=""
    [ "$(id -u)" -eq 0 ] || SUDO=sudo
    say "installing ${need_apt[*]} from Debian"
    $SUDO apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${need_apt[@]}" >/dev/null
fi

ORT_WIN="$ROOT/.venv/ort-win"
if [ ! -f "$ORT_WIN/onnxruntime.dll" ]; then
    say "fetching ONNX Runtime's Windows DLL from the onnxruntime==1.31.1 win_amd64 wheel"
    rm -rf "$ORT_WIN.tmp" && mkdir -p "$ORT_WIN.tmp"
    "$SAM2_PYTHON" -m pip download --quiet onnxruntime==1.31.1 --platform win_amd64 \
        --only-binary=:all: --no-deps --python-version 3.11 -d "$ORT_WIN.tmp"
    "$SAM2_PYTHON" - "$ORT_WIN.tmp" <<'EOF'
import glob, os, sys, zipfile
d = sys.argv[1]
with zipfile.ZipFile(glob.glob(os.path.join(d, "onnxruntime-*.whl"))[0]) as z:
    for name in ("onnxruntime.dll", "onnxruntime_providers_shared.dll"):
        with open(os.path.join(d, name), "wb") as f:
            f.write(z.read("onnxruntime/capi/" + name))
EOF
    rm -f "$ORT_WIN.tmp"/*.whl
    rm -rf "$ORT_WIN" && mv "$ORT_WIN.tmp" "$ORT_WIN"
fi

# ---- the shipped DLL: exactly the header's functions ----
say "cargo build --release --lib --target $TARGET (the shipped sam2.dll)"
start=$SECONDS
cargo build --release --lib --target "$TARGET" --quiet
say "built: the shipped sam2.dll ($((SECONDS - start)) s)"
LIB="$ROOT/target/$TARGET/release"
header_functions="$(grep -oE '\bsam2_[a-z0-9_]+\(' include/sam2.h | tr -d '(' | sort -u)"
exported="$(x86_64-w64-mingw32-objdump -p "$LIB/sam2.dll" | awk '/\[ *[0-9]+\] sam2_/ {print $NF}' | sort -u)"
[ "$header_functions" = "$exported" ] || fail "sam2.dll exports differ from include/sam2.h: $(diff <(echo "$header_functions") <(echo "$exported") | tr '\n' ' ')"
[ -f "$LIB/libsam2.dll.a" ] || fail "no import library libsam2.dll.a"
say "ok: sam2.dll exports the $(echo "$header_functions" | wc -l) functions of sam2.h, no test hooks; import library libsam2.dll.a"

# ---- the test build, the programs, Wine ----
say "cargo build --release --lib --target $TARGET --features test-support (for the C suite)"
start=$SECONDS
cargo build --release --lib --target "$TARGET" --features test-support --quiet
say "built: sam2.dll with the test hooks ($((SECONDS - start)) s)"
# The layout, as on Linux (where libsam2.so in target/release has no ONNX Runtime beside it):
#   bin/    sam2.dll and what it needs under Wine, the test programs and the fake runtimes; no
#           onnxruntime.dll, so the tests find it only where SAM2_ONNXRUNTIME_PATH says;
#   ort/    onnxruntime.dll (SAM2_ONNXRUNTIME_PATH);
#   demo/   the demo with onnxruntime.dll beside sam2.dll, found there;
#   libsam2_beside_found/, libsam2_beside_missing/   the discovery test, its own sam2.dll with and
#           without onnxruntime.dll beside it (Windows loads the DLLs of the program's directory).
OUT="$ROOT/build/windows"
rm -rf "$OUT/bin" "$OUT/ort" "$OUT/demo" "$OUT"/libsam2_beside_*
mkdir -p "$OUT/bin" "$OUT/ort" "$OUT/demo"
cp "$LIB/sam2.dll" /usr/x86_64-w64-mingw32/lib/libwinpthread-1.dll "$OUT/bin/"
cp "$ORT_WIN/onnxruntime.dll" "$ORT_WIN/onnxruntime_providers_shared.dll" "$OUT/ort/"
cat >"$OUT/prng.c" <<'EOF'
/* For Wine 8 only (see tools/ci/test-windows.sh): ProcessPrng, as Windows' bcryptprimitives.dll has it. */
#include <windows.h>
#include <bcrypt.h>
__declspec(dllexport) BOOL WINAPI ProcessPrng(PBYTE data, SIZE_T len) {
    return BCryptGenRandom(NULL, data, (ULONG)len, BCRYPT_USE_SYSTEM_PREFERRED_RNG) >= 0;
}
EOF
"$MINGW" -O2 -shared -o "$OUT/bin/bcryptprimitives.dll" "$OUT/prng.c" -lbcrypt

CFLAGS=(-O2 -std=c11 -Wall -Werror -Iinclude -Itests/c -Iexamples/c -DSAM2_TEST_MODELS='""' -DSAM2_TEST_TESTDATA='""')
"$MINGW" "${CFLAGS[@]}" examples/c/demo.c examples/c/png_write.c -L"$LIB" -lsam2 -o "$OUT/demo/demo.exe"
cp "$OUT/bin/"*.dll "$OUT/ort/"*.dll "$OUT/demo/"
# The C suite's programs (tests/c/common.h maps the few POSIX calls they use; where a check has
# no Windows counterpart the program prints that it skips it, and why); test_runtime_discovery
# is built into its own directories below.
# The longest under Wine first (22, 17, 10, 7, 6 s... on 2 idle cores, 2026-12-03): they run two at
# a time below, and the short ones fill in behind them.
PORTABLE=(test_bad_input test_real_models test_segment test_everything test_tracker test_stress
    test_threads test_null_sweep test_embedding_files test_cache test_errors test_lifecycle
    test_devices test_runtime_null_api test_runtime_bad_version test_mask_formats)
for t in "${PORTABLE[@]}"; do
    extra=()
    case "$t" in test_null_sweep | test_bad_input) extra=(tests/c/sweep.c) ;; esac
    "$MINGW" "${CFLAGS[@]}" "tests/c/$t.c" tests/c/common.c examples/c/track_clip.c "${extra[@]}" -L"$LIB" -lsam2 -o "$OUT/bin/$t.exe"
done
# The stand-ins for onnxruntime.dll (tests/c/fake_ort.c): one reports 1.20.0, one 1.31.1 without
# the API.
"$MINGW" -O2 -std=c11 -Wall -Wextra -Werror -shared -DFAKE_ORT_VERSION='"1.20.0"' tests/c/fake_ort.c -o "$OUT/bin/fake_ort.dll"
"$MINGW" -O2 -std=c11 -Wall -Wextra -Werror -shared -DFAKE_ORT_VERSION='"1.31.1"' tests/c/fake_ort.c -o "$OUT/bin/fake_ort_null_api.dll"
for kind in found missing; do
    dir="$OUT/libsam2_beside_$kind"
    mkdir -p "$dir"
    "$MINGW" "${CFLAGS[@]}" tests/c/test_runtime_discovery.c -L"$LIB" -lsam2 -o "$dir/test_runtime_discovery.exe"
    cp "$OUT/bin/sam2.dll" "$OUT/bin/libwinpthread-1.dll" "$OUT/bin/bcryptprimitives.dll" "$dir/"
    [ "$kind" = missing ] || cp "$OUT/ort/"*.dll "$dir/"
done

winpath() { printf 'Z:%s' "${1//\//\\}"; }
# The checks a program skipped on Windows (it prints "<program>: <check>: skipped (<why>)").
skips() {
    local n
    n=$(grep -c ': skipped (' "$1" || true)
    [ "$n" -eq 0 ] || printf '; %s check(s) skipped, see its log' "$n"
}
export WINEPREFIX="$OUT/wineprefix" WINEDEBUG=-all WINEDLLOVERRIDES="mscoree,mshtml="
run() { # name, program and arguments
    local name="$1"
    shift
    local start log="$OUT/$name.log"
    start=$(date +%s)
    if env SAM2_MODELS="$(winpath "$SAM2_MODELS")" SAM2_TESTDATA="$(winpath "$SAM2_TESTDATA")" SAM2_STRESS_SECONDS=5 \
        SAM2_REAL_MODELS="$(winpath "$SAM2_REAL_MODELS")" SAM2_REAL_HOSTILE="$(winpath "$SAM2_REAL_HOSTILE")" \
        SAM2_EDGETAM_MODELS="$(winpath "$SAM2_EDGETAM_MODELS")" SAM2_TEST_REAL_FIRST_PAIRS=1 \
        SAM2_ONNXRUNTIME_PATH="$(winpath "$OUT/ort/onnxruntime.dll")" \
        timeout 900 "$WINE" "$@" >"$log" 2>&1; then
        say "ok: $name under Wine ($(($(date +%s) - start)) s)$(skips "$log")"
    else
        grep -v '^$' "$log" | tail -20 >&2
        fail "$name under Wine (log: build/windows/$name.log)"
    fi
}
say "Wine: $("$WINE" --version 2>/dev/null); ONNX Runtime from the win_amd64 wheel"
rm -rf "$OUT/demo-out" && mkdir -p "$OUT/demo-out"
# The demo finds onnxruntime.dll beside sam2.dll (no SAM2_ONNXRUNTIME_PATH).
(cd "$OUT/demo" && env -u SAM2_ONNXRUNTIME_PATH SAM2_MODELS= WINEPREFIX="$WINEPREFIX" WINEDEBUG=-all \
    timeout 600 "$WINE" demo.exe "$(winpath "$SAM2_MODELS/tiny_a_encoder.onnx")" \
    "$(winpath "$SAM2_MODELS/tiny_a_decoder.onnx")" "$(winpath "$ROOT/testdata/demo.ppm")" \
    "$(winpath "$OUT/demo-out")" >"$OUT/demo.log" 2>&1) || { tail -20 "$OUT/demo.log" >&2; fail "the demo under Wine"; }
say "ok: the demo under Wine: $(grep -c 'score' "$OUT/demo.log") masks"
# The same masks as on Linux: run the Linux demo into a scratch folder and compare the files.
mkdir -p "$OUT/demo-linux"
bash tools/ci/native-demo.sh "$OUT/demo-linux"
for f in "$OUT"/demo-linux/*.png; do
    cmp -s "$f" "$OUT/demo-out/$(basename "$f")" || fail "$(basename "$f") differs between Windows (Wine) and Linux"
done
say "ok: the demo's $(ls "$OUT"/demo-linux/*.png | wc -l) PNG files are byte-identical on Windows (Wine) and Linux"
# Two programs at a time, as ctest runs them on Linux (each program keeps its files apart), so that
# Wine's start-up and the programs' single-threaded parts of one overlap the other's work.
declare -A program_of=()
running=0
failed=()
reap() { # waits for one program to end, and keeps its name if it failed
    local pid status
    wait -n -p pid && status=0 || status=$?
    running=$((running - 1))
    [ "$status" -eq 0 ] || failed+=("${program_of[$pid]}")
}
for t in "${PORTABLE[@]}"; do
    args=()
    case "$t" in
    test_bad_input) args=("$(winpath "$OUT/bin/fake_ort.dll")" "$(winpath "$OUT/bin/fake_ort_null_api.dll")") ;;
    test_runtime_bad_version) args=("$(winpath "$OUT/bin/fake_ort.dll")") ;;
    test_runtime_null_api) args=("$(winpath "$OUT/bin/fake_ort_null_api.dll")") ;;
    esac
    (cd "$OUT/bin" && run "$t" "$t.exe" "${args[@]}") &
    program_of[$!]="$t"
    running=$((running + 1))
    [ "$running" -lt 2 ] || reap
done
while [ "$running" -gt 0 ]; do reap; done
[ "${#failed[@]}" -eq 0 ] || fail "under Wine: ${failed[*]}"
# Discovery: neither variable set; the program's sam2.dll looks beside itself.
for kind in found missing; do
    (cd "$OUT/libsam2_beside_$kind" && env -u SAM2_ONNXRUNTIME_PATH -u ORT_DYLIB_PATH \
        WINEPREFIX="$WINEPREFIX" WINEDEBUG=-all timeout 300 "$WINE" test_runtime_discovery.exe "$kind" \
        >"$OUT/test_runtime_discovery_$kind.log" 2>&1) ||
        { tail -20 "$OUT/test_runtime_discovery_$kind.log" >&2; fail "test_runtime_discovery $kind under Wine"; }
    say "ok: test_runtime_discovery $kind under Wine"
done
bad_input="$(grep -E '^all ' "$OUT/test_bad_input.log" | awk '{print $3 " of " $2}')"
say "the bad-input sweep under Wine: $bad_input inputs handled; skipped on Windows:"
grep -h ': skipped (' "$OUT"/*.log | sed 's/^/[windows]   /' || true
say "all Windows checks passed"
