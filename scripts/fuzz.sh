#!/usr/bin/env bash
# Fuzzes the embedding-file loader and the ONNX splitter for a bounded time each (default 60 s),
# with corpora seeded from real files. Needs cargo-fuzz (installed here if missing); the stable
# toolchain runs it with RUSTC_BOOTSTRAP=1, since cargo-fuzz passes nightly-only flags.
#   scripts/fuzz.sh [seconds]
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
SECONDS_EACH="${1:-60}"
. scripts/setup.sh
command -v cargo-fuzz >/dev/null 2>&1 || cargo install cargo-fuzz --locked
export RUSTC_BOOTSTRAP=1

# Seeds: real embedding files (one per contract family) and real models.
mkdir -p fuzz/corpus/embedding_file fuzz/corpus/onnx_split
if [ -z "$(ls -A fuzz/corpus/embedding_file)" ]; then
    cargo run --release --quiet --example write_seed_embeddings -- fuzz/corpus/embedding_file
fi
for m in tiny_a_encoder tiny_c_encoder tiny_a_decoder; do
    cp -n "$SAM2_MODELS/$m.onnx" fuzz/corpus/onnx_split/ 2>/dev/null || true
done

for target in embedding_file onnx_split; do
    echo "==> fuzzing $target for ${SECONDS_EACH}s"
    (cd fuzz && cargo fuzz run "$target" "corpus/$target" -- -max_total_time="$SECONDS_EACH" -rss_limit_mb=2048 -max_len=17000000)
done
