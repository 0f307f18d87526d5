#!/usr/bin/env bash
# Fills .whl-ray1/ and .whl-ray2/ (git-ignored) with the wheels that Ray Serve needs on the GPU
# machine, for scripts/gpu_machine.sh's stages servewheels and serve (its header comment there
# gives the two device calls). Run here, where PyPI is reached; that machine reaches nothing.
#
# What: ray[serve] at the newest version pyproject.toml's `serve` extra admits (2.60.0 when
# last resolved), with its whole dependency tree, binary wheels resolved for the machine's image:
# CPython 3.12 (3.12.3 seen there), x86_64, glibc 2.28 or newer (its PyTorch 2.11 wheels are
# manylinux_2_28). The packages the image already has are left out: device/KINDS.md's list
# ("Python packages already there"), pinned where its pip list row gave a
# version (numpy 2.5.2, ...); or, given RAY_WHEELS_IMAGE=FILE, a `python3 -m pip list
# --format=freeze` taken there, every version in it pinned while resolving. What the carried
# wheels require of the left-out packages is printed: most of the image's versions were never
# read, so if `import ray` / `from ray import serve` fails there, compare them with pip list.
#
# ray's wheel (75.6 MiB for 2.60.0) is repacked to 23.7 MiB, each file kept otherwise as published:
#   - removed: ray/jars/ (Java workers, 34.5 MB unpacked), ray/dashboard/client/build/ (the
#     dashboard's web client; serve_bench starts Ray with include_dashboard=False), and Ray's
#     libraries that Ray Core and Serve never import: rllib, data, train, tune, air, llm (only
#     the dashboard head's Train/Data pages and ray.serve.llm, which needs vLLM, import them);
#   - ELF files stripped (strip --strip-unneeded, symbol tables only: gcs_server, raylet and
#     _raylet.so go from 120 to 84 MB unpacked; a C++ crash backtrace loses function names);
#   - members of 256 KiB or more stored LZMA-compressed (zipfile, which pip unpacks wheels with,
#     reads them), the rest deflated at level 9; RECORD rewritten for what changed.
# Checked on CPython 3.12.1: both folders installed as the stages do, plus the
# left-out packages, ray.init(), serve.run() of a @serve.batch deployment and an HTTP request ran.
#
# Why two folders: a device call carries at most 64 MiB, working tree included; ray's wheel is
# 24 MiB and ray[serve]'s other wheels that the image lacks another 24. ray goes in .whl-ray1/,
# the rest in .whl-ray2/ (what would not fit there in .whl-ray1/). Wheels that share a top-level
# directory (opentelemetry-*, opencensus*, google-*) stay together, since `pip install --target
# --upgrade` replaces such a directory whole when a later install brings it again (only bin/ is
# shared: the second install's scripts replace the first's; Ray needs none of them to start).
#
# The check: each folder, plus what each call carries besides it (RAY_WHEELS_CARRY, by default
# `.gl .whl build/deps/kp-0.9.0.tar.gz build/deps/onnxruntime`: the serve stages build ortops
# but need neither silero-vad's wheel, 11.3 MB, nor the .deb the ORT headers came from) and the
# working tree (tracked and untracked files not ignored), must stay under 64 MiB; the script
# exits 1 otherwise. With build/deps carried whole (.gl, .whl and build/deps: 45 MiB, 48 with the
# tree) a call has 16 MiB left for wheels, less than ray's alone: that figure is printed too.
# Then pip resolves ray[serve] with no index from the two folders plus the left-out packages
# (--dry-run, CPython 3.12): it must succeed and take every wheel carried.
#
# Usage: scripts/gpu/ray_wheels.sh   (about a minute of one core, most of it LZMA; 135 MB downloaded)
# Env: RAY_SPEC (default: pyproject's serve extra, "ray[serve]>=2.10"), RAY_WHEELS_CARRY,
#      RAY_WHEELS_IMAGE, PYTHON (default python3: a CPython 3.8+ with pip; it need not be 3.12),
#      CHECK_PYTHON (a Python 3.12 for the resolution check; python3.12 by default, if found).
set -euo pipefail
top=$(cd "$(dirname "$0")/../.." && pwd)
cd "$top"
PY=${PYTHON:-python3}
command -v strip > /dev/null || { echo "ray_wheels.sh: needs strip (binutils)" >&2; exit 1; }
CARRY=${RAY_WHEELS_CARRY:-.gl .whl build/deps/kp-0.9.0.tar.gz build/deps/onnxruntime}
for p in $CARRY; do
  [ -e "$p" ] || { echo "ray_wheels.sh: $p is missing: make it first (scripts/gpu_machine.sh's header says how)," \
    "or name what the calls carry in RAY_WHEELS_CARRY" >&2; exit 1; }
done
SPEC=${RAY_SPEC:-$("$PY" - <<'EOF'
import re
text = open("pyproject.toml").read()
m = re.search(r'^serve\s*=\s*\[\s*"([^"]+)"', text, re.M)
print(m.group(1) if m else "ray[serve]")
EOF
)}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# The image's packages (device/KINDS.md, "Python packages already there"; versions from its pip
# list row).
if [ -n "${RAY_WHEELS_IMAGE:-}" ]; then
  cp "$RAY_WHEELS_IMAGE" "$work/image.txt"
else
  cat > "$work/image.txt" <<'EOF'
absl-py accelerate==1.15.0 aiofiles aiohappyeyeballs aiohttp aiosignal annotated-doc anyio attrs
botorch==0.18.1 build certifi charset-normalizer chex click cloudpickle cmake colorama contourpy
coverage cuda-bindings cuda-core cuda-pathfinder cuda-toolkit cupy-cuda13x==14.2.0 cycler cython
diffrax e3nn einops equinox etils execnet filelock flatbuffers flax fonttools formulaic frozenlist
fsspec gpytorch==1.15.2 grpcio==1.84.0 h11 h5py hf-xet httpcore httpx huggingface-hub==1.33.0 humanize
hypothesis idna imageio iniconfig interface-meta jax==0.11.2 jax-cuda13-pjrt==0.11.2
jax-cuda13-plugin==0.11.2 jaxlib==0.11.2 jaxtyping==0.3.11 jinja2 joblib kiwisolver lazy-loader
lightning lightning-utilities linear-operator lineax llvmlite lxml markdown markdown-it-py
markupsafe matplotlib mdurl meson ml-dtypes mpi4py mpmath msgpack multidict multipledispatch
mypy-extensions nanobind narwhals networkx ninja numba numba-cuda numpy==2.5.2 numpyro==0.21.0
nvidia-cublas nvidia-cuda-cupti nvidia-cuda-nvrtc nvidia-cuda-runtime nvidia-cudnn-cu13
nvidia-cufft nvidia-cufile nvidia-curand nvidia-cusolver nvidia-cusparse nvidia-cusparselt-cu13
nvidia-ml-py nvidia-nccl-cu13 nvidia-nvjitlink nvidia-nvshmem-cu13 nvidia-nvtx onnx==1.23.1
onnx-ir==1.0.0 onnxruntime==1.30.0 onnxscript==0.7.2 opencv-python-headless optax opt-einsum
opt-einsum-fx optimistix orbax-checkpoint packaging pandas pathspec patsy peft pillow pip pluggy
portalocker prometheus-client propcache protobuf psutil pyarrow pybind11 py-cpuinfo pygments
pyparsing pyproject-hooks pyre-extensions pytest pytest-benchmark pytest-cov pytest-mock
pytest-timeout pytest-xdist python-dateutil pytorch-lightning==2.6.6 pyyaml regex requests rich
sacrebleu safetensors==0.8.0 scikit-build-core scikit-image scikit-learn scipy seaborn
sentencepiece==0.2.2 sentence-transformers==6.0.1 setuptools shellingham simplejson six
sortedcontainers statsmodels sympy tabulate tensorboard tensorboard-data-server tensorstore
threadpoolctl tifffile tiktoken==0.14.0 timm tokenizers==0.23.2 toolz torch==2.11.0
torchaudio==2.11.0 torchdiffeq==0.2.5 torch-geometric==2.8.0.post1 torchmetrics==1.9.0
torchvision==0.26.0 tqdm transformers==5.17.0 treescope triton==3.6.0 typer typing-extensions
typing-inspect urllib3 uvloop wadler-lindig werkzeug wheel wrapt xarray xxhash yarl zipp
EOF
fi
# grpcio==1.84.0: seen on the image, where the grpcio-reflection that ray[serve]
# pulled in unpinned (1.85.1) refused to import against it ("depends on grpcio>=1.85.1");
# pinning grpcio pins grpcio-reflection to the same release.
# Pins for the resolver: NAME==VERSION entries, where pip can read the version.
tr ' ' '\n' < "$work/image.txt" | grep -E '^[A-Za-z0-9][A-Za-z0-9._-]*==[0-9][A-Za-z0-9.!]*$' \
  > "$work/constraints.txt" || true

plat=(--only-binary=:all: --python-version 3.12 --implementation cp --abi cp312
      --platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64 --platform manylinux_2_24_x86_64
      --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 --platform manylinux1_x86_64)
echo "ray_wheels.sh: downloading $SPEC and its dependencies for CPython 3.12, manylinux x86_64"
"$PY" -m pip download -q --disable-pip-version-check "${plat[@]}" -c "$work/constraints.txt" \
  -d "$work/all" "$SPEC" > "$work/download.log" 2>&1 \
  || { grep -v "is ignored: it is neither" "$work/download.log" >&2; echo "ray_wheels.sh: pip download failed" >&2; exit 1; }

mkdir -p .whl-ray1 .whl-ray2
rm -f .whl-ray1/*.whl .whl-ray2/*.whl
status=0
nice -n 19 "$PY" - "$work" "$CARRY" <<'EOF' || status=1
import base64, csv, glob, hashlib, io, os, re, subprocess, sys, tempfile, zipfile

work, carry = sys.argv[1], sys.argv[2].split()
LIMIT = 64 << 20
DROP = ("ray/jars/", "ray/dashboard/client/build/",
        "ray/rllib/", "ray/data/", "ray/train/", "ray/tune/", "ray/air/", "ray/llm/")
LZMA_MIN = 256 << 10
MiB = lambda n: f"{n / (1 << 20):.1f} MiB"
canon = lambda name: re.sub(r"[-_.]+", "-", name).lower()

image = {}
for tok in open(f"{work}/image.txt").read().split():
    m = re.match(r"([A-Za-z0-9][A-Za-z0-9._-]*)(?:==(\S+))?$", tok)
    if m:
        image[canon(m[1])] = m[2]


def du(path):
    if os.path.isfile(path):
        return os.path.getsize(path)
    return sum(os.path.getsize(os.path.join(d, f)) for d, _, fs in os.walk(path) for f in fs
               if not os.path.islink(os.path.join(d, f)))


def tree_size():
    out = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
                         capture_output=True, check=True).stdout.decode()
    return sum(os.path.getsize(f) for f in out.split("\0") if f and os.path.isfile(f) and not os.path.islink(f))


def b64hash(data):
    return "sha256=" + base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()


def repack_ray(src, dst):
    """src without DROP, ELF files stripped, big members LZMA; RECORD rewritten."""
    zin = zipfile.ZipFile(src)
    record = next(n for n in zin.namelist() if n.endswith(".dist-info/RECORD"))
    rows = list(csv.reader(io.StringIO(zin.read(record).decode())))
    entry = {r[0]: r for r in rows if r}
    dropped = stripped = 0
    with tempfile.TemporaryDirectory() as tmp, zipfile.ZipFile(dst, "w") as zout:
        for info in zin.infolist():
            name = info.filename
            if name == record:
                continue
            if name.startswith(DROP):
                entry.pop(name, None)
                dropped += info.file_size
                continue
            data = zin.read(info)
            if data[:4] == b"\x7fELF":
                p = os.path.join(tmp, "elf")
                with open(p, "wb") as f:
                    f.write(data)
                if subprocess.run(["strip", "--strip-unneeded", p], capture_output=True).returncode == 0:
                    new = open(p, "rb").read()
                    if len(new) < len(data):
                        stripped += len(data) - len(new)
                        data = new
                        entry[name] = [name, b64hash(data), str(len(data))]
            zi = zipfile.ZipInfo(name, info.date_time)
            zi.external_attr, zi.create_system = info.external_attr, info.create_system
            zi.compress_type = zipfile.ZIP_LZMA if len(data) >= LZMA_MIN else zipfile.ZIP_DEFLATED
            zout.writestr(zi, data, compresslevel=9)
        out = io.StringIO()
        w = csv.writer(out, lineterminator="\n")
        for r in rows:
            if r and r[0] in entry:
                w.writerow(entry[r[0]])
        zi = zipfile.ZipInfo(record, zin.getinfo(record).date_time)
        zi.external_attr, zi.compress_type = zin.getinfo(record).external_attr, zipfile.ZIP_DEFLATED
        zout.writestr(zi, out.getvalue())
    return dropped, stripped


def tops(path):
    """Top-level directories a wheel installs (pip --target replaces them whole) and whether it
    installs scripts (bin/)."""
    dirs, scripts = set(), False
    z = zipfile.ZipFile(path)
    for n in z.namelist():
        parts = n.split("/")
        if parts[0].endswith(".dist-info"):
            if parts[1:] == ["entry_points.txt"]:
                scripts |= "_scripts]" in z.read(n).decode("utf-8", "replace")
            continue
        if parts[0].endswith(".data") and len(parts) > 2:
            if parts[1] == "scripts":
                scripts = True
                continue
            parts = parts[2:]
        if len(parts) > 1:
            dirs.add(parts[0])
    return dirs, scripts


wheels = sorted(glob.glob(f"{work}/all/*.whl"))
names = [canon(os.path.basename(w).split("-")[0]) for w in wheels]
assert len(set(names)) == len(names), "two versions of one package"
carried = [(w, n) for w, n in zip(wheels, names) if n not in image]
left_out = [(w, n) for w, n in zip(wheels, names) if n in image]
os.makedirs(f"{work}/image-wheels")
for w, n in left_out:
    os.link(w, f"{work}/image-wheels/{os.path.basename(w)}")

ray = next(w for w, n in carried if n == "ray")
orig = os.path.getsize(ray)
slim = f"{work}/slim/{os.path.basename(ray)}"
os.makedirs(os.path.dirname(slim))
print(f"repacking {os.path.basename(ray)} ({MiB(orig)}) ...", flush=True)
dropped, stripped = repack_ray(ray, slim)
print(f"  {MiB(orig)} -> {MiB(os.path.getsize(slim))}: {MiB(dropped)} of files removed ({', '.join(DROP)}),"
      f" {MiB(stripped)} of ELF symbols stripped, LZMA")
carried = [(slim if w == ray else w, n) for w, n in carried]

# Groups of wheels that share a top-level directory.
group = {n: {n} for _, n in carried}
owner, scripts = {}, []
for w, n in carried:
    d, s = tops(w)
    if s:
        scripts.append(n)
    for t in d:
        if t in owner and group[owner[t]] is not group[n]:
            merged = group[owner[t]] | group[n]
            for m in merged:
                group[m] = merged
        owner.setdefault(t, n)
size = {n: os.path.getsize(w) for w, n in carried}
groups = {frozenset(g) for g in group.values()}

base = {p: du(p) for p in carry}
tree = tree_size()
fixed = sum(base.values()) + tree
room = LIMIT - fixed
print("each call carries besides its folder: " + ", ".join(f"{p} {MiB(s)}" for p, s in base.items())
      + f", the working tree {MiB(tree)}: {MiB(fixed)}, leaving {MiB(room)} of 64 MiB for wheels")
whole = sum(du(p) for p in (".gl", ".whl", "build/deps") if os.path.exists(p)) + tree
print(f"  (with .gl, .whl and build/deps whole: {MiB(whole)}, leaving {MiB(LIMIT - whole)};"
      f" ray's wheel alone is {MiB(size['ray'])})")

# ray's group into folder 1; the rest, biggest first, into folder 2 while it fits, else 1.
folders = [[], []]
used = [0, 0]
ray_group = next(g for g in groups if "ray" in g)
for g in [ray_group] + sorted(groups - {ray_group}, key=lambda g: -sum(size[n] for n in g)):
    i = 0 if g is ray_group or fixed + used[1] + sum(size[n] for n in g) >= LIMIT else 1
    folders[i] += sorted(g)
    used[i] += sum(size[n] for n in g)
path = dict((n, w) for w, n in carried)
ok = True
for i, f in enumerate(folders, 1):
    for n in f:
        src, dst = path[n], f".whl-ray{i}/{os.path.basename(path[n])}"
        with open(src, "rb") as a, open(dst, "wb") as b:
            b.write(a.read())
    total = du(f".whl-ray{i}")
    fits = fixed + total < LIMIT
    ok &= fits
    print(f"\n.whl-ray{i}/: {len(f)} wheel{'s' * (len(f) != 1)}, {MiB(total)}; the call carries {MiB(fixed + total)}"
          f" of 64 MiB ({'fits, ' + MiB(LIMIT - fixed - total) + ' to spare' if fits else 'OVER'})")
    for n in sorted(f, key=lambda n: -size[n]):
        print(f"  {size[n] / 1e6:7.2f} MB  {os.path.basename(path[n])}")
if all(set(f) & set(scripts) for f in folders):
    print("\nnote: wheels of both folders install scripts into bin/ (" + ", ".join(sorted(scripts)) + "): the"
          " second call's install replaces /tmp/site-ray/bin, ray's `ray` and `serve` commands with it;"
          " ray.init() and serve.run() start Ray's processes without them")

# What the carried wheels ask of the packages left out (markers for CPython 3.12 on Linux).
from pip._vendor.packaging.requirements import Requirement
env = {"python_version": "3.12", "python_full_version": "3.12.3", "sys_platform": "linux",
       "platform_system": "Linux", "platform_machine": "x86_64", "implementation_name": "cpython",
       "platform_python_implementation": "CPython", "os_name": "posix"}
extras = {"ray": {"", "serve"}, "uvicorn": {"", "standard"}}
need = {}
for w, n in carried:
    meta = zipfile.ZipFile(w).read(next(x for x in zipfile.ZipFile(w).namelist()
                                        if x.endswith(".dist-info/METADATA"))).decode("utf-8", "replace")
    for line in meta.splitlines():
        if not line.startswith("Requires-Dist:"):
            continue
        r = Requirement(line.split(":", 1)[1].strip())
        if r.marker and not any(r.marker.evaluate({**env, "extra": e}) for e in extras.get(n, {""})):
            continue
        if canon(r.name) in image and str(r.specifier):
            need.setdefault(canon(r.name), set()).add(f"{r.specifier} ({n})")
print("\nleft out, the image has them: " + ", ".join(
    f"{n}{'==' + image[n] if image[n] else ''}" for _, n in sorted(left_out, key=lambda x: x[1])))
print("what the carried wheels require of them (the image's versions not all known; "
      "check there with python3 -m pip list):")
for n in sorted(need):
    print(f"  {n}{' (image: ' + image[n] + ')' if image[n] else ''}: {'; '.join(sorted(need[n]))}")
sys.exit(0 if ok else 1)
EOF

# Completeness: ray[serve] resolved from the two folders plus the left-out packages alone (no
# pip configuration: no other index or wheel folder), by a Python 3.12 where one is found
# (CHECK_PYTHON, python3.12, PYTHON), else with Requires-Python unchecked.
echo
is312() { "$1" -c 'import sys; sys.exit(sys.version_info[:2] != (3, 12))' 2> /dev/null; }
CHECK_PY=${CHECK_PYTHON:-python3.12}; extra=()
is312 "$CHECK_PY" || { CHECK_PY=$PY; is312 "$PY" || extra=(--ignore-requires-python); }
env -u PIP_FIND_LINKS -u PIP_EXTRA_INDEX_URL -u PIP_INDEX_URL -u PIP_CONSTRAINT PIP_CONFIG_FILE=/dev/null \
  "$CHECK_PY" -m pip install -q --disable-pip-version-check --dry-run --ignore-installed --no-index \
  "${plat[@]}" "${extra[@]}" \
  --target "$work/target" --find-links .whl-ray1 --find-links .whl-ray2 --find-links "$work/image-wheels" \
  --report "$work/report.json" "$SPEC" 2>&1 | grep -v "is ignored: it is neither" >&2 || true
"$PY" - "$work/report.json" "$("$CHECK_PY" -V 2>&1)${extra[*]:+, Requires-Python unchecked}" <<'EOF' || status=1
import json, os, sys, glob
try:
    report = json.load(open(sys.argv[1]))
except OSError:
    sys.exit("completeness check: pip could not resolve ray[serve] from the folders (see above)")
used = {os.path.basename(i["download_info"]["url"]) for i in report["install"]}
carried = {os.path.basename(w) for w in glob.glob(".whl-ray[12]/*.whl")}
unused = sorted(carried - used)
print(f"completeness check ({sys.argv[2]}): pip resolves {len(used)} packages for CPython 3.12 with no index, "
      f"{len(used & carried)} of them from .whl-ray1/ and .whl-ray2/, the rest being the image's"
      + (f"; carried but not needed: {', '.join(unused)}" if unused else ""))
sys.exit(1 if unused else 0)
EOF
[ $status -eq 0 ] || { echo "ray_wheels.sh: FAILED (see above)" >&2; exit 1; }
echo "ray_wheels.sh: done"
