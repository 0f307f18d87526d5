#!/bin/bash
# Checks that the ONNX Runtime custom-op library can load where Python never starts:
#   - no libpython among its DT_NEEDED entries,
#   - no undefined dynamic symbol from Python's C API (Py*, _Py*),
#   - RegisterCustomOps exported (a defined dynamic function symbol), the entry point every
#     onnxruntime binding looks up, and the execution provider's CreateEpFactories and
#     ReleaseEpFactory,
#   - linked -z nodelete (DF_1_NODELETE), so a dlclose by ONNX Runtime or a binding leaves it loaded.
# Usage: scripts/ci/check_library.sh path/to/libortops_ort.so      (CI runs it after the build)
# Needs readelf and nm (binutils). Exit status 0 when every check passes, 1 otherwise.
set -euo pipefail
lib=${1:?usage: check_library.sh LIB}
[ -f "$lib" ] || { echo "check_library: $lib: no such file" >&2; exit 1; }
for tool in readelf nm; do
    command -v $tool >/dev/null || { echo "check_library: $tool not found (binutils)" >&2; exit 1; }
done
fail=0

needed=$(readelf -d --wide "$lib" | awk '/\(NEEDED\)/ {gsub(/[][]/, "", $NF); print $NF}')
py=$(printf '%s\n' "$needed" | grep -i 'python' || true)
if [ -n "$py" ]; then
    echo "FAIL: $lib needs $(echo $py)"; fail=1
else
    echo "ok: no libpython among NEEDED ($(echo $needed))"
fi

undef=$(nm -D --undefined-only "$lib" | awk '{print $NF}' | sed 's/@.*//' | grep -E '^_?Py' || true)
if [ -n "$undef" ]; then
    echo "FAIL: $lib leaves $(echo "$undef" | wc -l) Python symbol(s) undefined: $(echo "$undef" | head -5 | tr '\n' ' ')"; fail=1
else
    echo "ok: no undefined Py*/_Py* symbol"
fi

# NODELETE: ONNX Runtime dlcloses the library after the last session (RegisterCustomOpsLibrary_V2)
# and Java's SessionOptions.close() even while sessions run; the ops' tables, the domains
# (kept for the process, src/ort/library.cpp) and the core's Vulkan state must stay mapped.
if readelf -d --wide "$lib" | grep -q 'FLAGS_1.*NODELETE'; then
    echo "ok: linked -z nodelete"
else
    echo "FAIL: $lib is not linked with -Wl,-z,nodelete"; fail=1
fi

# nm -D --defined-only: "ADDRESS T RegisterCustomOps" (T: text, i.e. a function). The custom-op
# door's entry point, and the execution provider's two (src/ep/factory.cpp).
for symbol in RegisterCustomOps CreateEpFactories ReleaseEpFactory; do
    if nm -D --defined-only "$lib" | awk -v s="$symbol" '$2 ~ /^[TtWi]$/ && $3 == s {found=1} END {exit !found}'; then
        echo "ok: $symbol exported"
    else
        echo "FAIL: $lib does not export the function $symbol"; fail=1
    fi
done
exit $fail
