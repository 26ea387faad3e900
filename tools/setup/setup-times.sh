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
# The project's model tools (tools/sam2-tools: sam2-variant and the exporters) installed into a
# venv, redone only when they change; timed as a step:
#   install_tools VENV editable|copy
# `editable` for the clone's own .venv, so that an edit to a tool is what runs next (redone when
# pyproject.toml changes); `copy` for the venvs under $SAM2_DEV_CACHE, which every clone shares
# (an editable install would run whichever clone installed it last; redone when any file of the
# package changes). Their build backend, flit_core (tools/setup/build-requirements.txt), is
# installed into the venv first, so that pip builds them with nothing to fetch
# (--no-build-isolation).
install_tools() {
    local venv="$1" mode="$2" src="$ROOT/tools/sam2-tools" key
    local pins="$ROOT/tools/setup/build-requirements.txt"
    setup_begin "the model tools in $(basename "$venv") (tools/sam2-tools, $mode install)"
    if [ "$mode" = editable ]; then
        key="$(cat "$src/pyproject.toml" "$pins" | sha256sum | cut -c1-16)"
    else
        key="$( (cd "$src" && find . -name '*.py' -o -name pyproject.toml | LC_ALL=C sort | xargs cat; cat "$pins") |
            sha256sum | cut -c1-16)"
    fi
    if [ -f "$venv/.sam2-tools-$mode-$key" ]; then
        setup_end cached
        return 0
    fi
    "$venv/bin/pip" install -q --disable-pip-version-check -r "$pins"
    "$venv/bin/pip" install -q --disable-pip-version-check --no-deps --no-build-isolation \
        $([ "$mode" = editable ] && echo --editable) "$src"
    rm -f "$venv"/.sam2-tools-*
    touch "$venv/.sam2-tools-$mode-$key"
    setup_end ran
}
# A small venv over setup-real.sh's: REQUIREMENTS installed with --no-deps into VENV, whose
# site-packages come first, then a .pth line adding $REAL_VENV's after them (EdgeTAM's `sam2`
# shadows Meta's there; SAM 3's code borrows torch and the rest).
#   venv_over_real VENV REQUIREMENTS
venv_over_real() {
    local venv="$1" requirements="$2" own_site real_site
    rm -rf "$venv"
    mkdir -p "$(dirname "$venv")"
    # the real venv's interpreter makes a venv of the same base Python
    "$REAL_VENV/bin/python" -m venv "$venv"
    "$venv/bin/pip" install -q --disable-pip-version-check --progress-bar off --no-deps -r "$requirements"
    own_site="$("$venv/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')"
    real_site="$("$REAL_VENV/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')"
    # after the venv's own site-packages (addsitedir appends, and reads the real venv's .pth files)
    printf 'import site; site.addsitedir(%s)\n' "'$real_site'" >"$own_site/zz-sam2-real-venv.pth"
}
