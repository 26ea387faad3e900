#!/usr/bin/env bash
# Builds libsam2.so against glibc 2.28 (what ONNX Runtime's own manylinux_2_28 wheel needs), so it
# runs on older distributions than the build machine (Debian 12: glibc 2.36). Zig's C toolchain
# (the pinned `ziglang` wheel from PyPI, installed into .venv) links against its glibc 2.28 stubs;
# Rust compiles as usual. Prints the directory that holds the library.
#
#   tools/ci/build-portable.sh [cargo build options, e.g. --features test-support]
#   SAM2_LIB_DIR="$(tools/ci/build-portable.sh)" scripts/pack-nuget.sh   # NuGet, glibc ≥ 2.28
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
cd "$ROOT"
GLIBC=2.28
ZIG_VERSION=0.13.0
PY="$ROOT/.venv/bin/python"
[ -x "$PY" ] || { . tools/setup/setup.sh >&2; }
if ! "$PY" -c "import ziglang" 2>/dev/null; then
    echo "[portable] installing ziglang==$ZIG_VERSION into .venv" >&2
    "$PY" -m pip install -q --disable-pip-version-check "ziglang==$ZIG_VERSION" >&2
fi
# The linker cargo calls: zig cc for glibc $GLIBC. Zig links its own libunwind statically, so
# the gcc_s that Rust's standard library asks for becomes unwind.
mkdir -p target/glibc-$GLIBC
LINKER="$ROOT/target/glibc-$GLIBC/zig-cc"
cat >"$LINKER" <<EOS
#!/usr/bin/env bash
args=()
for a in "\$@"; do
    if [ "\$a" = -lgcc_s ]; then args+=(-lunwind); else args+=("\$a"); fi
done
# Zig's caches stay in the build tree, not in the user's home.
export ZIG_GLOBAL_CACHE_DIR="$ROOT/target/glibc-$GLIBC/zig-cache" ZIG_LOCAL_CACHE_DIR="$ROOT/target/glibc-$GLIBC/zig-cache"
exec "$PY" -m ziglang cc -target x86_64-linux-gnu.$GLIBC "\${args[@]}"
EOS
chmod +x "$LINKER"
# Features get their own directory, so the shipped build and the test build do not rebuild each other.
suffix=""
[ $# -eq 0 ] || suffix="-$(printf '%s' "$*" | tr -c 'A-Za-z0-9' '_')"
DIR="target/glibc-$GLIBC/build$suffix"
CARGO_TARGET_X86_64_UNKNOWN_LINUX_GNU_LINKER="$LINKER" \
    cargo build --release --lib --target x86_64-unknown-linux-gnu --target-dir "$DIR" --quiet "$@" >&2
echo "$ROOT/$DIR/x86_64-unknown-linux-gnu/release"
