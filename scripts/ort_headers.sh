#!/bin/bash
# ONNX Runtime's C/C++ API headers for building libortops_ort.so (src/ort/) and
# examples/cpp: Debian 13's libonnxruntime-dev (1.21.0, ORT_API_VERSION 21; the Expat licence),
# downloaded as a .deb into build/deps/ and its headers alone unpacked into
# build/deps/onnxruntime/include/. No PyPI package ships onnxruntime_c_api.h (../shared/NOTES.md);
# a custom-op library needs only the headers, the API is resolved at run time through
# OrtGetApiBase() of the onnxruntime that loads it.
#
# Idempotent: nothing is fetched when the headers are already there. The system's apt sources
# are left alone: a private apt configuration (sources, lists) under a temporary folder names
# trixie on the archive this machine's apt already uses, with Debian's archive keyring.
#
# Usage: scripts/ort_headers.sh [DEST]   (DEST defaults to build/deps of the repository)
# Prints the include directory on stdout (CMake reads it).
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
deps=${1:-$top/build/deps}
inc=$deps/onnxruntime/include
if [ -f "$inc/onnxruntime_c_api.h" ] && [ -f "$inc/onnxruntime_cxx_api.h" ]; then
    echo "$inc"; exit 0
fi
mkdir -p "$deps"
deb=$(ls "$deps"/libonnxruntime-dev_*.deb 2>/dev/null | head -1 || true)
if [ -z "$deb" ]; then
    command -v apt-get >/dev/null || { echo "ort_headers.sh: needs apt-get (Debian/Ubuntu) to fetch libonnxruntime-dev" >&2; exit 1; }
    uri=$(grep -h '^URIs:' /etc/apt/sources.list.d/*.sources 2>/dev/null | grep -v security | head -1 | awk '{print $2}' || true)
    [ -n "$uri" ] || uri=$(grep -h '^deb ' /etc/apt/sources.list 2>/dev/null | grep -v security | head -1 | awk '{print $2}' || true)
    [ -n "$uri" ] || uri=http://deb.debian.org/debian
    keyring=/usr/share/keyrings/debian-archive-keyring.gpg
    [ -f "$keyring" ] || { echo "ort_headers.sh: $keyring missing (package debian-archive-keyring)" >&2; exit 1; }
    t=$(mktemp -d); trap 'rm -rf "$t"' EXIT
    mkdir -p "$t/parts" "$t/lists/partial" "$t/archives/partial"
    printf 'Types: deb\nURIs: %s\nSuites: trixie\nComponents: main\nSigned-By: %s\n' "$uri" "$keyring" > "$t/parts/trixie.sources"
    o=(-oAPT::Architecture=amd64 -oDir::Etc::SourceList=/dev/null -oDir::Etc::SourceParts="$t/parts"
       -oDir::State::Lists="$t/lists" -oDir::Cache::Archives="$t/archives" -oDebug::NoLocking=1 -oAPT::Sandbox::User=root)
    apt-get "${o[@]}" update -qq >&2
    # apt-get download writes into the current directory; as root it warns that it cannot
    # drop privileges to _apt for a folder _apt cannot write: harmless.
    (cd "$t" && apt-get "${o[@]}" download libonnxruntime-dev 2>&1 | grep -v -i unsandboxed >&2 || true)
    deb=$(ls "$t"/libonnxruntime-dev_*.deb 2>/dev/null | head -1 || true)
    [ -n "$deb" ] || { echo "ort_headers.sh: apt-get download libonnxruntime-dev (trixie) failed" >&2; exit 1; }
    mv "$deb" "$deps/"
    deb=$deps/$(basename "$deb")
fi
u=$(mktemp -d "$deps/unpack.XXXXXX")
dpkg-deb -x "$deb" "$u"
src=$u/usr/include/onnxruntime
[ -f "$src/onnxruntime_c_api.h" ] || { echo "ort_headers.sh: $deb has no usr/include/onnxruntime/onnxruntime_c_api.h" >&2; rm -rf "$u"; exit 1; }
rm -rf "$deps/onnxruntime"; mkdir -p "$deps/onnxruntime"
mv "$src" "$inc"
# The licence travels with the headers.
[ -f "$u/usr/share/doc/libonnxruntime-dev/copyright" ] && cp "$u/usr/share/doc/libonnxruntime-dev/copyright" "$deps/onnxruntime/copyright"
basename "$deb" > "$deps/onnxruntime/VERSION"
rm -rf "$u"
echo "$inc"
