#!/usr/bin/env bash
# Builds the .NET wrapper (csharp/Sam2), its sample and its tests with Mono's mcs into
# build/csharp/, then runs the sample and the tests with mono. The last line of the tests is
# "N passed, M failed"; the exit status is non-zero when anything fails.
#
# Normally called by scripts/test.sh after `. tools/setup/setup.sh`; run alone it sets up itself.
# SAM2_LIB_DIR overrides where libsam2.so is taken from (default: target/release, built here
# with the test hooks).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
cd "$ROOT"

if [ -z "${SAM2_MODELS:-}" ] || [ -z "${SAM2_TESTDATA:-}" ]; then
    . tools/setup/setup.sh
fi
export ORT_DISABLE_TELEMETRY=1

# The tests need the library's test hooks: unless SAM2_LIB_DIR names a library to test, build
# (or bring up to date) the one with them.
if [ -n "${SAM2_LIB_DIR:-}" ]; then
    LIB_DIR="$SAM2_LIB_DIR"
    if [ ! -f "$LIB_DIR/libsam2.so" ]; then
        echo "test-csharp: $LIB_DIR/libsam2.so does not exist (SAM2_LIB_DIR)" >&2
        exit 1
    fi
else
    LIB_DIR="$ROOT/target/release"
    cargo build --release --lib --features test-support --quiet
fi

OUT="$ROOT/build/csharp"
mkdir -p "$OUT"

# Every function of the C ABI must have a P/Invoke declaration (the test hooks of
# tests/c/sam2_test_support.h theirs in the test assembly).
check_pinvokes() { # header, C# file
    local missing
    missing="$(comm -23 \
        <(grep -oE '\bsam2_[a-z0-9_]+\(' "$1" | tr -d '(' | sort -u) \
        <(grep -oE 'static extern [A-Za-z0-9_]+ sam2_[a-z0-9_]+' "$2" | awk '{print $4}' | sort -u))"
    if [ -n "$missing" ]; then
        echo "test-csharp: functions of $1 without a DllImport in $2:" >&2
        echo "$missing" >&2
        exit 1
    fi
}
check_pinvokes include/sam2.h csharp/Sam2/NativeMethods.cs
check_pinvokes tests/c/sam2_test_support.h csharp/Tests/TestSupport.cs

# Constants (#define) without a mirror in NativeMethods.cs are reported, not fatal.
unmirrored="$(comm -23 \
    <(grep -oE '^#define [A-Z0-9_]+ ' include/sam2.h | awk '{print $2}' | sort -u) \
    <(grep -oE 'const [a-z]+ [A-Z0-9_]+ =' csharp/Sam2/NativeMethods.cs | awk '{print $3}' | sort -u))"
if [ -n "$unmirrored" ]; then
    echo "[test-csharp] warning: constants of include/sam2.h not mirrored in NativeMethods.cs: $(echo $unmirrored)" >&2
fi

# C# 7, only mscorlib, System and System.Core; warnings are errors.
MCS=(mcs -langversion:7 -warn:4 -warnaserror+ -nologo -debug -r:System.dll -r:System.Core.dll)
echo "[test-csharp] mcs: Sam2.dll, Sample.exe, Sam2.Tests.exe -> build/csharp/" >&2
"${MCS[@]}" -target:library -unsafe -doc:"$OUT/Sam2.xml" -out:"$OUT/Sam2.dll" csharp/Sam2/*.cs
"${MCS[@]}" -target:exe -r:"$OUT/Sam2.dll" -out:"$OUT/Sample.exe" csharp/Sample/*.cs csharp/Shared/*.cs
"${MCS[@]}" -target:exe -r:"$OUT/Sam2.dll" -out:"$OUT/Sam2.Tests.exe" csharp/Tests/*.cs csharp/Shared/*.cs

# DllImport("sam2") finds libsam2.so next to the assemblies.
ln -sfn "$LIB_DIR/libsam2.so" "$OUT/libsam2.so"
export LD_LIBRARY_PATH="$OUT${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"

# The tests run even when the sample fails, so one run reports everything.
echo "[test-csharp] sample" >&2
sample_status=0
mono --debug "$OUT/Sample.exe" "$SAM2_MODELS" "$SAM2_TESTDATA" || sample_status=$?
if [ "$sample_status" -ne 0 ]; then
    echo "[test-csharp] the sample FAILED (exit status $sample_status)" >&2
fi

echo "[test-csharp] tests" >&2
tests_status=0
mono --debug "$OUT/Sam2.Tests.exe" || tests_status=$?

# The WebGPU tests once more on the device (tools/setup/setup-webgpu.sh), with its ONNX Runtime
# build.
webgpu_status=0
if [ -n "${SAM2_WEBGPU_ONNXRUNTIME:-}" ]; then
    echo "[test-csharp] WebGPU tests on the device (ONNX Runtime with WebGPU, llvmpipe)" >&2
    SAM2_ONNXRUNTIME_PATH="$SAM2_WEBGPU_ONNXRUNTIME" SAM2_CSHARP_WEBGPU=1 \
        mono --debug "$OUT/Sam2.Tests.exe" WebGpuTests || webgpu_status=$?
elif [ "${SAM2_WEBGPU_REQUIRED:-0}" = 1 ]; then
    echo "[test-csharp] SAM2_WEBGPU_REQUIRED=1 but SAM2_WEBGPU_ONNXRUNTIME is not set" >&2
    webgpu_status=1
else
    echo "[test-csharp] WebGPU tests on the device: skipped: no WebGPU device" >&2
fi

[ "$sample_status" -eq 0 ] && [ "$tests_status" -eq 0 ] && [ "$webgpu_status" -eq 0 ]
