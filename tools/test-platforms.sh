#!/usr/bin/env bash
# The platforms beyond Linux x86-64: the library is type-checked and linted for macOS (x86-64
# and arm64) and Linux arm64 (no linker for them here, so nothing is linked or run), then
# tools/test-windows.sh builds sam2.dll and runs it under Wine. Rust targets come from rustup
# (installed once, then reused).
#
# Normally called by scripts/test.sh after `. tools/setup.sh`; run alone it sets up itself.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
if [ -z "${SAM2_MODELS:-}" ] || [ -z "${SAM2_PYTHON:-}" ]; then
    . tools/setup.sh
fi
say() { printf '[platforms] %s\n' "$*"; }

CHECKED=(x86_64-apple-darwin aarch64-apple-darwin aarch64-unknown-linux-gnu)
installed="$(rustup target list --installed)"
for target in "${CHECKED[@]}"; do
    grep -qx "$target" <<<"$installed" || rustup target add "$target"
done
for target in "${CHECKED[@]}"; do
    cargo clippy --release --lib --target "$target" --quiet -- -D warnings
    say "ok: $target: the library type-checks, clippy clean (not linked, not run)"
done
bash tools/test-windows.sh
