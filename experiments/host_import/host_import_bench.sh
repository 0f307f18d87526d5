#!/usr/bin/env bash
# Build host_import_bench (its own small CMake project, CMakeLists.txt beside this script; not
# part of the package's build or the wheel) and run it with the arguments given:
#
#   experiments/host_import/host_import_bench.sh [--sizes 80K,1M,8M,26M,52M] [--repeats 30]
#       [--warmup 5] [--offset 64] [--device INDEX|NAME] [--out DIR] [--check]
#
# BUILD_DIR: where to build (default build/host_import_bench). ORTOPS_VALIDATION=1 runs it under
# the validation layer (with VK_LAYER_SETTINGS_PATH=tests for the project's settings).
# docs/perf.md ("The custom-op library: targets") has what it measures and the figures.
set -euo pipefail
top=$(cd "$(dirname "$0")/../.." && pwd)
build=${BUILD_DIR:-$top/build/host_import_bench}
mkdir -p "$build"
src=$top/experiments/host_import
# One configure and build at a time in a build folder: the suite's plain and validation processes
# run this test side by side (scripts/gpu/parallel_suite.py), and two CMake configures of one
# folder at once broke the H200 gate of 2026-12-03 ("This should not have happened").
exec 9> "$build.lock"
flock 9
# A cache configured from another source folder (src/tools before 2026-12-02) is set up afresh.
if ! grep -qx "CMAKE_HOME_DIRECTORY:INTERNAL=$src" "$build/CMakeCache.txt" 2>/dev/null; then
  rm -rf "$build/CMakeCache.txt" "$build/CMakeFiles"
  cmake -S "$src" -B "$build" -DCMAKE_BUILD_TYPE=Release > "$build.configure.log" 2>&1 \
    || { cat "$build.configure.log" >&2; exit 2; }
fi
cmake --build "$build" --target host_import_bench -j"${JOBS:-2}" > "$build.build.log" 2>&1 \
  || { tail -40 "$build.build.log" >&2; exit 2; }
flock -u 9
exec 9>&-
exec "$build/host_import_bench" "$@"
