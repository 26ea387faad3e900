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
# Normally called by scripts/test.sh after `. tools/setup.sh`; run alone it sets up itself.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
if [ -z "${SAM2_MODELS:-}" ] || [ -z "${SAM2_PYTHON:-}" ]; then
    . tools/setup.sh
fi
say() { printf '[windows] %s\n' "$*"; }
fail() { printf '[windows] FAILED: %s\n' "$*" >&2; exit 1; }

TARGET=x86_64-pc-windows-gnu
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
rustup target list --installed | grep -qx "$TARGET" || rustup target add "$TARGET"

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
cargo build --release --lib --target "$TARGET" --quiet
LIB="$ROOT/target/$TARGET/release"
header_functions="$(grep -oE '\bsam2_[a-z0-9_]+\(' include/sam2.h | tr -d '(' | sort -u)"
exported="$(x86_64-w64-mingw32-objdump -p "$LIB/sam2.dll" | awk '/\[ *[0-9]+\] sam2_/ {print $NF}' | sort -u)"
[ "$header_functions" = "$exported" ] || fail "sam2.dll exports differ from include/sam2.h: $(diff <(echo "$header_functions") <(echo "$exported") | tr '\n' ' ')"
[ -f "$LIB/libsam2.dll.a" ] || fail "no import library libsam2.dll.a"
say "ok: sam2.dll exports the $(echo "$header_functions" | wc -l) functions of sam2.h, no test hooks; import library libsam2.dll.a"

# ---- the test build, the programs, Wine ----
say "cargo build --release --lib --target $TARGET --features test-support (for the C suite)"
cargo build --release --lib --target "$TARGET" --features test-support --quiet
OUT="$ROOT/build/windows"
rm -rf "$OUT/bin" && mkdir -p "$OUT/bin"
cp "$LIB/sam2.dll" "$ORT_WIN/onnxruntime.dll" "$ORT_WIN/onnxruntime_providers_shared.dll" \
    /usr/x86_64-w64-mingw32/lib/libwinpthread-1.dll "$OUT/bin/"
cat >"$OUT/prng.c" <<'EOF'
/* For Wine 8 only (see tools/test-windows.sh): ProcessPrng, as Windows' bcryptprimitives.dll has it. */
#include <windows.h>
#include <bcrypt.h>
__declspec(dllexport) BOOL WINAPI ProcessPrng(PBYTE data, SIZE_T len) {
    return BCryptGenRandom(NULL, data, (ULONG)len, BCRYPT_USE_SYSTEM_PREFERRED_RNG) >= 0;
}
EOF
"$MINGW" -O2 -shared -o "$OUT/bin/bcryptprimitives.dll" "$OUT/prng.c" -lbcrypt

CFLAGS=(-O2 -std=c11 -Wall -Werror -Iinclude -Itests/c -Iexamples/c -DSAM2_TEST_MODELS='""' -DSAM2_TEST_TESTDATA='""')
"$MINGW" "${CFLAGS[@]}" examples/c/demo.c examples/c/png_write.c -L"$LIB" -lsam2 -o "$OUT/bin/demo.exe"
# The C tests that use only C11 and the library; the others need POSIX (mkdtemp, symlinks,
# FIFOs, fork, dlopen) and are not ported.
PORTABLE=(test_lifecycle test_devices test_cache test_segment test_threads)
for t in "${PORTABLE[@]}"; do
    "$MINGW" "${CFLAGS[@]}" "tests/c/$t.c" tests/c/common.c -L"$LIB" -lsam2 -o "$OUT/bin/$t.exe"
done

winpath() { printf 'Z:%s' "${1//\//\\}"; }
export WINEPREFIX="$OUT/wineprefix" WINEDEBUG=-all WINEDLLOVERRIDES="mscoree,mshtml="
run() { # name, program and arguments
    local name="$1"
    shift
    local start log="$OUT/$name.log"
    start=$(date +%s)
    if env SAM2_MODELS="$(winpath "$SAM2_MODELS")" SAM2_TESTDATA="$(winpath "$SAM2_TESTDATA")" \
        SAM2_ONNXRUNTIME_PATH="$(winpath "$OUT/bin/onnxruntime.dll")" \
        timeout 900 "$WINE" "$@" >"$log" 2>&1; then
        say "ok: $name under Wine ($(($(date +%s) - start)) s)"
    else
        grep -v '^$' "$log" | tail -20 >&2
        fail "$name under Wine (log: build/windows/$name.log)"
    fi
}
say "Wine: $("$WINE" --version 2>/dev/null); ONNX Runtime from the win_amd64 wheel"
rm -rf "$OUT/demo-out" && mkdir -p "$OUT/demo-out"
# The demo finds onnxruntime.dll beside sam2.dll (no SAM2_ONNXRUNTIME_PATH).
(cd "$OUT/bin" && env -u SAM2_ONNXRUNTIME_PATH SAM2_MODELS= WINEPREFIX="$WINEPREFIX" WINEDEBUG=-all \
    timeout 600 "$WINE" demo.exe "$(winpath "$SAM2_MODELS/tiny_a_encoder.onnx")" \
    "$(winpath "$SAM2_MODELS/tiny_a_decoder.onnx")" "$(winpath "$ROOT/testdata/demo.ppm")" \
    "$(winpath "$OUT/demo-out")" >"$OUT/demo.log" 2>&1) || { tail -20 "$OUT/demo.log" >&2; fail "the demo under Wine"; }
say "ok: the demo under Wine: $(grep -c 'score' "$OUT/demo.log") masks"
# The same masks as on Linux: run the Linux demo into a scratch folder and compare the files.
mkdir -p "$OUT/demo-linux"
cmake -S tests/c -B build/c -DCMAKE_BUILD_TYPE=Release -DSAM2_LIB_DIR="$ROOT/target/release" >/dev/null
cmake --build build/c -j 2 --target sam2_demo >/dev/null
build/c/sam2_demo "$SAM2_MODELS/tiny_a_encoder.onnx" "$SAM2_MODELS/tiny_a_decoder.onnx" testdata/demo.ppm "$OUT/demo-linux" >/dev/null
for f in "$OUT"/demo-linux/*.png; do
    cmp -s "$f" "$OUT/demo-out/$(basename "$f")" || fail "$(basename "$f") differs between Windows (Wine) and Linux"
done
say "ok: the demo's $(ls "$OUT"/demo-linux/*.png | wc -l) PNG files are byte-identical on Windows (Wine) and Linux"
for t in "${PORTABLE[@]}"; do
    (cd "$OUT/bin" && run "$t" "$t.exe")
done
say "all Windows checks passed"
