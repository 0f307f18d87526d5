#!/bin/bash
# The C++ examples end to end: (a) data with Python (a seeded bidirectional LSTM converted by
# ortops.convert, its input and ONNX Runtime CPU's output; every model the tests run, unmodified:
# tests/models, models/ (scripts/make_models.py) and silero-vad's when its wheel is in
# build/deps, each with its input and ORT CPU's output), (b) build main.cpp (the custom-op
# library) and ep_main.cpp (the execution provider, one session per model) against Debian's
# headers (ORT API 24 or later: scripts/ort_headers.sh) and the onnxruntime wheel's
# libonnxruntime, (c) run both: no Python at run time.
#
#   examples/cpp/run.sh [LIBRARY]     LIBRARY: libortops_ort.so (default: ortops.library_path())
# PYTHON: the interpreter with ortops, onnx and onnxruntime (default: .venv/bin/python of the
# repository, else python3). BUILD_ONLY=1: stop after (b), running nothing (before the native
# library exists). Everything goes to build/examples/cpp/.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
top=$(cd "$here/../.." && pwd)
py=${PYTHON:-$top/.venv/bin/python}
[ -x "$py" ] || py=python3
out=$top/build/examples/cpp
mkdir -p "$out"

# (b) first the build, which needs no device: headers, the wheel's runtime, cmake.
inc=$(bash "$top/scripts/ort_headers.sh" "$top/build/deps" 24)
ortlib=$(cd "$out" && "$py" -c 'import glob, os, onnxruntime
d = os.path.join(os.path.dirname(onnxruntime.__file__), "capi")
libs = sorted(glob.glob(os.path.join(d, "libonnxruntime.so.1*")))
print(libs[-1] if libs else "")')
[ -n "$ortlib" ] || { echo "run.sh: no libonnxruntime.so.1* in the onnxruntime wheel of $py" >&2; exit 1; }
cmake -S "$here" -B "$out/build" -DCMAKE_BUILD_TYPE=Release \
      -DORTOPS_ORT_INCLUDE_DIR="$inc" -DORTOPS_ORT_LIBRARY="$ortlib" >/dev/null
cmake --build "$out/build" -j2
[ "${BUILD_ONLY:-0}" = 1 ] && { echo "run.sh: built $out/build/ortops_example and ortops_ep_example (BUILD_ONLY)"; exit 0; }

# (a) data, (c) run.
# (from $out, so that the installed ortops is imported, not the source tree's)
lib=${1:-$(cd "$out" && "$py" -c 'import ortops; print(ortops.library_path())')}
"$py" "$here/make_data.py" "$out/data"
"$out/build/ortops_example" "$out/data" "$lib"
"$out/build/ortops_ep_example" "$out/data/ep" "$lib"
