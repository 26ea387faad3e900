#!/usr/bin/env bash
# The Rust targets the test command builds for beyond this machine's own, in one place, and
# their standard libraries added from rustup where missing (downloads only; installed once, then
# reused):
#   --checked   macOS x86-64 and arm64, Linux arm64: type-checked and linted
#               (tools/ci/test-platforms.sh);
#   --windows   Windows x64 with mingw-w64: built and run under Wine (tools/ci/test-windows.sh);
#   --all       both (scripts/test.sh, beside the set-up, so that the stages find them there).
#   tools/ci/rust-targets.sh --checked|--windows|--all
set -euo pipefail
CHECKED=(x86_64-apple-darwin aarch64-apple-darwin aarch64-unknown-linux-gnu)
WINDOWS=(x86_64-pc-windows-gnu)
case "${1:-}" in
    --checked) targets=("${CHECKED[@]}") ;;
    --windows) targets=("${WINDOWS[@]}") ;;
    --all) targets=("${CHECKED[@]}" "${WINDOWS[@]}") ;;
    *) echo "usage: $0 --checked|--windows|--all" >&2; exit 2 ;;
esac
installed="$(rustup target list --installed)"
for target in "${targets[@]}"; do
    grep -qx "$target" <<<"$installed" || rustup target add "$target" >&2
done
# The targets asked for, one a line, for the caller.
printf '%s\n' "${targets[@]}"
