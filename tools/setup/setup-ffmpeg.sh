#!/usr/bin/env bash
# ffmpeg and ffprobe for `sam2 track clip.mp4` (issue 60): Debian's package, installed once when
# either program is missing. Sourced by scripts/test.sh after tools/setup/setup.sh (which defines
# say, setup_begin and setup_end); exports SAM2_FFMPEG_REQUIRED=1, so the command's video tests
# fail instead of skipping where the programs were set up. The demo does not need it.

setup_begin "ffmpeg (Debian's package, for video files)"
if ! command -v ffmpeg >/dev/null 2>&1 || ! command -v ffprobe >/dev/null 2>&1; then
    SUDO=""
    [ "$(id -u)" -ne 0 ] && SUDO="sudo"
    say "installing ffmpeg from Debian"
    $SUDO apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends ffmpeg >/dev/null
    setup_end ran
else
    setup_end cached
fi
export SAM2_FFMPEG_REQUIRED=1
