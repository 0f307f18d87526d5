"""Check a repaired ortops wheel: a manylinux tag, native code that needs only the Vulkan
loader (libvulkan.so.1, the user's), glibc/libstdc++-level libraries and the libraries bundled
in the wheel itself (the custom-op library ortops/libortops_ort.so, which holds the native
core and which ortops/_vk links; auditwheel's ortops.libs/: fmt), a native module without
the test hooks (src/python/bind_testing.cpp binds them only in the testing build, ORTOPS_TESTING),
and none of the lab: the repository's bench/ (the cuDNN, sweep, host-copy and report harnesses,
the GPU studies) and experiments stay out of the wheel, whose one harness is ``ortops bench``.

    python scripts/ci/check_wheel.py build/wheelhouse/ortops-*.whl
"""

from __future__ import annotations

import io
import sys
import zipfile

#: What a manylinux system provides (PEP 600's policy) plus the Vulkan loader.
ALLOWED = {"libvulkan.so.1", "libstdc++.so.6", "libgcc_s.so.1", "libc.so.6", "libm.so.6",
           "libpthread.so.0", "libdl.so.2", "librt.so.1", "ld-linux-x86-64.so.2"}


#: What only the testing build's module holds: its list of hooks, and each hook's docstring
#: starting "Test hook:" (tests/test_packaging.py checks that every hook's does).
HOOK_MARKERS = (b"TEST_HOOKS", b"Test hook:")


def hook_markers(data: bytes) -> list[str]:
    """The test-hook markers in a native module's bytes (its string literals): none in a wheel's."""
    return sorted({s.decode("ascii", "replace")[:60] for s in data.split(b"\0")
                   for marker in HOOK_MARKERS if s.startswith(marker)})


#: The lab's harnesses (bench/: cuDNN, the sweep, the host-copy bound, the tables between docs
#: markers, docs/perf.md's peer table), by file name anywhere in a wheel; and its folders.
LAB_FILES = ("cudnn.py", "sweep.py", "hostcopy.py", "report.py", "perf.py")
LAB_FOLDERS = ("bench", "experiments", "host_import")


def lab_files(names: list[str]) -> list[str]:
    """The names of a wheel's files (``sweep.py`` under ``ortops/tools/``, ...) that belong to the lab."""
    def lab(name):
        *folders, base = name.split("/")
        return (base in LAB_FILES or base.startswith("host_import")
                or any(part in LAB_FOLDERS or part.startswith("host_import") for part in folders))
    return sorted(n for n in names if lab(n))


def needed(data: bytes) -> list[str]:
    from elftools.elf.dynamic import DynamicSection
    from elftools.elf.elffile import ELFFile

    elf = ELFFile(io.BytesIO(data))
    out = []
    for section in elf.iter_sections():
        if isinstance(section, DynamicSection):
            out += [t.needed for t in section.iter_tags() if t.entry.d_tag == "DT_NEEDED"]
    return out


def check(path: str) -> list[str]:
    problems = []
    if "manylinux" not in path:
        problems.append(f"{path}: not a manylinux wheel")
    with zipfile.ZipFile(path) as whl:
        names = whl.namelist()
        shared = {n: whl.read(n) for n in names if ".so" in n.rsplit("/", 1)[-1]}
    if lab_files(names):
        problems.append(f"{path} holds the lab's harnesses or experiments (bench/, experiments/): {lab_files(names)}")
    bundled = {n.rsplit("/", 1)[-1] for n in shared}
    if not any(n.startswith("ortops/_vk") for n in shared):
        problems.append(f"{path}: no native module ortops/_vk*.so")
    if "ortops/libortops_ort.so" not in shared:
        problems.append(f"{path}: no custom-op library ortops/libortops_ort.so")
    for name, data in shared.items():
        libs = needed(data)
        print(f"{name}: needs {', '.join(libs)}")
        extra = [lib for lib in libs if lib not in ALLOWED and lib not in bundled]
        if extra:
            problems.append(f"{name} needs {extra}, neither a system library nor bundled")
        if name == "ortops/libortops_ort.so" and "libvulkan.so.1" not in libs:
            problems.append(f"{name} does not link the user's libvulkan.so.1")
        if name.startswith("ortops/_vk") and "libortops_ort.so" not in libs:
            problems.append(f"{name} does not link the core in libortops_ort.so")
        if name.startswith("ortops/_vk") and hook_markers(data):
            problems.append(f"{name} has test hooks (a testing build, ORTOPS_TESTING): {hook_markers(data)}")
    if any("libvulkan" in b for b in bundled):
        problems.append(f"{path} bundles a Vulkan loader: {sorted(bundled)}")
    return problems


def main(argv: list[str]) -> int:
    problems = [p for path in argv for p in check(path)]
    for p in problems:
        print(f"check_wheel: {p}", file=sys.stderr)
    if not argv:
        print("check_wheel: no wheel given", file=sys.stderr)
        return 2
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
