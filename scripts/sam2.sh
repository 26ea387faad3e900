#!/usr/bin/env bash
# Runs the sam2 command (docs/cli.md) from this clone: on first use it sets up
# (tools/setup/setup.sh: ONNX Runtime from the pinned wheel, the generated models in models/) and
# builds the command; then it runs `sam2` with the arguments given, from the current directory, and
# exits with its status. Installed with scripts/install.sh, the same command is PREFIX/bin/sam2.
#
#   scripts/sam2.sh segment photo.jpg --model models/tiny_a --point 320,240 -o out/photo
#   scripts/sam2.sh --help
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
. "$ROOT/tools/setup/setup.sh"
cargo build --release --quiet -p sam2-cli --manifest-path "$ROOT/Cargo.toml"
exec "$ROOT/target/release/sam2" "$@"
