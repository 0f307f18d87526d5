#!/usr/bin/env bash
# The rest of CI after the quick command (scripts/test.sh; .ci/run runs both), in two lanes:
#   tests   the cases of the long matrices the quick command leaves out (marker "full",
#           tests/conftest.py), the conformance job (it writes docs/conformance.md), and the
#           session, CLI and conformance tests again against the oldest onnxruntime the
#           package admits
#   builds  the packaging jobs (scripts/test_packaging.sh: types, the custom-op library from
#           plain onnxruntime and a C++ program, the fuzzers, the wheel, onnxruntime-gpu, a
#           fresh clone's pip install / pip wheel / git+file://) and the sanitizer jobs
#           (scripts/test_sanitizers.sh: the core's C++ tests under TSan, and ASan with UBSan)
#   scripts/test_full.sh [tests|builds]   one lane (default: both, one after the other)
# The lanes share nothing they write (the builds lane builds in build/wheel, build/cpp-*,
# build/fuzz* and temporary clones; the tests lane reads .venv and writes build/ort-oldest), so
# they can run at once on a machine with cores to spare. .ci/run runs them one after the other:
# on the 2-core machine side by side they only shared the same two cores (CI is CPU-bound:
# docs/ci.md), and the tests lane then ran under a load that timing tests are not written for.
# Together with scripts/test.sh every test runs once.
set -euo pipefail
cd "$(dirname "$0")/.."
lanes=${1:-tests,builds}
case ",$lanes," in
  ,tests,|,builds,|,tests,builds,) ;;
  *) echo "test_full.sh: the lane must be tests or builds (or none: both), got '$lanes'" >&2; exit 2 ;;
esac
scripts/setup.sh
status=0
t0=$(date +%s)
stamp() { echo "test_full: $1 ($(($(date +%s) - t0)) s)"; }

tests_lane() {
# The conformance job itself (it writes docs/conformance.md), under synchronization
# validation too: a validation message fails it. Its suites (marked conformance) are
# deselected from pytest: each suite runs once.
ORTOPS_VALIDATION=1 VK_LAYER_SETTINGS_PATH="$PWD/tests" .venv/bin/python -P scripts/ci/conformance.py \
  || status=1
stamp "conformance job"
.venv/bin/pytest --vk-validation --fail-on-skip -q -p no:cacheprovider -m "full and not conformance" \
  || status=1
stamp "the matrices' other cases"

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
PYTHONPATH="$PWD/$layer" ORTOPS_VALIDATION=1 VK_LAYER_SETTINGS_PATH="$PWD/tests" \
  .venv/bin/python -P scripts/ci/conformance.py --out "$layer/conformance.md" || status=1
# The conformance job just ran against this onnxruntime: its suites are deselected here too.
PYTHONPATH="$PWD/$layer" .venv/bin/pytest --vk-validation --fail-on-skip -q -p no:cacheprovider \
  --onnxruntime-version "$oldest" -m "not conformance" tests/test_session.py tests/test_session_parity.py \
  tests/test_torch_exports.py tests/test_cli.py tests/test_conformance.py tests/test_control_flow.py \
  tests/test_silero_vad.py tests/test_ep.py tests/test_session_ep.py tests/test_ep_placement.py || status=1
stamp "onnxruntime $oldest"
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
[[ ",$lanes," == *",builds,"* ]] && builds_lane
exit $status
