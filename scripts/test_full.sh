#!/usr/bin/env bash
# Everything beyond the quick command (scripts/test.sh), in three lanes:
#   tests   the conformance job (it writes docs/conformance.md), and the session, CLI, EP and
#           conformance tests again against the oldest onnxruntime the package admits
#   matrix  the cases of the long matrices the quick command leaves out (marker "full",
#           tests/conftest.py: every value of every parameter already ran in the quick
#           command; these are the rest of their products)
#   builds  the packaging jobs (scripts/test_packaging.sh: types, the custom-op library from
#           plain onnxruntime and a C++ program, the fuzzers, the wheel built from a fresh
#           clone through git+file://, onnxruntime-gpu) and the sanitizer jobs
#           (scripts/test_sanitizers.sh: the core's C++ tests under TSan, and ASan with UBSan)
#   scripts/test_full.sh [LANE[,LANE...]]   the lanes to run (default: all three, in that order)
# CI (.ci/run) runs the lanes tests and builds after the quick command. The matrix lane runs on
# the GPU machine with the rest of the suite (scripts/gpu_machine.sh, the gate every change to
# kernels, the native module, the custom op, threading or numerics passes before it is
# resolved) and here on demand: on the 2-core lavapipe machine its cases take minutes
# (docs/ci.md), which would leave CI too little margin under the 40 minutes it keeps to on a
# machine whose times move by more.
# The lanes share nothing they write (the builds lane builds in build/dist, build/cpp-*,
# build/fuzz*; the others read .venv and write build/ort-oldest), so they can run at once on a
# machine with cores to spare. One after the other here: on the 2-core machine side by side
# they only shared the same two cores (CI is CPU-bound: docs/ci.md), and the timing tests ran
# under a load they are not written for.
set -euo pipefail
cd "$(dirname "$0")/.."
lanes=${1:-tests,matrix,builds}
for lane in ${lanes//,/ }; do
  case $lane in
    tests|matrix|builds) ;;
    *) echo "test_full.sh: a lane is tests, matrix or builds (comma-separated; none: all three), got '$lane'" >&2
       exit 2 ;;
  esac
done
scripts/setup.sh
status=0
t0=$(date +%s)
stamp() { echo "test_full: $1 ($(($(date +%s) - t0)) s)"; }
# Every pytest run and the conformance job here run in one process per core (at most 4:
# scripts/ci/test_jobs.sh; pytest-xdist, conformance.py --jobs): lavapipe compiles each
# pipeline on one core (docs/ci.md). pytest's -n is 0 for one process (its own); the
# conformance job's --jobs counts processes.
pytest_n=$(scripts/ci/test_jobs.sh)
processes=$((pytest_n > 0 ? pytest_n : 1))

tests_lane() {
# The conformance job itself (it writes docs/conformance.md), under synchronization
# validation too: a validation message fails it. Its suites (marked conformance) are
# deselected from pytest: each suite runs once.
ORTOPS_VALIDATION=1 VK_LAYER_SETTINGS_PATH="$PWD/tests" .venv/bin/python -P scripts/ci/conformance.py \
  --jobs "$processes" || status=1
stamp "conformance job"

# The oldest admitted onnxruntime: the lower bound of pyproject's cpu extra (onnxruntime>=X), installed once
# into build/ort-oldest (pip --target, --no-deps: its dependencies are the venv's) and put
# first on PYTHONPATH. --onnxruntime-version makes pytest refuse to start if another
# onnxruntime is imported; the summary line names the one used.
oldest=$(.venv/bin/python -c 'import re, tomllib
deps = tomllib.load(open("pyproject.toml", "rb"))["project"]["optional-dependencies"]["cpu"]
print(next(m.group(1) for d in deps if (m := re.fullmatch(r"onnxruntime>=([0-9]+\.[0-9]+\.[0-9]+)", d.replace(" ", "")))))')
layer=build/ort-oldest
if [ "$(cat "$layer/.version" 2>/dev/null)" != "$oldest" ]; then
  echo "test: installing onnxruntime==$oldest into $layer"
  rm -rf "$layer"
  .venv/bin/python -m pip install -q --no-deps --target "$layer" "onnxruntime==$oldest"
  echo "$oldest" > "$layer/.version"
fi
echo "test: the session, CLI and conformance tests against onnxruntime $oldest (the oldest admitted)"
# The conformance job's quick grid here (one option set per grid point, every cell, direction,
# layout, precision and opset; the backend suite whole): what differs between onnxruntime
# versions is how a session reaches the library (registration, the C API's versions, the
# EP's), which every case exercises; the numerics are ours and the full grid checked them above.
PYTHONPATH="$PWD/$layer" ORTOPS_VALIDATION=1 VK_LAYER_SETTINGS_PATH="$PWD/tests" \
  .venv/bin/python -P scripts/ci/conformance.py --quick --jobs "$processes" \
  --out "$layer/conformance.md" || status=1
# The conformance job just ran against this onnxruntime: its suites are deselected here too.
PYTHONPATH="$PWD/$layer" .venv/bin/pytest --vk-validation --fail-on-skip -q -p no:cacheprovider \
  --onnxruntime-version "$oldest" -m "not conformance" -n "$pytest_n" tests/test_session.py tests/test_session_parity.py \
  tests/test_torch_exports.py tests/test_cli.py tests/test_conformance.py tests/test_control_flow.py \
  tests/test_silero_vad.py tests/test_ep.py tests/test_session_ep.py tests/test_ep_placement.py tests/test_ep_options.py || status=1
stamp "onnxruntime $oldest"
}

matrix_lane() {
.venv/bin/pytest --vk-validation --fail-on-skip -q -p no:cacheprovider -m "full and not conformance" \
  -n "$pytest_n" || status=1
stamp "the matrices' other cases"
}

builds_lane() {
# Installed like any package: types, the custom-op library (no libpython, end to end, the C++
# example), the fuzzers, the wheel in a clean venv, onnxruntime-gpu as the flavour, a fresh
# clone (scripts/test_packaging.sh; docs/packaging.md, docs/security.md).
bash scripts/test_packaging.sh || status=1
stamp "packaging jobs"
# The core and its C++ tests under ThreadSanitizer (the concurrency suite), AddressSanitizer
# and UBSan (every C++ test), each job's time printed (scripts/test_sanitizers.sh,
# docs/sanitizers.md). Their build directories (build/cpp-*) are kept: a later run rebuilds
# only what changed.
bash scripts/test_sanitizers.sh || status=1
stamp "sanitizer jobs"
}

[[ ",$lanes," == *",tests,"* ]] && tests_lane
[[ ",$lanes," == *",matrix,"* ]] && matrix_lane
[[ ",$lanes," == *",builds,"* ]] && builds_lane
exit $status
