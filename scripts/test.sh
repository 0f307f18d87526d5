#!/usr/bin/env bash
# The quick command (the README's): set up if needed, then every test that decides whether a
# change is correct, with every GPU-path test under Vulkan synchronization validation (a
# validation message fails the test that caused it), in at most 6 minutes on a 2-core machine
# that is already set up (docs/ci.md). The long parametrized matrices run a representative
# subset here: every value of every parameter at least once (tests/conftest.py, marker "full"
# on the other cases). scripts/test_full.sh runs the rest: those cases (lane matrix), the
# conformance job and the oldest onnxruntime (lane tests), the packaging and sanitizer jobs
# (lane builds); .ci/run runs this and then the lanes tests and builds. Without arguments the
# core's C++ unit tests (tests/cpp) run too, as a test of the pytest session.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
# Run pytest from the repository root through the venv's entry point, so that the installed
# package (with its compiled shaders and native module) is the one imported. A skipped test
# fails the run (--fail-on-skip): nothing counts as passed unless it ran. The conformance
# suites (marked conformance) are scripts/ci/conformance.py's job in scripts/test_full.sh. With
# arguments, they replace the selection (e.g. scripts/test.sh -m "not gpu": the pure-Python
# tests, seconds; scripts/test.sh tests/test_session.py).
if [ $# -eq 0 ]; then
  # The core's C++ unit tests (tests/cpp, doctest: the core alone, no ONNX Runtime or Python, on
  # lavapipe; the sanitizer builds of them are scripts/test_full.sh's) are built here, in the
  # wheel's build directory (scripts/cpp_tests.sh: incremental, the core's objects set-up
  # compiled), and run as one test of the pytest session (tests/test_cpp.py, two rounds of the
  # race test's sweep; its 32 are the TSan job's), beside the Python tests rather than alone
  # before them with a core idle (they compile their pipelines on one core). Idle 2-core
  # machine, Mesa's cache empty, 2026-12-06: 42 s in one of pytest's two processes, the whole
  # session 300 s.
  t0=$(date +%s)
  cpp=$(scripts/cpp_tests.sh plain --build-only)
  echo "test: the C++ tests built ($(($(date +%s) - t0)) s); they run in the pytest session (tests/test_cpp.py)"
  # In one process per core (pytest-xdist; at most 4): on lavapipe most of a test is compiling
  # its pipelines, one core each, and two processes took the selection from 783 s to 491 s on
  # the idle 2-core machine (docs/ci.md). ORTOPS_TEST_JOBS=1 runs it in this process.
  set -- -m "not conformance and not full" -n "$(scripts/ci/test_jobs.sh)" --cpp-tests="$cpp"
fi
exec .venv/bin/pytest --vk-validation --fail-on-skip -q -p no:cacheprovider "$@"
