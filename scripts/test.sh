#!/usr/bin/env bash
# Set up if needed, then run the whole test suite with every GPU-path test under Vulkan
# synchronization validation (a validation message fails the test that caused it); then the
# session, CLI and conformance tests again against the oldest onnxruntime the package admits.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
status=0
# The conformance job itself (it writes docs/conformance.md), under synchronization
# validation too: a validation message fails it. Skipped when pytest arguments are given.
if [ $# -eq 0 ]; then
  ORTOPS_VALIDATION=1 VK_LAYER_SETTINGS_PATH="$PWD/tests" .venv/bin/python -P scripts/conformance.py \
    || status=1
fi
# Run pytest from the repository root through the venv's entry point, so that the installed
# package (with its compiled shaders and native module) is the one imported. A skipped test
# fails the run (--fail-on-skip): nothing counts as passed unless it ran. Without arguments the
# job above has run the conformance suites, so the tests that run them again (marked
# conformance, tests/conftest.py) are deselected: each suite runs once. The inner loop,
# pure-Python tests only and no Vulkan device, is scripts/test.sh -m "not gpu" (seconds).
if [ $# -eq 0 ]; then
  set -- -m "not conformance"
  job_ran=1
fi
.venv/bin/pytest --vk-validation --fail-on-skip -q -p no:cacheprovider "$@" || status=$?

# The oldest admitted onnxruntime: the lower bound of pyproject's cpu extra (onnxruntime>=X), installed once
# into build/ort-oldest (pip --target, --no-deps: its dependencies are the venv's) and put
# first on PYTHONPATH. --onnxruntime-version makes pytest refuse to start if another
# onnxruntime is imported; the summary line names the one used. Skipped when pytest
# arguments are given.
if [ "${job_ran:-0}" = 1 ]; then
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
    .venv/bin/python -P scripts/conformance.py --out "$layer/conformance.md" || status=1
  # The conformance job just ran against this onnxruntime: its suites are deselected here too.
  PYTHONPATH="$PWD/$layer" .venv/bin/pytest --vk-validation --fail-on-skip -q -p no:cacheprovider \
    --onnxruntime-version "$oldest" -m "not conformance" tests/test_session.py tests/test_session_parity.py \
    tests/test_torch_exports.py tests/test_cli.py tests/test_conformance.py tests/test_control_flow.py \
    tests/test_silero_vad.py || status=$?
  # Installed like any package: types, the oldest onnxruntime-extensions, the wheel in a clean
  # venv, onnxruntime-gpu as the flavour (scripts/test_packaging.sh; docs/packaging.md).
  bash scripts/test_packaging.sh || status=1
fi
exit $status
