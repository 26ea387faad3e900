#!/usr/bin/env bash
# Sourced by the set-up scripts (tools/setup/setup.sh, setup-real.sh, setup-video.sh,
# setup-edgetam.sh, setup-webgpu.sh): their steps' shared helpers. Each step is timed and, when
# $SAM2_SETUP_TIMES names a file (scripts/test.sh sets it), a line is appended to it,
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
# Runs a step with its (chatty: tracer warnings, ONNX Runtime warnings) output in a log, showing
# only its progress lines; on failure, the end of the log. `say` is the sourcing script's.
#   logged LOG command...
logged() {
    local log="$1"
    shift
    if ! "$@" >"$log" 2>&1; then
        say "failed: $*; the end of $log:"
        tail -n 40 "$log" >&2
        return 1
    fi
    grep -h '^\[' "$log" >&2 || true
}
# One cached step: unless DIR holds its marker MARK, DIR is made afresh by the command (its output
# in DIR/LOG) and marked; the step is timed as ran or cached.
#   made_once DIR MARK LOG "what it says it is making" command...
made_once() {
    local dir="$1" mark="$2" log="$3" what="$4"
    shift 4
    if [ ! -f "$dir/$mark" ]; then
        say "$what"
        rm -rf "$dir"
        mkdir -p "$dir"
        logged "$dir/$log" "$@"
        touch "$dir/$mark"
        setup_end ran
    else
        setup_end cached
    fi
}
