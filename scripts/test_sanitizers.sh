#!/usr/bin/env bash
# The sanitizer jobs of CI (scripts/test_full.sh runs them; docs/sanitizers.md): the core and
# its C++ tests (tests/cpp) built twice, in build/cpp-tsan and build/cpp-asan-ubsan (kept
# between runs: a second run rebuilds what changed), and run on lavapipe:
#   tsan        ThreadSanitizer over the concurrency suite (threads sharing a layer, fresh
#               layers recorded at several shapes at once, the coalescer and the pipeline
#               table under threads)
#   asan-ubsan  AddressSanitizer, LeakSanitizer and UndefinedBehaviorSanitizer in one build over
#               every C++ test (-fno-sanitize-recover: a UBSan finding fails the run)
# Any report fails its job; the suppressions (tests/cpp/*.supp) cover third-party libraries
# only (Mesa's lavapipe, libLLVM, GCC's unwinder), each with its reason. scripts/cpp_tests.sh
# also has the flavours asan and ubsan alone, for looking at one sanitizer's reports.
#   scripts/test_sanitizers.sh [tsan,asan-ubsan,asan,ubsan]   the jobs (default: tsan,asan-ubsan)
set -euo pipefail
cd "$(dirname "$0")/.."
jobs=${1:-tsan,asan-ubsan}
status=0
for job in ${jobs//,/ }; do
  t0=$(date +%s)
  args=()
  [ "$job" = tsan ] && args=(-ts=concurrency)
  # The race test's sweep: its 32 rounds are for ThreadSanitizer, which can see a race in any of
  # them; ASan and UBSan see a bad access or UB on the path any round takes, so two rounds, as
  # the plain run of scripts/test.sh (each round records fresh layers).
  rounds=32
  [ "$job" = tsan ] || rounds=2
  if ORTOPS_TEST_ROUNDS=${ORTOPS_TEST_ROUNDS:-$rounds} scripts/cpp_tests.sh "$job" "${args[@]}"; then
    result=passed
  else
    result=FAILED
    status=1
  fi
  echo "sanitizers: $job $result ($(($(date +%s) - t0)) s, build and run)"
done
exit $status
