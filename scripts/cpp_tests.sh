#!/usr/bin/env bash
# Build and run ortops_core_tests, the core's C++ unit tests (tests/cpp; CMake option
# ORTOPS_BUILD_TESTS), in one flavour, each in its own build directory (incremental: a second
# run rebuilds only what changed):
#
#   scripts/cpp_tests.sh plain [DOCTEST ARGS]   the wheel's build directory (build/<wheel tag>,
#                                               Release), else build/cpp-plain; scripts/test.sh
#                                               builds it (--build-only) and runs it as a test of
#                                               its pytest session (tests/test_cpp.py)
#   scripts/cpp_tests.sh tsan  [DOCTEST ARGS]   build/cpp-tsan, ThreadSanitizer
#   scripts/cpp_tests.sh asan-ubsan [DOCTEST ARGS]   build/cpp-asan-ubsan, AddressSanitizer (and
#                                               LeakSanitizer) with UndefinedBehaviorSanitizer:
#                                               CI's job (one build for both)
#   scripts/cpp_tests.sh asan  [DOCTEST ARGS]   build/cpp-asan, AddressSanitizer alone
#   scripts/cpp_tests.sh ubsan [DOCTEST ARGS]   build/cpp-ubsan, UndefinedBehaviorSanitizer alone
#
# The sanitizer flavours build at -O1 -g with -fno-omit-frame-pointer, and every finding fails
# the run (-fno-sanitize-recover for UBSan; TSan and ASan exit non-zero on a report). Only the
# target ortops_core_tests is built: the core's sources, Kompute's library, the shaders and the
# tests — not the custom-op library, the Python module or Kompute's own tests. The
# suppressions (tests/cpp/*.supp) name third-party libraries only, each with its reason.
# DOCTEST ARGS go to the test program (e.g. -ts=concurrency: one suite; -tc="*race*": cases);
# --build-only instead builds it and prints its path.
# Needs scripts/setup.sh first (.venv's pybind11 and glslang, build/deps' Kompute sources).
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
flavour=${1:?"usage: scripts/cpp_tests.sh plain|tsan|asan-ubsan|asan|ubsan [doctest args]"}
shift
common="-O1 -g -fno-omit-frame-pointer"
case $flavour in
  plain) type=Release; sanitize="" ;;
  tsan) type=None; sanitize="-fsanitize=thread" ;;
  asan) type=None; sanitize="-fsanitize=address" ;;
  ubsan) type=None; sanitize="-fsanitize=undefined -fno-sanitize-recover=all" ;;
  asan-ubsan) type=None; sanitize="-fsanitize=address,undefined -fno-sanitize-recover=all" ;;
  *) echo "cpp_tests.sh: flavour must be plain, tsan, asan-ubsan, asan or ubsan, got '$flavour'" >&2; exit 2 ;;
esac
build=$root/build/cpp-$flavour
VPY=$root/.venv/bin/python
# plain: in the build directory scripts/setup.sh's pip install made (build/<wheel tag>), where
# the core's objects are already compiled with the wheel's flags: only the tests compile (on a
# fresh clone, about a fifth of a build of the core and Kompute). The option only adds the test
# target, which is built by name only (EXCLUDE_FROM_ALL) and installed nowhere, so the package
# pip builds there is unchanged. Without such a directory, build/cpp-plain.
if [ "$flavour" = plain ]; then
  for cache in "$root"/build/cp3*/CMakeCache.txt; do
    if [ -f "$cache" ] && grep -q "^ortops_SOURCE_DIR:STATIC=$root\$" "$cache"; then
      build=$(dirname "$cache")
      grep -q "^ORTOPS_BUILD_TESTS:BOOL=ON" "$cache" || cmake -DORTOPS_BUILD_TESTS=ON "$build" >/dev/null
      break
    fi
  done
fi
# The tests drive the core's test hooks (ORTOPS_TESTING: Layer::runCoalesced, the fault
# injected into runs), as the wheel's build directory has them from scripts/setup.sh; a
# sanitizer directory configured before they needed it is switched on here.
if [ "$flavour" != plain ] && [ -f "$build/CMakeCache.txt" ] && ! grep -q "^ORTOPS_TESTING:BOOL=ON" "$build/CMakeCache.txt"; then
  cmake -DORTOPS_TESTING=ON "$build" >/dev/null
fi
if [ ! -f "$build/Makefile" ] && [ ! -f "$build/build.ninja" ]; then
  # CMAKE_BUILD_TYPE None: no build type's flags after ours (Release's -O3 would replace -O1).
  cmake -S "$root" -B "$build" -Wno-dev -DORTOPS_BUILD_TESTS=ON -DORTOPS_TESTING=ON -DCMAKE_BUILD_TYPE=$type \
    -DCMAKE_CXX_FLAGS="${sanitize:+$common $sanitize}" -DCMAKE_EXE_LINKER_FLAGS="$sanitize" \
    -DPython_EXECUTABLE="$VPY" -Dpybind11_DIR="$("$VPY" -m pybind11 --cmakedir)" \
    -DORTOPS_KOMPUTE_SDIST="$root/build/deps/kp-0.9.0.tar.gz" >/dev/null
fi
if ! cmake --build "$build" --target ortops_core_tests -j "${JOBS:-2}" >"$build/build.log" 2>&1; then
  tail -n 40 "$build/build.log"
  echo "cpp_tests.sh: the $flavour build failed (the whole log: $build/build.log)" >&2
  exit 1
fi
if [ "${1:-}" = "--build-only" ]; then
  echo "$build/tests/cpp/ortops_core_tests"
  exit 0
fi

supp=$root/tests/cpp
if [ "$flavour" = tsan ] || [ "$flavour" = asan ] || [ "$flavour" = asan-ubsan ]; then
  # tsan.supp ignores the calls lavapipe makes (called_from_lib), and TSan stops the program
  # if such a library is unloaded, which the Vulkan loader does after its first look at the
  # driver: loading lavapipe first keeps it loaded. LeakSanitizer can then name it in the
  # stacks of what it leaks (lsan.supp; unloaded, it is an "unknown module"); ASan accepts a
  # library loaded before its runtime with verify_asan_link_order=0. Its path from its ICD
  # manifest.
  lvp=$(sed -n 's/.*"library_path": *"\([^"]*\)".*/\1/p' /usr/share/vulkan/icd.d/lvp_icd*.json 2>/dev/null | head -n 1)
  if [ -n "$lvp" ]; then
    export LD_PRELOAD="$lvp${LD_PRELOAD:+:$LD_PRELOAD}"
  fi
fi
# halt_on_error=0 and a non-zero exit code: every report of the run is shown, and any fails it.
export TSAN_OPTIONS="suppressions=$supp/tsan.supp:second_deadlock_stack=1:history_size=4:exitcode=66${TSAN_OPTIONS:+:$TSAN_OPTIONS}"
export ASAN_OPTIONS="detect_leaks=1:abort_on_error=0:strict_string_checks=1:verify_asan_link_order=0${ASAN_OPTIONS:+:$ASAN_OPTIONS}"
export LSAN_OPTIONS="suppressions=$supp/lsan.supp:print_suppressions=0${LSAN_OPTIONS:+:$LSAN_OPTIONS}"
export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1${UBSAN_OPTIONS:+:$UBSAN_OPTIONS}"
exec "$build/tests/cpp/ortops_core_tests" "$@"
