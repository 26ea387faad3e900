#!/usr/bin/env bash
# Fuzzes every parser of untrusted bytes for a bounded time each (default 60 s): the embedding-
# file loader, the ONNX splitter, host pixel buffers, prompt batches and the load-time graph
# rewrites against ONNX Runtime (the checks are in
# src/test_support/fuzzing.rs). Corpora are seeded with real files, the committed seeds and
# regression inputs.
# Prints the executions run per target (and writes them to $SAM2_REPORT_DIR/fuzz.tsv when set).
# A crash stops the script: keep its input as a regression test by copying it from
# fuzz/artifacts/<target>/ to fuzz/regressions/<target>/ (tests/it/fuzz_regressions.rs replays it).
# Needs cargo-fuzz (installed here if missing); the stable toolchain runs it with
# RUSTC_BOOTSTRAP=1, since cargo-fuzz passes nightly-only flags.
#   scripts/fuzz.sh [seconds-per-target] [target...]
#   scripts/fuzz.sh --install-only   (cargo-fuzz alone, no set-up: scripts/test.sh runs it beside
#                                     its set-up)
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
install_cargo_fuzz() {
    command -v cargo-fuzz >/dev/null 2>&1 || cargo install cargo-fuzz --locked
}
if [ "${1:-}" = --install-only ]; then
    install_cargo_fuzz
    exit 0
fi
SECONDS_EACH="${1:-60}"
shift || true
TARGETS=("$@")
[ ${#TARGETS[@]} -gt 0 ] || TARGETS=(embedding_file onnx_split pixels prompts rewrites)
. tools/setup/setup.sh
install_cargo_fuzz

# Seeds: real embedding files (one per contract family), real models, the committed seeds
# (fuzz/seeds/<target>/: hostile cut-down real-architecture models, written by
# tools/models/hostile_seeds.py) and every regression.
for t in "${TARGETS[@]}"; do
    mkdir -p "fuzz/corpus/$t"
    cp -n fuzz/seeds/"$t"/* fuzz/regressions/"$t"/* "fuzz/corpus/$t/" 2>/dev/null || true
done
if [ -d fuzz/corpus/embedding_file ] && [ -z "$(ls fuzz/corpus/embedding_file/*.sam2 2>/dev/null)" ]; then
    cargo run --release --quiet --example write_seed_embeddings -- fuzz/corpus/embedding_file >/dev/null
fi
if [ -d fuzz/corpus/onnx_split ]; then
    for m in tiny_a_encoder tiny_c_encoder tiny_a_decoder; do
        cp -n "$SAM2_MODELS/$m.onnx" fuzz/corpus/onnx_split/ 2>/dev/null || true
    done
fi

# Only cargo-fuzz's own builds (fuzz/target) get RUSTC_BOOTSTRAP: the seed writer above builds in
# the project's target/, where that variable would make the crates whose build scripts probe for
# nightly (thiserror, zerocopy, half) rebuild there, and again on the next ordinary build.
export RUSTC_BOOTSTRAP=1
(cd fuzz && cargo fuzz build -O 2>&1 | tail -1)
# Each target is one libFuzzer process on one core: as many run side by side as there are cores,
# each writing its own log, read back in the targets' order once the group is done.
parallel="$(nproc 2>/dev/null || echo 1)"
total=0
report=""
logs=()
pids=()
flush() {
    local i crashed=""
    for i in "${!pids[@]}"; do
        if ! wait "${pids[$i]}"; then crashed="${crashed:-$i}"; fi
    done
    for i in "${!pids[@]}"; do
        local target="${running[$i]}" log="${logs[$i]}"
        if [ "$crashed" = "$i" ]; then
            tail -40 "$log"
            echo "fuzz target $target crashed: copy its input from fuzz/artifacts/$target/ to fuzz/regressions/$target/"
            rm -f "${logs[@]}"
            exit 1
        fi
        runs="$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)"
        rm -f "$log"
        echo "    $target: ${runs:-0} executions, no crash"
        total=$((total + ${runs:-0}))
        report+="$target	$SECONDS_EACH	${runs:-0}
"
    done
    logs=()
    pids=()
    running=()
}
running=()
for target in "${TARGETS[@]}"; do
    log="$(mktemp)"
    echo "==> fuzzing $target for ${SECONDS_EACH}s"
    (cd fuzz && exec cargo fuzz run -O "$target" "corpus/$target" -- -max_total_time="$SECONDS_EACH" \
        -rss_limit_mb=2048 -max_len=17000000 -print_final_stats=1) >"$log" 2>&1 &
    pids+=("$!")
    logs+=("$log")
    running+=("$target")
    [ "${#pids[@]}" -lt "$parallel" ] || flush
done
flush
echo "fuzz: $total executions over ${#TARGETS[@]} targets, no crash"
if [ -n "${SAM2_REPORT_DIR:-}" ]; then
    printf 'target\tseconds\texecutions\n%s' "$report" > "$SAM2_REPORT_DIR/fuzz.tsv"
fi
