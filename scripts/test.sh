#!/usr/bin/env bash
# Runs every test: Rust (unit, integration, header check, video parity with Meta's predictor and
# EdgeTAM's), a short soak on the real SAM2.1 tiny
# pair, the Python reference check, the C suite under ctest (the stress run on generated and real
# models among it; once more under valgrind), a short fuzzing run, the C# suite under Mono, the
# Windows build under Wine (tools/ci/test-windows.sh), the packaging test
# (tools/ci/test-packaging.sh), and format/lint checks; then prints the
# reliability report (scripts/reliability.sh --print).
# Does its own set-up (tools/setup/setup.sh) and is safe to run again: nothing is downloaded twice.
# Every suite is run with `bash path`, never behind an `if [ -x … ]`: a suite whose file lost its
# run bit still runs, and a missing one fails the run instead of being skipped.
# Ends with the timing table (tools/ci/timing.py: every stage, every set-up step and whether it was
# cached, every test binary or program over 30 s), printed on failure too and written to
# target/reliability/timing.txt.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"

# The figures of the reliability report, written by the tests that measure them, and the timing.
export SAM2_REPORT_DIR="$ROOT/target/reliability"
rm -rf "$SAM2_REPORT_DIR"
TIMING="$SAM2_REPORT_DIR/timing"
mkdir -p "$TIMING"
cp /proc/loadavg "$TIMING/load.txt" 2>/dev/null || true
export SAM2_SETUP_TIMES="$TIMING/setup.tsv"
export SAM2_KILL_TRIALS="${SAM2_KILL_TRIALS:-200}"

# `step "name (what it runs)"` starts a stage and ends the one before; each stage's seconds and
# outcome go to $TIMING/stages.tsv (named by the text before " (").
stage=""
stage_start=0
end_stage() {
    [ -n "$stage" ] || return 0
    local us=$((${EPOCHREALTIME/[.,]/} - stage_start))
    printf '%s\t%d.%d\t%s\n' "$stage" $((us / 1000000)) $((us % 1000000 / 100000)) "$1" >>"$TIMING/stages.tsv"
    stage=""
}
step() {
    end_stage ok
    stage="${1%% (*}"
    stage_start="${EPOCHREALTIME/[.,]/}"
    printf '\n==> %s\n' "$*"
}
# On exit, passed or failed (set -e stops at the failing command, whose status the run keeps).
finish() {
    local rc=$?
    # A run stopped during the set-up leaves no build behind it.
    [ -z "${prebuild:-}" ] || kill "$prebuild" 2>/dev/null || true
    [ -z "${rust_targets:-}" ] || kill "$rust_targets" 2>/dev/null || true
    # Nor a valgrind lane still going (its valgrind processes are its children).
    [ -z "${valgrind_lane:-}" ] || pkill -P "$valgrind_lane" 2>/dev/null || true
    [ -z "${valgrind_lane:-}" ] || kill "$valgrind_lane" 2>/dev/null || true
    if [ "$rc" -eq 0 ]; then end_stage ok; else end_stage "FAILED (exit status $rc)"; fi
    printf '\n'
    python3 "$ROOT/tools/ci/timing.py" "$TIMING" | tee "$SAM2_REPORT_DIR/timing.txt" || true
    exit "$rc"
}
trap finish EXIT
# Runs a suite with its output also in $TIMING/NAME.log, which the timing table reads (the
# seconds of each test binary or program).
logged_suite() {
    local name="$1"
    shift
    "$@" 2>&1 | tee -a "$TIMING/$name.log"
}

# The Rust test builds start beside the set-up: a first run's set-up waits on downloads (torch's
# wheels, Debian's packages) while a core is idle. The builds need none of it (ONNX Runtime is
# loaded at run time): the library's tests, the command's (a first run compiled them in the middle
# of `cargo test` below, about a minute), then cargo-fuzz for the fuzzing stage (about a minute of
# compiling in a first run). What they do not finish during the downloads shares the cores with
# the exports (measured on a fresh machine: the real exports took 66 -> 131 s, while the command's
# test build, about 65 s, and cargo-fuzz's install, about 20 s of the fuzzing stage, came off the
# stages after the set-up; docs/tests.md, stop 55). Their errors, if any, come again from the stages
# that need them. Beside them, the Rust standard libraries of the targets the platform stages
# check (downloads only), waited for before those stages.
{
    cargo test --release --no-run --quiet
    cargo test --release -p sam2-cli --no-run --quiet
    bash scripts/fuzz.sh --install-only
} >"$TIMING/prebuild.log" 2>&1 &
prebuild=$!
bash tools/ci/rust-targets.sh --all >"$TIMING/rust-targets.log" 2>&1 &
rust_targets=$!

step "set-up (tools/setup/setup.sh, tools/setup/setup-ffmpeg.sh, tools/setup/setup-real.sh, tools/setup/setup-video.sh, tools/setup/setup-edgetam.sh, tools/setup/setup-sam3.sh and tools/setup/setup-webgpu.sh; each step cached; the Rust test build beside it)"
. tools/setup/setup.sh
# ffmpeg for the command's video files (Debian's package, once).
. tools/setup/setup-ffmpeg.sh
# The real SAM2 architecture from the real exporters (cached outside the clone: the first run
# downloads torch and exports for a few minutes, later runs reuse both).
. tools/setup/setup-real.sh
# EdgeTAM (issue 31): its export and the reference of its own predictors, in a small venv over
# setup-real.sh's (the first run: seconds for the venv, minutes for the export and the reference).
. tools/setup/setup-edgetam.sh
# SAM 3 (issue 59): Meta's code in a small venv over the real one, and its tokenizer's ids on the
# phrase corpus (seconds; once).
. tools/setup/setup-sam3.sh
# The WebGPU device rig (Mesa's llvmpipe Vulkan driver, ONNX Runtime 1.30 with WebGPU): the device
# path runs on a real device in every run; where it is set up, a device test that cannot run fails.
. tools/setup/setup-webgpu.sh

step "the Rust test build started with the set-up (what it had left)"
wait "$prebuild" || true

step "cargo fmt --check"
cargo fmt --all -- --check

step "documentation links (every relative link and #anchor in the markdown files resolves)"
python3 tools/ci/check_links.py $(git ls-files '*.md')

step "cargo clippy -- -D warnings (the shipped library, then every target with the test hooks)"
cargo clippy --release --lib -- -D warnings
cargo clippy --release --all-targets -- -D warnings
cargo clippy --release -p sam2-cli --all-targets -- -D warnings
cargo clippy --release -p sam2-bench --all-targets -- -D warnings

# The C suite runs on a copy of the library with its test hooks (build/c-lib/), which the cargo
# builds below cannot replace, so that valgrind can go through it beside cargo test.
step "build libsam2.so with its test hooks and the C suite on a copy of it (build/c-lib/)"
cargo build --release --lib --features test-support
rm -rf build/c-lib
mkdir -p build/c-lib
cp target/release/libsam2.so build/c-lib/
cmake -S tests/c -B build/c -DCMAKE_BUILD_TYPE=Release -DSAM2_LIB_DIR="$ROOT/build/c-lib" >/dev/null
cmake --build build/c -j 2 >/dev/null

# Valgrind (about 5 minutes of both cores) goes through the C programs at the lowest priority
# beside the Rust suites, on the time they leave idle (single-threaded stretches, loading,
# Python): they run about as fast as alone, and what valgrind has left is waited for after ctest
# (waiting at the very end gained nothing and slowed the stages in between). Its output goes to
# its log, printed when it is waited for; its outcome fails the run there.
nice -n 19 bash tools/ci/test-valgrind.sh >"$TIMING/valgrind.log" 2>&1 &
valgrind_lane=$!
valgrind_start="${EPOCHREALTIME/[.,]/}"

step "cargo test (unit, integration, header check; then the sam2 command)"
logged_suite cargo-test cargo test --release
printf 'video tracking against Meta'"'"'s SAM2VideoPredictor (tests/it/video_real.rs; every frame in %s):\n' \
    "$SAM2_REPORT_DIR/video_parity.txt"
awk 'END { print }' "$SAM2_REPORT_DIR/video_parity.txt"
awk 'END { print }' "$SAM2_REPORT_DIR/video_int8.txt"
printf 'the int8 variant against the float32 original (tests/it/precision.rs; every case in %s):\n' \
    "$SAM2_REPORT_DIR/precision_agreement.txt"
awk 'END { print }' "$SAM2_REPORT_DIR/precision_agreement.txt"
printf 'EdgeTAM against its own predictors (tests/it/video_real.rs, tests/it/real_models.rs; every frame and case in %s/edgetam_*):\n' \
    "$SAM2_REPORT_DIR"
for f in edgetam_video_parity.txt edgetam_video_parity_default.txt edgetam_video_int8.txt edgetam_image_parity.txt; do
    awk 'END { print }' "$SAM2_REPORT_DIR/$f"
done
printf 'the device path on WebGPU (tests/webgpu.rs, on llvmpipe when the rig is set up):\n'
cat "$SAM2_REPORT_DIR/webgpu_weights.txt" 2>/dev/null || echo "no WebGPU device: the device tests were skipped"
echo
logged_suite cargo-test cargo test --release -p sam2-cli
bash scripts/sam2.sh --version

step "soak on the real SAM2.1 tiny pair, short (scripts/reliability.sh runs it longer)"
SAM2_SOAK_PAIRS=real_samexporter SAM2_SOAK_ENCODES=10 SAM2_SOAK_PREDICTS=100 \
    SAM2_SOAK_REPORT=soak-real.tsv logged_suite cargo-test cargo test --release --test soak -- --nocapture

step "Python reference check (onnxruntime's Python API, numpy pre/post-processing)"
"$SAM2_PYTHON" tools/references/reference_check.py --models "$SAM2_MODELS" --testdata "$SAM2_TESTDATA"

step "variants: int8 quantises only the feed-forward layers of a video module; fp16 keeps a tensor past float16's range in float32 (tools/references/variant_check.py)"
ORT_DISABLE_TELEMETRY=1 "$SAM2_PYTHON" tools/references/variant_check.py

step "libsam2.so with its test hooks again in target/release (cargo test may have built it there without; mask formats and C# link it, the packaging step builds the shipped one)"
cargo build --release --lib --features test-support

step "mask formats against pycocotools (RLE strings and counts, polygons rasterised back, through the C ABI)"
"$SAM2_PYTHON" tools/references/mask_formats_check.py --lib "$ROOT/target/release/libsam2.so" --models "$SAM2_MODELS" --testdata "$SAM2_TESTDATA"

step "C tests under ctest"
(cd build/c && logged_suite ctest ctest --output-on-failure -j 2)

step "C tests under valgrind (what was left of it; it started beside cargo test)"
valgrind_status=0
wait "$valgrind_lane" || valgrind_status=$?
valgrind_lane=""
cat "$TIMING/valgrind.log"
us=$((${EPOCHREALTIME/[.,]/} - valgrind_start))
printf 'valgrind: %d s from its start beside cargo test to its end\n' $((us / 1000000))
[ "$valgrind_status" -eq 0 ] || exit "$valgrind_status"

step "fuzzing, 10 s a target (scripts/fuzz.sh; longer: scripts/reliability.sh)"
bash scripts/fuzz.sh 10

step "C# tests under Mono"
bash tools/ci/test-csharp.sh

step "other platforms: macOS and Linux arm64 checked, the glibc 2.28 build run (tools/ci/test-platforms.sh)"
# The targets' downloads started with the set-up; a failed one is retried by the stages themselves.
wait "$rust_targets" || cat "$TIMING/rust-targets.log"
rust_targets=""
bash tools/ci/test-platforms.sh --no-windows

step "Windows x64 built and run under Wine (tools/ci/test-windows.sh)"
logged_suite wine bash tools/ci/test-windows.sh

step "packaging: install, pkg-config and CMake consumers, ONNX Runtime layouts, NuGet package"
bash tools/ci/test-packaging.sh

step "reliability report"
bash scripts/reliability.sh --print

end_stage ok
printf '\n==> all tests passed\n'
