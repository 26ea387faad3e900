#!/usr/bin/env bash
# Runs the C suite's lifecycle, error, NULL-sweep, device and cache tests under valgrind memcheck:
# no invalid access and no definite leak may be reported. Expects the C suite built in build/c
# (scripts/test.sh does that first). The suppressions cover the dynamic loader and ONNX
# Runtime's environment creation only (see tests/c/valgrind.supp).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
command -v valgrind >/dev/null 2>&1 || {
    SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO="sudo"
    $SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq valgrind >/dev/null
}
cd "$ROOT/build/c"
for t in test_lifecycle test_errors test_null_sweep test_devices test_cache; do
    printf 'valgrind %s ... ' "$t"
    start=$(date +%s)
    valgrind -q --suppressions="$ROOT/tests/c/valgrind.supp" --leak-check=full \
        --show-leak-kinds=definite --errors-for-leak-kinds=definite --error-exitcode=1 "./$t" >/dev/null
    echo "clean ($(( $(date +%s) - start )) s)"
done
