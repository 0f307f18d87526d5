#!/usr/bin/env bash
# Set up if needed, then run the whole test suite with every GPU-path test under Vulkan
# synchronization validation (a validation message fails the test that caused it).
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
# package (with its compiled shaders and native module) is the one imported.
.venv/bin/pytest --vk-validation -q -p no:cacheprovider "$@" || status=$?
exit $status
