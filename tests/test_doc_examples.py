"""Every ```python block of README.md and docs/*.md runs as written.

Each block is a case of its own, named by its file and the line of its opening fence. It runs in
a fresh interpreter (this test's Python, so the installed ortops), its working folder a
temporary one holding `models/`, the sample models scripts/make_models.py writes (made there
if the checkout has none), so a block opens `models/recognizer.onnx` as the README's commands
do. The block is compiled under its file's name with its own line numbers, so a block that
raises fails its case with a traceback naming the file and line in the docs. Under
`--vk-validation` a block that leaves a validation message fails too.

A block that needs what a machine may lack says so in an HTML comment on the line just before
its fence, `<!-- needs: NAME -->` (several names comma-separated):

- `gpu`: a Vulkan device that is not a CPU implementation (lavapipe is not enough);
- `ray`: Ray Serve importable (the `serve` extra);
- `triton`: Triton's Python backend (`triton_python_backend_utils`, importable only inside a
  Triton server).

How such blocks are counted. Where every need of a block is met, the block is a case like any
other. Where one is not, the block is not a case on this machine (nothing is skipped: the
suite's --fail-on-skip would fail a skip); `test_every_block_runs_or_names_its_needs` counts
it, checks that it names only the needs above, and prints the blocks that did not run and why
(`pytest -rP` shows it). So on the development machine and in CI (lavapipe, no Ray, no Triton)
the blocks marked `ray` and `triton` are counted and listed there, not run; the GPU machine runs
the `gpu` ones. A block that needs Ray runs in scripts/test_full.sh's run (marker `full`),
where Ray is installed. `test_block_count_did_not_fall` keeps the docs from losing examples
quietly.
"""

from __future__ import annotations

import importlib.util
import json
import os
import pathlib
import re
import subprocess
import sys
import textwrap

import pytest

ROOT = pathlib.Path(__file__).resolve().parent.parent
NEED = re.compile(r"<!--\s*needs:\s*([\w ,-]+?)\s*-->")
KNOWN_NEEDS = ("gpu", "ray", "triton")
#: The number of python blocks in README.md and docs/*.md when this test was written (6 before
#: the docs' examples were made runnable). A change that removes examples lowers it on purpose.
MIN_BLOCKS = 7


def python_blocks():
    """(file, fence line, needs, source) of every ```python block."""
    found = []
    for doc in [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]:
        lines = doc.read_text().splitlines()
        i = 0
        while i < len(lines):
            if not lines[i].startswith("```"):
                i += 1
                continue
            lang, start = lines[i][3:].strip(), i
            j = i + 1
            while j < len(lines) and not lines[j].startswith("```"):
                j += 1
            if lang == "python":
                before = lines[start - 1] if start else ""
                m = NEED.search(before)
                needs = tuple(n.strip() for n in m.group(1).split(",")) if m else ()
                found.append((doc.relative_to(ROOT).as_posix(), start + 1, needs,
                              "\n".join(lines[start + 1:j])))
            i = j + 1
    return found


def _non_cpu_vulkan_device() -> bool:
    code = "import ortops; print(any(d.type != 'cpu' for d in ortops.devices()))"
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    return run.returncode == 0 and run.stdout.strip().endswith("True")


_MET: dict[str, bool] = {}


def need_met(name: str) -> bool:
    if name not in _MET:
        if name == "gpu":
            _MET[name] = _non_cpu_vulkan_device()
        elif name == "ray":
            _MET[name] = importlib.util.find_spec("ray") is not None
        elif name == "triton":
            _MET[name] = importlib.util.find_spec("triton_python_backend_utils") is not None
        else:
            _MET[name] = False
    return _MET[name]


BLOCKS = python_blocks()
RUNNABLE = [b for b in BLOCKS if all(n in KNOWN_NEEDS and need_met(n) for n in b[2])]

# Runs a block compiled under its doc's name, padded so that its line numbers are the doc's;
# then, under validation, fails on any message the block's work left.
RUNNER = textwrap.dedent("""
    import json, os, sys
    name, first, source = json.load(open(sys.argv[1]))
    code = compile("\\n" * first + source, name, "exec")
    exec(code, {"__name__": "__main__"})
    if os.environ.get("ORTOPS_VALIDATION", "") not in ("", "0") and "ortops.device" in sys.modules:
        messages = sys.modules["ortops.device"].validation_messages()
        if messages:
            sys.exit("validation messages:\\n" + "\\n".join(messages))
""")


@pytest.fixture(scope="module")
def workdir(tmp_path_factory):
    """A temporary folder with models/: the checkout's sample models, made there if absent."""
    work = tmp_path_factory.mktemp("doc_examples")
    models = ROOT / "models"
    if (models / "recognizer.onnx").exists():
        (work / "models").symlink_to(models, target_is_directory=True)
    else:
        subprocess.run([sys.executable, str(ROOT / "scripts" / "make_models.py"), "--out",
                        str(work / "models")], check=True, capture_output=True)
    return work


def _case(block):
    # A block that starts Ray Serve (a local Ray instance: 30 s on the 2-core machine) runs in
    # the full run only, as tests/test_serve.py does (tests/conftest.py, FULL_ONLY).
    marks = [pytest.mark.full] if "ray" in block[2] else []
    return pytest.param(block, id=f"{block[0]}:{block[1]}", marks=marks)


@pytest.mark.parametrize("block", [_case(b) for b in RUNNABLE])
def test_block_runs(block, workdir):
    doc, line, _needs, source = block
    spec = workdir / f"block_{doc.replace('/', '_')}_{line}.json"
    spec.write_text(json.dumps([doc, line, source]))
    run = subprocess.run([sys.executable, "-c", RUNNER, str(spec)], cwd=workdir,
                         capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, (
        f"the python block at {doc}:{line} failed (exit status {run.returncode}):\n"
        f"{run.stderr[-4000:]}")


def test_every_block_runs_or_names_its_needs():
    unknown = [f"{d}:{n} needs {needs}" for d, n, needs, _ in BLOCKS
               if any(x not in KNOWN_NEEDS for x in needs)]
    assert not unknown, f"needs other than {KNOWN_NEEDS}: {unknown}"
    not_here = [f"{d}:{n} (needs {', '.join(x for x in needs if not need_met(x))})"
                for d, n, needs, _ in BLOCKS if (d, n, needs, _) not in RUNNABLE]
    assert len(RUNNABLE) + len(not_here) == len(BLOCKS)
    print(f"{len(BLOCKS)} python blocks: {len(RUNNABLE)} run here, {len(not_here)} not run here:")
    for b in not_here:
        print("  " + b)


def test_block_count_did_not_fall():
    assert len(BLOCKS) >= MIN_BLOCKS, (
        f"README.md and docs/*.md hold {len(BLOCKS)} python blocks, fewer than {MIN_BLOCKS}: "
        "an example was removed (lower MIN_BLOCKS only on purpose)")
