#!/usr/bin/env bash
# Fuzz the native node-config decoder (src/core/nodeconfig.cpp and the strict JSON reader
# src/core/json.cpp under it; docs/security.md) with libFuzzer, ASan and UBSan.
#
#   scripts/ci/fuzz.sh [SECONDS]     build tests/fuzz/fuzz_nodeconfig.cpp, replay the corpus and
#                                 tests/fuzz/regressions/, then fuzz for SECONDS (default 60) on
#                                 a copy of the corpus; fails on any crash, leak, timeout, or
#                                 out-of-memory. CI: apt-get install -y clang && bash scripts/ci/fuzz.sh 120
#   scripts/ci/fuzz.sh --replay      no fuzzing and no clang needed: build tests/fuzz/replay.cpp with
#                                 ASan and UBSan ($CXX, default g++) and run it over the corpus
#                                 and the regressions (the native unit test)
#
# It installs nothing: the fuzzing mode needs clang with libFuzzer (Debian/Ubuntu:
# apt-get install clang; clang 14 has it). Only the three files of src/core/ are built, no
# Vulkan, Kompute or Python. Build output goes to build/fuzz/ (FUZZ_BUILD to change). A crash
# leaves its input in build/fuzz/artifacts/; minimise it (the binary's -minimize_crash=1), fix
# the decoder, and add the input to tests/fuzz/regressions/ under a name saying what it was.
# New corpus entries the run finds stay in build/fuzz/corpus/; the seed corpus is regenerated
# by tests/fuzz/make_corpus.py.
set -euo pipefail
cd "$(dirname "$0")/../.."
root=$PWD
build=${FUZZ_BUILD:-$root/build/fuzz}
mkdir -p "$build"
sources=(src/core/json.cpp src/core/nodeconfig.cpp src/core/activations.cpp)
seeds=tests/fuzz/corpus/nodeconfig
regressions=tests/fuzz/regressions

if [ "${1:-}" = "--replay" ]; then
  cxx=${CXX:-g++}
  "$cxx" -std=c++17 -O1 -g -fno-omit-frame-pointer -fsanitize=address,undefined -fno-sanitize-recover=all \
    -Isrc tests/fuzz/replay.cpp tests/fuzz/fuzz_nodeconfig.cpp "${sources[@]}" -o "$build/replay"
  exec "$build/replay" --doubles tests/fuzz/doubles.txt "$seeds" "$regressions"
fi

seconds=${1:-60}
case $seconds in ''|*[!0-9]*) echo "fuzz.sh: SECONDS must be a whole number, got '$seconds'" >&2; exit 2;; esac
cxx=${CXX_FUZZ:-clang++}
if ! command -v "$cxx" >/dev/null; then
  echo "fuzz.sh: $cxx not found; install clang (apt-get install clang) or set CXX_FUZZ" >&2
  exit 2
fi

echo "fuzz.sh: building with $("$cxx" --version | head -1)"
"$cxx" -std=c++17 -O1 -g -fno-omit-frame-pointer -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=all \
  -Isrc tests/fuzz/fuzz_nodeconfig.cpp "${sources[@]}" -o "$build/fuzz_nodeconfig"

export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
common=(-dict=tests/fuzz/nodeconfig.dict -timeout=10 -rss_limit_mb=2048 -malloc_limit_mb=1024
        -artifact_prefix="$build/artifacts/")
mkdir -p "$build/artifacts"

# Every seed and regression once (-runs=0: load the inputs, no mutation).
echo "fuzz.sh: replaying $seeds and $regressions"
"$build/fuzz_nodeconfig" "${common[@]}" -runs=0 "$seeds" "$regressions" 2>&1 | tail -3

# Fuzz on a copy, so that the run's finds do not change the seed corpus in the repository.
work="$build/corpus"
rm -rf "$work"
mkdir -p "$work"
cp "$seeds"/* "$work"/
cp "$regressions"/* "$work"/ 2>/dev/null || true
log="$build/fuzz.log"
echo "fuzz.sh: fuzzing for ${seconds} s (log: $log)"
status=0
"$build/fuzz_nodeconfig" "${common[@]}" -max_len=8192 -max_total_time="$seconds" -print_final_stats=1 \
  "$work" >"$log" 2>&1 || status=$?
grep -E '^#[0-9]+[[:space:]]+(INITED|DONE)|stat::' "$log" | tail -8 || true
if [ $status -ne 0 ]; then
  tail -40 "$log"
  echo "fuzz.sh: FAILED (libFuzzer exit status $status); the input is in $build/artifacts/" >&2
  exit 1
fi
echo "fuzz.sh: passed ($seconds s, no crash, leak or timeout)"
