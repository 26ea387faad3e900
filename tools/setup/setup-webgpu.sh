#!/usr/bin/env bash
# The WebGPU device rig: a real device on machines without a GPU. Mesa's software Vulkan driver
# (llvmpipe, Mesa >= 25: Dawn refuses Mesa 22) and ONNX Runtime 1.30.0 built with its WebGPU
# execution provider (the `libonnxruntime.so.1` inside npm's onnxruntime-node@1.30.0; PyPI's
# WebGPU plugin for 1.31 lists devices only for GPUs the system reports in /sys/class/drm, which
# a software driver has none of).
#
# Idempotent and cached: the library under $SAM2_DEV_CACHE/webgpu/, Debian's packages once.
# Source it (`. tools/setup/setup-webgpu.sh`): it exports SAM2_WEBGPU_ONNXRUNTIME, VK_ICD_FILENAMES
# (llvmpipe alone) and SAM2_WEBGPU_REQUIRED=1, so tests/webgpu.rs fails instead of skipping.
# Where the rig cannot exist (not Debian on x86_64), it says why, exports nothing, and the device
# tests report themselves skipped.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
CACHE="${SAM2_DEV_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/sam2-dev}/webgpu"
ORT_NODE_VERSION=1.30.0
# npm's own integrity hash of the package (checked by npm pack, and again here).
ORT_NODE_SHA512="twhs1C2C/BFkz1yc5OY0KIU2GUq6DURO7hD4bx5Q2Qy3nAMJwRXW8xU3NVczE29VA9lolLOYepoD8fjTGOfIqw=="
say() { printf '[setup-webgpu] %s\n' "$*" >&2; }
. "$ROOT/tools/setup/setup-times.sh"
webgpu_step=cached

webgpu_rig() {
    if [ "$(uname -s)-$(uname -m)" != "Linux-x86_64" ] || ! grep -q '^VERSION_CODENAME=bookworm' /etc/os-release 2>/dev/null; then
        say "no WebGPU rig here: it is set up on Debian bookworm x86_64 only; the device tests will say skipped"
        return 0
    fi
    local SUDO=""
    [ "$(id -u)" -ne 0 ] && SUDO="sudo"
    # 1. Mesa >= 25's Vulkan drivers and the Vulkan loader, from bookworm-backports.
    local mesa
    mesa="$(dpkg-query -W -f='${Version}' mesa-vulkan-drivers 2>/dev/null || true)"
    if [ "${mesa%%.*}" -lt 25 ] 2>/dev/null || [ -z "$mesa" ]; then
        say "installing Mesa's Vulkan drivers (>= 25) and libvulkan1 from bookworm-backports"
        webgpu_step=ran
        if ! grep -rqs 'bookworm-backports' /etc/apt/sources.list /etc/apt/sources.list.d/; then
            echo 'deb http://deb.debian.org/debian bookworm-backports main' | $SUDO tee /etc/apt/sources.list.d/sam2-backports.list >/dev/null
        fi
        $SUDO apt-get update -qq
        DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends \
            -t bookworm-backports mesa-vulkan-drivers libvulkan1 >/dev/null
    fi
    local icd=/usr/share/vulkan/icd.d/lvp_icd.json
    [ -f "$icd" ] || { say "llvmpipe's Vulkan driver ($icd) is missing after the install"; return 1; }

    # 2. ONNX Runtime with WebGPU, from npm's registry (no other download site is needed).
    local lib="$CACHE/onnxruntime-node-$ORT_NODE_VERSION/libonnxruntime.so.1"
    if [ ! -f "$lib" ]; then
        say "fetching onnxruntime-node@$ORT_NODE_VERSION from npm for its WebGPU build of ONNX Runtime (110 MB, once)"
        webgpu_step=ran
        local tmp
        tmp="$(mktemp -d)"
        (cd "$tmp" && npm pack --silent "onnxruntime-node@$ORT_NODE_VERSION" >/dev/null)
        local tgz="$tmp/onnxruntime-node-$ORT_NODE_VERSION.tgz"
        local got
        got="$(openssl dgst -sha512 -binary "$tgz" | base64 -w0)"
        if [ "$got" != "$ORT_NODE_SHA512" ]; then
            say "onnxruntime-node-$ORT_NODE_VERSION.tgz has sha512 $got, expected $ORT_NODE_SHA512"
            rm -rf "$tmp"
            return 1
        fi
        tar -xzf "$tgz" -C "$tmp" package/bin/napi-v6/linux/x64/libonnxruntime.so.1
        mkdir -p "$(dirname "$lib")"
        mv "$tmp/package/bin/napi-v6/linux/x64/libonnxruntime.so.1" "$lib.part"
        mv "$lib.part" "$lib"
        rm -rf "$tmp"
    fi
    export SAM2_WEBGPU_ONNXRUNTIME="$lib"
    export VK_ICD_FILENAMES="$icd"
    export SAM2_WEBGPU_REQUIRED=1
    # Mesa keeps compiled shaders under ~/.cache unless told where: keep the user's home clean
    # (and the cache between runs, where llvmpipe's compiles are slow).
    export MESA_SHADER_CACHE_DIR="$CACHE/mesa-shader-cache"
    # Dawn wants a runtime directory; a CI shell may have none.
    if [ -z "${XDG_RUNTIME_DIR:-}" ] || [ ! -d "${XDG_RUNTIME_DIR:-}" ]; then
        export XDG_RUNTIME_DIR="$CACHE/runtime"
        mkdir -p "$XDG_RUNTIME_DIR"
        chmod 700 "$XDG_RUNTIME_DIR"
    fi
}
setup_begin "WebGPU rig (Mesa's llvmpipe, ONNX Runtime 1.30 from npm)"
webgpu_rig
setup_end "$webgpu_step"
