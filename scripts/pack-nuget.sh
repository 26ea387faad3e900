#!/usr/bin/env bash
# Builds the NuGet package of the .NET wrapper: OUT_DIR/Sam2.<version>.nupkg (default OUT_DIR:
# build/nuget), holding lib/netstandard2.0/Sam2.dll (+ Sam2.xml) compiled by Mono's mcs from
# csharp/Sam2, runtimes/linux-x64/native/libsam2.so and runtimes/win-x64/native/sam2.dll (when a
# Windows build is at hand, see below), then checks its layout and metadata
# (tools/ci/nupkg.py). The version is Cargo.toml's. Needs mcs and python3 (tools/setup/setup.sh
# installs Mono); builds libsam2.so with cargo unless SAM2_LIB_DIR names a directory that holds it.
#
# Usage: scripts/pack-nuget.sh [OUT_DIR]
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
OUT="$(realpath -m "${1:-$ROOT/build/nuget}")"

if [ -n "${SAM2_LIB_DIR:-}" ]; then
    LIB="$SAM2_LIB_DIR/libsam2.so"
else
    (cd "$ROOT" && cargo build --release --lib)
    LIB="$ROOT/target/release/libsam2.so"
fi
[ -f "$LIB" ] || { echo "pack-nuget: $LIB does not exist" >&2; exit 1; }
# The Windows x64 library: SAM2_WIN_LIB_DIR, or cross-built here when mingw-w64 is installed
# (tools/ci/test-windows.sh installs it); without either the package is Linux-only, and says so.
WIN_LIB=""
if [ -n "${SAM2_WIN_LIB_DIR:-}" ]; then
    WIN_LIB="$SAM2_WIN_LIB_DIR/sam2.dll"
    [ -f "$WIN_LIB" ] || { echo "pack-nuget: $WIN_LIB does not exist" >&2; exit 1; }
elif command -v x86_64-w64-mingw32-gcc >/dev/null 2>&1 &&
    rustup target list --installed 2>/dev/null | grep -qx x86_64-pc-windows-gnu; then
    (cd "$ROOT" && cargo build --release --lib --target x86_64-pc-windows-gnu --quiet)
    WIN_LIB="$ROOT/target/x86_64-pc-windows-gnu/release/sam2.dll"
else
    echo "pack-nuget: no Windows toolchain (mingw-w64 and the x86_64-pc-windows-gnu target): the package holds linux-x64 only" >&2
fi

version="$(awk -F'"' '/^\[/{section=$0} section=="[package]" && /^version *=/{print $2; exit}' "$ROOT/Cargo.toml")"
work="$(mktemp -d "${TMPDIR:-/tmp}/sam2-nuget.XXXXXX")"
trap 'rm -rf "$work"' EXIT
# The assembly carries the package's version, as the .NET SDK would write it from <Version>.
numeric="${version%%[-+]*}"
cat >"$work/Version.cs" <<EOF
[assembly: System.Reflection.AssemblyVersion("$numeric.0")]
[assembly: System.Reflection.AssemblyFileVersion("$numeric.0")]
[assembly: System.Reflection.AssemblyInformationalVersion("$version")]
[assembly: System.Reflection.AssemblyProduct("sam2")]
[assembly: System.Reflection.AssemblyTitle("Sam2")]
EOF
mcs -langversion:7 -warn:4 -warnaserror+ -nologo -optimize+ -r:System.dll -r:System.Core.dll \
    -target:library -unsafe -doc:"$work/Sam2.xml" -out:"$work/Sam2.dll" \
    "$ROOT"/csharp/Sam2/*.cs "$work/Version.cs"

python3 "$ROOT/tools/ci/nupkg.py" pack --dll "$work/Sam2.dll" --xml "$work/Sam2.xml" --native "$LIB" \
    ${WIN_LIB:+--native-win "$WIN_LIB"} --cargo "$ROOT/Cargo.toml" --out "$OUT" >/dev/null
package="$OUT/Sam2.$version.nupkg"
python3 "$ROOT/tools/ci/nupkg.py" check "$package" --cargo "$ROOT/Cargo.toml" --csproj "$ROOT/csharp/Sam2/Sam2.csproj"
echo "$package"
