#!/usr/bin/env bash
# Installs libsam2 for C and C++ hosts into a prefix:
#
#   PREFIX/lib/libsam2.so.X.Y.Z              the library (SONAME libsam2.so.<abi>, see capi/libsam2/build.rs)
#   PREFIX/lib/libsam2.so.<abi> -> ...X.Y.Z  what programs linked to it load
#   PREFIX/lib/libsam2.so -> libsam2.so.<abi> what -lsam2 links
#   PREFIX/include/sam2.h
#   PREFIX/lib/pkgconfig/sam2.pc             pkg-config --cflags --libs sam2
#   PREFIX/lib/cmake/sam2/sam2Config.cmake   find_package(sam2 CONFIG), target sam2::sam2
#   PREFIX/lib/cmake/sam2/sam2ConfigVersion.cmake
#   PREFIX/bin/sam2                          the command (docs/cli.md)
#
# Usage: scripts/install.sh [--prefix DIR] [--libdir DIR] [--includedir DIR] [--no-build] [--no-rpath]
#   --prefix DIR      absolute; default /usr/local
#   --libdir DIR      relative to the prefix; default lib (e.g. lib/x86_64-linux-gnu)
#   --includedir DIR  relative to the prefix; default include
#   --no-build        install target/release/libsam2.so (and target/release/sam2, when built) as they
#                     are (e.g. `cargo build --release --lib && cargo build --release -p sam2-cli`
#                     as yourself, then `sudo scripts/install.sh --no-build`)
#   --no-rpath        leave -Wl,-rpath out of sam2.pc (the default leaves it out only for /usr)
#   DESTDIR=DIR       (environment) stage the files under DIR/PREFIX, for packagers
#
# ONNX Runtime is not installed: libsam2 loads it at run time (docs/onnxruntime.md).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"

prefix=/usr/local
libdir=lib
includedir=include
build=1
rpath=auto
usage() { sed -n '2,/^set -euo/p' "${BASH_SOURCE[0]}" | sed '$d; s/^# \{0,1\}//' >&2; exit 2; }
while (($#)); do
    case "$1" in
        --prefix) prefix="${2:?--prefix needs a directory}"; shift 2 ;;
        --prefix=*) prefix="${1#*=}"; shift ;;
        --libdir) libdir="${2:?--libdir needs a directory}"; shift 2 ;;
        --libdir=*) libdir="${1#*=}"; shift ;;
        --includedir) includedir="${2:?--includedir needs a directory}"; shift 2 ;;
        --includedir=*) includedir="${1#*=}"; shift ;;
        --no-build) build=0; shift ;;
        --no-rpath) rpath=no; shift ;;
        -h|--help) usage ;;
        *) echo "install.sh: unknown argument $1" >&2; usage ;;
    esac
done
case "$prefix" in /*) ;; *) echo "install.sh: --prefix must be absolute: $prefix" >&2; exit 2 ;; esac
for dir in "$libdir" "$includedir"; do
    case "$dir" in
        /*|..|../*|*/..|*/../*) echo "install.sh: --libdir and --includedir are relative to the prefix, inside it: $dir" >&2; exit 2 ;;
    esac
done
prefix="${prefix%/}"
libdir="${libdir%/}"
includedir="${includedir%/}"
destdir="${DESTDIR:-}"
destdir="${destdir%/}"

if ((build)); then
    (cd "$ROOT" && cargo build --release --lib && cargo build --release -p sam2-cli)
fi
lib="$ROOT/target/release/libsam2.so"
[ -f "$lib" ] || { echo "install.sh: $lib does not exist: run cargo build --release --lib" >&2; exit 1; }

# The version is the crate's; the SONAME is read from the library (capi/libsam2/build.rs sets
# it), and the two must agree, so a library left from another version is never installed under
# this one's names.
version="$(awk -F'"' '/^\[/{section=$0} section=="[package]" && /^version *=/{print $2; exit}' "$ROOT/Cargo.toml")"
IFS=. read -r major minor _ <<<"$version"
if [ "$major" = 0 ]; then abi="0.$minor"; else abi="$major"; fi
soname="$(readelf -d "$lib" | sed -n 's/.*Library soname: \[\(.*\)\]/\1/p')"
if [ "$soname" != "libsam2.so.$abi" ]; then
    echo "install.sh: $lib has SONAME '$soname', but version $version needs libsam2.so.$abi: rebuild it" >&2
    exit 1
fi
real_name="libsam2.so.$version"
description="$(awk -F'"' '/^\[/{section=$0} section=="[package]" && /^description *=/{print $2; exit}' "$ROOT/Cargo.toml")"

if [ "$rpath" = auto ]; then
    if [ "$prefix" = /usr ]; then rpath=no; else rpath=yes; fi
fi
rpath_flag=""
[ "$rpath" = yes ] && rpath_flag='-Wl,-rpath,${libdir} '
# From PREFIX/LIBDIR/cmake/sam2 back up to PREFIX.
cmakedir_to_prefix="../.."
rest="$libdir"
while [ -n "$rest" ]; do
    cmakedir_to_prefix="$cmakedir_to_prefix/.."
    case "$rest" in */*) rest="${rest#*/}" ;; *) rest="" ;; esac
done

fill() {
    local s
    s="$(cat "$1")"
    s="${s//@PREFIX@/$prefix}"
    s="${s//@LIBDIR@/$libdir}"
    s="${s//@INCLUDEDIR@/$includedir}"
    s="${s//@VERSION@/$version}"
    s="${s//@ABI@/$abi}"
    s="${s//@SONAME@/$soname}"
    s="${s//@REAL_NAME@/$real_name}"
    s="${s//@RPATH@/$rpath_flag}"
    s="${s//@CMAKEDIR_TO_PREFIX@/$cmakedir_to_prefix}"
    s="${s//@DESCRIPTION@/$description}"
    printf '%s\n' "$s"
}

lib_dest="$destdir$prefix/$libdir"
say() { printf -- '-- Installing: %s\n' "$1"; }
install -d "$lib_dest" "$lib_dest/pkgconfig" "$lib_dest/cmake/sam2" "$destdir$prefix/$includedir"
install -m 0755 "$lib" "$lib_dest/$real_name"; say "$lib_dest/$real_name"
ln -sfn "$real_name" "$lib_dest/$soname"; say "$lib_dest/$soname -> $real_name"
ln -sfn "$soname" "$lib_dest/libsam2.so"; say "$lib_dest/libsam2.so -> $soname"
install -m 0644 "$ROOT/include/sam2.h" "$destdir$prefix/$includedir/sam2.h"; say "$destdir$prefix/$includedir/sam2.h"
fill "$ROOT/packaging/sam2.pc.in" >"$lib_dest/pkgconfig/sam2.pc"; say "$lib_dest/pkgconfig/sam2.pc"
for file in sam2Config.cmake sam2ConfigVersion.cmake; do
    fill "$ROOT/packaging/$file.in" >"$lib_dest/cmake/sam2/$file"; say "$lib_dest/cmake/sam2/$file"
done
chmod 0644 "$lib_dest/pkgconfig/sam2.pc" "$lib_dest/cmake/sam2/"*.cmake
# The command links the library statically; it finds ONNX Runtime as the library does.
if [ -f "$ROOT/target/release/sam2" ]; then
    install -d "$destdir$prefix/bin"
    install -m 0755 "$ROOT/target/release/sam2" "$destdir$prefix/bin/sam2"; say "$destdir$prefix/bin/sam2"
else
    echo "install.sh: target/release/sam2 was not built (cargo build --release -p sam2-cli): the command is not installed" >&2
fi
