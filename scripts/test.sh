#!/usr/bin/env bash
# Set up if needed, then run the whole test suite with every GPU-path test under Vulkan
# synchronization validation (a validation message fails the test that caused it).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
# Run pytest from the repository root through the venv's entry point, so that the installed
# package (with its compiled shaders and native module) is the one imported.
exec .venv/bin/pytest --vk-validation -q -p no:cacheprovider "$@"
