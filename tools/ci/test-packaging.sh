#!/usr/bin/env bash
# Tests the packaging the way hosts consume it (docs/install.md), all inside one temporary
# directory that is removed at the end:
#
#  1. scripts/install.sh into a temporary prefix: the layout, the SONAME (libsam2.so.<abi> by the
#     rule of capi/libsam2/build.rs, computed here from Cargo.toml), the header, sam2.pc, the CMake package
#     and its version file; the sam2 command in bin/, run from there; a DESTDIR-staged install.
#  2. A C program built with `pkg-config --cflags --libs sam2` and a C++ program built with CMake's
#     find_package(sam2 CONFIG REQUIRED) run from that prefix with no LD_LIBRARY_PATH: each checks
#     that SAM2_VERSION_*, sam2_version() and Cargo.toml agree, and segments testdata/shapes.ppm.
#  3. ONNX Runtime found in each layout it ships in, built in temporary directories from the
#     pinned wheel's library: the PyPI wheel (onnxruntime/capi/libonnxruntime.so.1.31.1, named by
#     file or directory), the Microsoft.ML.OnnxRuntime NuGet package
#     (runtimes/linux-x64/native/libonnxruntime.so), a system install (lib/libonnxruntime.so ->
#     .so.1 -> .so.1.31.1 on the loader's path), and installed beside libsam2; and nowhere.
#  4. The NuGet package (scripts/pack-nuget.sh): its layout and metadata check, that check failing
#     on a broken package, and a Mono program compiled against the packaged Sam2.dll, run in the
#     layouts a .NET build gives an application (published: everything in the app directory;
#     portable: runtimes/linux-x64/native/).
#
# Normally called by scripts/test.sh; run alone it does the set-up itself.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
cd "$ROOT"
if [ -z "${SAM2_MODELS:-}" ] || [ -z "${SAM2_ONNXRUNTIME_PATH:-}" ]; then
    . tools/setup/setup.sh
fi
export ORT_DISABLE_TELEMETRY=1
cargo build --release --lib --quiet
cargo build --release -p sam2-cli --quiet

T="$(mktemp -d "${TMPDIR:-/tmp}/sam2-packaging.XXXXXX")"
trap 'rm -rf "$T"' EXIT
say() { printf '[packaging] %s\n' "$*"; }
fail() { printf '[packaging] FAILED: %s\n' "$*" >&2; exit 1; }
# Runs a program as a host would: none of sam2's or ONNX Runtime's variables, no LD_LIBRARY_PATH.
host() { env -u SAM2_ONNXRUNTIME_PATH -u ORT_DYLIB_PATH -u LD_LIBRARY_PATH "$@"; }
soname_of() { readelf -d "$1" | sed -n 's/.*Library soname: \[\(.*\)\]/\1/p'; }
needed_of() { readelf -d "$1" | sed -n 's/.*Shared library: \[\(libsam2[^]]*\)\]/\1/p'; }
runpath_of() { readelf -d "$1" | sed -n 's/.*Library r\(un\)\{0,1\}path: \[\(.*\)\]/\2/p'; }

# The shipped library is built without the test-support feature: no test hook is exported.
hooks="$(nm -D --defined-only target/release/libsam2.so | awk '$3 ~ /^sam2_test_/ {print $3}')"
[ -z "$hooks" ] || fail "the shipped libsam2.so exports test hooks: $hooks"
say "the shipped libsam2.so exports no test hooks"

version="$(awk -F'"' '/^\[/{section=$0} section=="[package]" && /^version *=/{print $2; exit}' Cargo.toml)"
IFS=. read -r major minor _ <<<"$version"
if [ "$major" = 0 ]; then abi="0.$minor"; else abi="$major"; fi
ENC="$SAM2_MODELS/tiny_a_encoder.onnx"
DEC="$SAM2_MODELS/tiny_a_decoder.onnx"
WHEEL_ORT="$SAM2_ONNXRUNTIME_PATH"            # .../site-packages/onnxruntime/capi/libonnxruntime.so.1.31.1
ort_file="$(basename "$WHEEL_ORT")"

# ---- 1. Install ------------------------------------------------------------------------------
P="$T/prefix"
scripts/install.sh --no-build --prefix "$P" >/dev/null
L="$P/lib"
[ -f "$L/libsam2.so.$version" ] && [ ! -L "$L/libsam2.so.$version" ] || fail "no $L/libsam2.so.$version"
[ "$(readlink "$L/libsam2.so.$abi")" = "libsam2.so.$version" ] || fail "libsam2.so.$abi is not a link to libsam2.so.$version"
[ "$(readlink "$L/libsam2.so")" = "libsam2.so.$abi" ] || fail "libsam2.so is not a link to libsam2.so.$abi"
[ "$(soname_of "$L/libsam2.so.$version")" = "libsam2.so.$abi" ] ||
    fail "SONAME is $(soname_of "$L/libsam2.so.$version"), Cargo.toml's $version needs libsam2.so.$abi"
cmp -s include/sam2.h "$P/include/sam2.h" || fail "installed sam2.h differs from include/sam2.h"
export PKG_CONFIG_PATH="$L/pkgconfig"
[ "$(pkg-config --modversion sam2)" = "$version" ] || fail "pkg-config --modversion sam2 is not $version"
cmake -DVERSION_FILE="$L/cmake/sam2/sam2ConfigVersion.cmake" -DVERSION="$version" \
    -P tests/packaging/check_version_file.cmake >"$T/version-file.log" 2>&1 ||
    { cat "$T/version-file.log" >&2; fail "sam2ConfigVersion.cmake"; }
say "ok: install into a prefix: libsam2.so.$version, SONAME libsam2.so.$abi, links, sam2.h, sam2.pc $version, CMake package and its version rules"
[ -x "$P/bin/sam2" ] || fail "no $P/bin/sam2"
host SAM2_ONNXRUNTIME_PATH="$WHEEL_ORT" "$P/bin/sam2" info "$SAM2_MODELS/tiny_a" >"$T/sam2-info.log" 2>&1 ||
    { cat "$T/sam2-info.log" >&2; fail "the installed sam2 command"; }
grep -q 'role: encoder' "$T/sam2-info.log" || { cat "$T/sam2-info.log" >&2; fail "sam2 info did not describe the encoder"; }
say "ok: the sam2 command installed as bin/sam2 runs from the prefix (sam2 info on tiny_a)"

DESTDIR="$T/stage" scripts/install.sh --no-build --prefix /opt/sam2 >/dev/null
[ -f "$T/stage/opt/sam2/lib/libsam2.so.$version" ] && [ -f "$T/stage/opt/sam2/include/sam2.h" ] ||
    fail "DESTDIR install did not stage under $T/stage/opt/sam2"
grep -qx 'prefix=/opt/sam2' "$T/stage/opt/sam2/lib/pkgconfig/sam2.pc" || fail "DESTDIR leaked into sam2.pc"
say "ok: DESTDIR staging (files under DESTDIR, paths of the real prefix)"

# ---- 2. Consumers ----------------------------------------------------------------------------
# shellcheck disable=SC2046
"${CC:-cc}" -std=c99 -Wall -Wextra -Wpedantic -Werror -o "$T/consumer" tests/packaging/consumer.c \
    $(pkg-config --cflags --libs sam2)
[ "$(needed_of "$T/consumer")" = "libsam2.so.$abi" ] || fail "the pkg-config program needs '$(needed_of "$T/consumer")'"
[ "$(runpath_of "$T/consumer")" = "$L" ] || fail "the pkg-config program's RUNPATH is '$(runpath_of "$T/consumer")', not $L"
host SAM2_ONNXRUNTIME_PATH="$WHEEL_ORT" "$T/consumer" "$ENC" "$DEC" "$SAM2_TESTDATA" "$version" >"$T/run.log" ||
    { cat "$T/run.log" >&2; fail "the pkg-config program"; }
say "ok: pkg-config --cflags --libs sam2: a C program (NEEDED libsam2.so.$abi, RUNPATH $L) segments shapes.ppm: $(tail -n1 "$T/run.log")"

cmake -S tests/packaging -B "$T/cmake-build" -DCMAKE_PREFIX_PATH="$P" -DCMAKE_BUILD_TYPE=Release >"$T/cmake.log" 2>&1 ||
    { cat "$T/cmake.log" >&2; fail "configuring the CMake consumer"; }
cmake --build "$T/cmake-build" >>"$T/cmake.log" 2>&1 || { cat "$T/cmake.log" >&2; fail "building the CMake consumer"; }
cxx="$T/cmake-build/sam2_consumer_cpp"
[ "$(needed_of "$cxx")" = "libsam2.so.$abi" ] || fail "the CMake program needs '$(needed_of "$cxx")'"
host SAM2_ONNXRUNTIME_PATH="$(dirname "$WHEEL_ORT")" "$cxx" "$ENC" "$DEC" "$SAM2_TESTDATA" "$version" >"$T/run.log" ||
    { cat "$T/run.log" >&2; fail "the CMake program"; }
say "ok: find_package(sam2 CONFIG REQUIRED) + sam2::sam2: a C++ program (RUNPATH $(runpath_of "$cxx")) segments shapes.ppm: $(tail -n1 "$T/run.log")"

# ---- 3. Where ONNX Runtime comes from --------------------------------------------------------
# expect_found LABEL EXPECTED-IN-LOG [VAR=VALUE...]: the C program finds ONNX Runtime there.
expect_found() {
    local label="$1" want="$2"
    shift 2
    host "$@" "$T/consumer" "$ENC" "$DEC" "$SAM2_TESTDATA" "$version" "$want" >"$T/run.log" 2>&1 ||
        { cat "$T/run.log" >&2; fail "$label"; }
    say "$(printf 'ok: %s: %s' "$label" "$(sed -n 's/.*loaded ONNX Runtime/loaded ONNX Runtime/p' "$T/run.log")" | sed "s|$T|\$T|g")"
}

# Nowhere: the not-found message names the places tried (unless this machine has a system one).
if ldconfig -p 2>/dev/null | grep -q libonnxruntime; then
    say "skipped: none provided (this machine has ONNX Runtime in the loader's cache)"
else
    if host "$T/consumer" "$ENC" "$DEC" "$SAM2_TESTDATA" "$version" >"$T/run.log" 2>&1; then
        fail "ONNX Runtime was found with none provided"
    fi
    grep -q "$L/libonnxruntime.so (beside libsam2): not present" "$T/run.log" &&
        grep -q "system library search" "$T/run.log" || { cat "$T/run.log" >&2; fail "the not-found message"; }
    say "ok: none provided: sam2_runtime_init fails naming \$T/prefix/lib (beside libsam2) and the system search"
fi

# The PyPI wheel: capi/ holds only the fully versioned file.
wheel="$T/wheel/site-packages/onnxruntime/capi"
mkdir -p "$wheel"
ln -s "$WHEEL_ORT" "$wheel/$ort_file"
expect_found "PyPI wheel, the file in SAM2_ONNXRUNTIME_PATH" "$wheel/$ort_file (environment variable SAM2_ONNXRUNTIME_PATH)" \
    SAM2_ONNXRUNTIME_PATH="$wheel/$ort_file"
expect_found "PyPI wheel, its capi/ directory in SAM2_ONNXRUNTIME_PATH" "$wheel/$ort_file (environment variable SAM2_ONNXRUNTIME_PATH)" \
    SAM2_ONNXRUNTIME_PATH="$wheel"
expect_found "PyPI wheel, its capi/ directory in ORT_DYLIB_PATH" "$wheel/$ort_file (environment variable ORT_DYLIB_PATH)" \
    ORT_DYLIB_PATH="$wheel"

# The Microsoft.ML.OnnxRuntime NuGet package (as restored into ~/.nuget/packages).
ms_native="$T/nuget-packages/microsoft.ml.onnxruntime/1.31.1/runtimes/linux-x64/native"
mkdir -p "$ms_native"
ln -s "$WHEEL_ORT" "$ms_native/libonnxruntime.so"
expect_found "Microsoft.ML.OnnxRuntime NuGet layout, runtimes/linux-x64/native/ in SAM2_ONNXRUNTIME_PATH" \
    "$ms_native/libonnxruntime.so (environment variable SAM2_ONNXRUNTIME_PATH)" SAM2_ONNXRUNTIME_PATH="$ms_native"

# A system install (Microsoft's release archive or a distribution package): the link chain in a
# lib/ directory on the loader's path. LD_LIBRARY_PATH stands in for ld.so.conf + ldconfig here.
sys_lib="$T/system/usr/local/lib"
mkdir -p "$sys_lib"
ln -s "$WHEEL_ORT" "$sys_lib/$ort_file"
ln -s "$ort_file" "$sys_lib/libonnxruntime.so.1"
ln -s libonnxruntime.so.1 "$sys_lib/libonnxruntime.so"
expect_found "system install (lib/libonnxruntime.so -> .so.1 -> $ort_file on the loader's path)" \
    "from libonnxruntime.so.1 (system library search)" LD_LIBRARY_PATH="$sys_lib"

# Installed beside libsam2 (the same prefix's lib/), in each naming.
for name in libonnxruntime.so libonnxruntime.so.1 "$ort_file"; do
    ln -s "$WHEEL_ORT" "$L/$name"
    expect_found "installed beside libsam2 as $L/$name" "$L/$name (beside libsam2)"
    rm "$L/$name"
done
# The environment variable wins over what is beside libsam2.
ln -s "$WHEEL_ORT" "$L/libonnxruntime.so"
expect_found "SAM2_ONNXRUNTIME_PATH before beside libsam2" "(environment variable SAM2_ONNXRUNTIME_PATH)" \
    SAM2_ONNXRUNTIME_PATH="$wheel"
rm "$L/libonnxruntime.so"

# ---- 4. NuGet --------------------------------------------------------------------------------
SAM2_LIB_DIR="$ROOT/target/release" scripts/pack-nuget.sh "$T/feed" >"$T/pack.log" 2>&1 ||
    { cat "$T/pack.log" >&2; fail "scripts/pack-nuget.sh"; }
nupkg="$T/feed/Sam2.$version.nupkg"
say "ok: $(grep 'nupkg check' "$T/pack.log" | sed "s|$T|\$T|g") ($(du -k "$nupkg" | cut -f1) KiB)"
# scripts/test.sh runs tools/ci/test-windows.sh first, so the Windows toolchain is there and the
# package must hold sam2.dll (its PE machine checked by nupkg.py).
python3 tools/ci/nupkg.py check "$nupkg" --cargo Cargo.toml --require-win >/dev/null ||
    fail "the NuGet package lacks runtimes/win-x64/native/sam2.dll"
say "ok: the NuGet package holds runtimes/win-x64/native/sam2.dll (x86-64 PE) beside linux-x64's libsam2.so"

# The check must reject a broken package: no native library, another version, a stray manifest.
python3 - "$nupkg" "$T/broken.nupkg" <<'EOF'
import sys, zipfile
src, dst = sys.argv[1], sys.argv[2]
with zipfile.ZipFile(src) as zin, zipfile.ZipFile(dst, "w") as zout:
    for item in zin.infolist():
        data = zin.read(item)
        if item.filename.endswith("libsam2.so"):
            continue
        if item.filename.endswith(".nuspec"):
            data = data.replace(b"<version>", b"<version>9.")
            zout.writestr("lib/extra.nuspec", data)
        zout.writestr(item, data)
EOF
if python3 tools/ci/nupkg.py check "$T/broken.nupkg" --cargo Cargo.toml >"$T/broken.log" 2>&1; then
    fail "tools/ci/nupkg.py check accepted a broken package"
fi
for problem in "runtimes/linux-x64/native/libsam2.so is missing" "<version> is 9." "exactly one manifest" "file name"; do
    grep -qF "$problem" "$T/broken.log" || { cat "$T/broken.log" >&2; fail "nupkg check did not report: $problem"; }
done
say "ok: the nupkg check rejects a package without its native library, of another version, with two manifests"

# A .NET application using the package. mcs compiles against the packaged Sam2.dll; mono runs it.
pkg="$T/packages/sam2/$version"
mkdir -p "$pkg"
python3 -m zipfile -e "$nupkg" "$pkg"
app="$T/app"
mkdir -p "$app"
cp "$pkg/lib/netstandard2.0/Sam2.dll" "$app/"
mcs -langversion:7 -warnaserror+ -nologo -r:"$app/Sam2.dll" -out:"$app/NuGetConsumer.exe" \
    tests/packaging/NuGetConsumer.cs csharp/Shared/*.cs
# Published (dotnet publish -r linux-x64): every package's native assets in the app directory.
cp "$pkg/runtimes/linux-x64/native/libsam2.so" "$app/"
ln -s "$WHEEL_ORT" "$app/libonnxruntime.so"
host mono "$app/NuGetConsumer.exe" "$ENC" "$DEC" "$SAM2_TESTDATA" "$version" >"$T/run.log" 2>&1 ||
    { cat "$T/run.log" >&2; fail "the .NET program, published layout"; }
say "ok: NuGet, published app: Sam2.dll, libsam2.so and libonnxruntime.so side by side; $(tail -n1 "$T/run.log")"
# Portable (dotnet build): native assets under runtimes/linux-x64/native/, which .NET's host puts
# on the native search path from the .deps.json; Mono does not read it, so LD_LIBRARY_PATH does.
rm "$app/libsam2.so" "$app/libonnxruntime.so"
native="$app/runtimes/linux-x64/native"
mkdir -p "$native"
cp "$pkg/runtimes/linux-x64/native/libsam2.so" "$native/"
ln -s "$WHEEL_ORT" "$native/libonnxruntime.so"
host LD_LIBRARY_PATH="$native" mono "$app/NuGetConsumer.exe" "$ENC" "$DEC" "$SAM2_TESTDATA" "$version" >"$T/run.log" 2>&1 ||
    { cat "$T/run.log" >&2; fail "the .NET program, portable layout"; }
say "ok: NuGet, portable app: runtimes/linux-x64/native/ holds libsam2.so and libonnxruntime.so; $(grep -o 'from .*' "$T/run.log" | head -n1 | sed "s|$T|\$T|g")"

say "all packaging checks passed"
