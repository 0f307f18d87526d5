#!/bin/bash
# ONNX Runtime's C/C++ API headers for building libortops_ort.so (src/ort/, src/ep/) and
# examples/cpp: Debian's libonnxruntime-dev (the Expat licence) of a suite whose headers hold
# the plugin execution-provider API (onnxruntime_ep_c_api.h) at ORT_API_VERSION MIN_API or
# later: sid (1.23.2, API 23), else experimental (1.27.1, API 27).
# MIN_API is 24 by default, the library's: its EP factory declares OrtEpApi::CreateHardwareDevice
# (ORT 1.24) and calls it where the onnxruntime that loads it has it (src/ep/factory.cpp); the
# C++ examples need 24 too (the session's EP graph-assignment report,
# Session_GetEpGraphAssignmentInfo, came in 1.24). So sid's 1.23 does not fit and experimental's
# 1.27.1 is taken, until sid has 1.24 or later.
# Downloaded as a .deb into build/deps/ and its headers alone unpacked into
# build/deps/onnxruntime/include/ (MIN_API 24 or less) or
# build/deps/onnxruntime-api<MIN_API>/include/ (a later MIN_API). No PyPI package
# ships onnxruntime_c_api.h (../shared/NOTES.md); the libraries need only the headers, the API
# is resolved at run time through OrtGetApiBase() of the onnxruntime that loads them, at a
# fixed version (the custom ops ask for 16, the EP for 23: src/ort/kernel.hpp, src/ep/ep.hpp).
#
# Idempotent: nothing is fetched when fitting headers are already there. Headers or a cached
# .deb that do not fit (trixie's 1.21; sid's 1.23, older than
# the library's 1.24 EP API) are not used: the test is the headers themselves,
# not a version string. Packages in sid and experimental
# are replaced in place, so the suite's current version is resolved each time a download is
# needed. The system's apt sources are left alone: a private apt configuration (sources,
# lists) under a temporary folder names the suite on the archive this machine's apt already
# uses, with Debian's archive keyring.
#
# Usage: scripts/ort_headers.sh [DEST [MIN_API]]   (DEST defaults to build/deps of the repository)
# Prints the include directory on stdout (CMake reads it).
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
deps=${1:-$top/build/deps}
min_api=${2:-24}
dir=$deps/onnxruntime
[ "$min_api" -le 24 ] || dir=$deps/onnxruntime-api$min_api
inc=$dir/include
NEEDED=onnxruntime_ep_c_api.h     # the plugin-EP API
SUITES=(sid experimental)
api_of() { sed -n 's/^#define ORT_API_VERSION \([0-9]*\).*/\1/p' "$1" 2>/dev/null | head -1; }
fits() {   # fits FOLDER: headers with the EP API at MIN_API or later
    [ -f "$1/onnxruntime_cxx_api.h" ] && [ -f "$1/$NEEDED" ] && [ "$(api_of "$1/onnxruntime_c_api.h")" -ge "$min_api" ] 2>/dev/null
}
if fits "$inc"; then
    echo "$inc"; exit 0
fi
mkdir -p "$deps"

# A cached .deb is used when its headers fit (a .deb without the EP API is removed).
has_needed() {
    local t ok=1; t=$(mktemp -d)
    dpkg-deb -x "$1" "$t" 2>/dev/null && fits "$t/usr/include/onnxruntime" && ok=0
    [ -f "$t/usr/include/onnxruntime/$NEEDED" ] || rm -f "$1"
    rm -rf "$t"; return $ok
}
deb=""
for d in "$deps"/libonnxruntime-dev_*.deb; do
    [ -f "$d" ] || continue
    if has_needed "$d"; then deb=$d; break; fi
done

fetch() {   # fetch SUITE: download that suite's current libonnxruntime-dev into $deps; print its path
    local suite=$1 uri keyring t
    uri=$(grep -h '^URIs:' /etc/apt/sources.list.d/*.sources 2>/dev/null | grep -v security | head -1 | awk '{print $2}' || true)
    [ -n "$uri" ] || uri=$(grep -h '^deb ' /etc/apt/sources.list 2>/dev/null | grep -v security | head -1 | awk '{print $2}' || true)
    [ -n "$uri" ] || uri=http://deb.debian.org/debian
    keyring=/usr/share/keyrings/debian-archive-keyring.gpg
    [ -f "$keyring" ] || { echo "ort_headers.sh: $keyring missing (package debian-archive-keyring)" >&2; return 1; }
    t=$(mktemp -d)
    mkdir -p "$t/parts" "$t/lists/partial" "$t/archives/partial"
    printf 'Types: deb\nURIs: %s\nSuites: %s\nComponents: main\nSigned-By: %s\n' "$uri" "$suite" "$keyring" > "$t/parts/$suite.sources"
    local o=(-oAPT::Architecture=amd64 -oDir::Etc::SourceList=/dev/null -oDir::Etc::SourceParts="$t/parts"
             -oDir::State::Lists="$t/lists" -oDir::Cache::Archives="$t/archives" -oDebug::NoLocking=1 -oAPT::Sandbox::User=root)
    apt-get "${o[@]}" update -qq >&2 || { rm -rf "$t"; return 1; }
    # Experimental's packages are not candidates by default: name the suite's version.
    local version
    version=$(apt-cache "${o[@]}" madison libonnxruntime-dev 2>/dev/null | awk -v s="$suite" '$0 ~ s {print $3; exit}')
    [ -n "$version" ] || { echo "ort_headers.sh: no libonnxruntime-dev in $suite" >&2; rm -rf "$t"; return 1; }
    echo "ort_headers.sh: libonnxruntime-dev $version from $suite" >&2
    # apt-get download writes into the current directory; as root it warns that it cannot
    # drop privileges to _apt for a folder _apt cannot write: harmless.
    (cd "$t" && apt-get "${o[@]}" download "libonnxruntime-dev=$version" 2>&1 | grep -v -i unsandboxed >&2 || true)
    local got
    got=$(ls "$t"/libonnxruntime-dev_*.deb 2>/dev/null | head -1 || true)
    if [ -z "$got" ] || ! has_needed "$got"; then
        echo "ort_headers.sh: libonnxruntime-dev $version ($suite) not downloaded, or its headers are below ORT API $min_api" >&2
        rm -rf "$t"; return 1
    fi
    mv "$got" "$deps/"
    rm -rf "$t"
    echo "$deps/$(basename "$got")"
}

if [ -z "$deb" ]; then
    command -v apt-get >/dev/null || { echo "ort_headers.sh: needs apt-get (Debian/Ubuntu) to fetch libonnxruntime-dev" >&2; exit 1; }
    for suite in "${SUITES[@]}"; do
        deb=$(fetch "$suite") && break
        deb=""
    done
    [ -n "$deb" ] || { echo "ort_headers.sh: no libonnxruntime-dev with $NEEDED at ORT API $min_api or later in ${SUITES[*]}" >&2; exit 1; }
fi
u=$(mktemp -d "$deps/unpack.XXXXXX")
dpkg-deb -x "$deb" "$u"
src=$u/usr/include/onnxruntime
fits "$src" || { echo "ort_headers.sh: $deb has no $NEEDED at ORT API $min_api or later" >&2; rm -rf "$u"; exit 1; }
rm -rf "$dir"; mkdir -p "$dir"
mv "$src" "$inc"
# The licence travels with the headers.
[ -f "$u/usr/share/doc/libonnxruntime-dev/copyright" ] && cp "$u/usr/share/doc/libonnxruntime-dev/copyright" "$dir/copyright"
basename "$deb" > "$dir/VERSION"
rm -rf "$u"
echo "$inc"
