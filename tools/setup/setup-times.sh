#!/usr/bin/env bash
# Sourced by the set-up scripts (tools/setup/setup.sh, setup-real.sh, setup-video.sh): times each
# step and, when $SAM2_SETUP_TIMES names a file (scripts/test.sh sets it), appends a line to it,
# "step<TAB>ran|cached<TAB>seconds", for the test command's timing table (tools/ci/timing.py).
#   setup_begin "what the step makes"; ...; setup_end ran   (or cached)
setup_begin() {
    SETUP_STEP="$1"
    SETUP_START="${EPOCHREALTIME/[.,]/}"
}
setup_end() {
    [ -n "${SAM2_SETUP_TIMES:-}" ] || return 0
    local us=$((${EPOCHREALTIME/[.,]/} - SETUP_START))
    printf '%s\t%s\t%d.%d\n' "$SETUP_STEP" "$1" $((us / 1000000)) $((us % 1000000 / 100000)) \
        >>"$SAM2_SETUP_TIMES"
}
