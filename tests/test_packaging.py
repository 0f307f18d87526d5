"""Installed like any Python package: onnxruntime flavours, one version, py.typed, logging,
the custom-op library (docs/packaging.md). No Vulkan device needed."""

import ast
import importlib.metadata as metadata
import logging
import pathlib
import subprocess
import sys
import tomllib

import pytest

import ortops
from ortops import _onnxruntime

ROOT = pathlib.Path(__file__).resolve().parent.parent
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]


def _bound(requirements, name):
    for req in requirements:
        text = req.replace(" ", "")
        if text.startswith(name + ">=") or text.startswith(name + "<"):
            return text[len(name):]
    raise AssertionError(f"no requirement on {name} in {requirements}")


# -- onnxruntime flavours ------------------------------------------------------


def test_plain_install_requires_no_onnxruntime_flavour():
    names = [r.split(";")[0].replace(" ", "") for r in metadata.requires("ortops") or []]
    plain = [r for r in metadata.requires("ortops") or [] if "extra ==" not in r]
    assert not any(r.startswith("onnxruntime")
                   for r in plain), plain
    cpu = [r for r in metadata.requires("ortops") if 'extra == "cpu"' in r]
    assert [r.split(";")[0].replace(" ", "") for r in cpu] == ["onnxruntime>=" + _onnxruntime.min_version()], names
    assert not any(d.startswith("onnxruntime")
                   for d in PYPROJECT["dependencies"])


def test_the_bound_is_stated_once():
    # pyproject's cpu extra is the source; the installed metadata carries it to min_version();
    # the fallback (a source tree without metadata) must not drift from it.
    bound = _bound(PYPROJECT["optional-dependencies"]["cpu"], "onnxruntime")
    assert bound == ">=" + _onnxruntime.min_version() == ">=" + _onnxruntime.FALLBACK_MIN_VERSION


def test_import_without_onnxruntime_names_the_flavours():
    # sys.modules[name] = None is how Python spells "this module cannot be imported".
    code = "import sys; sys.modules['onnxruntime'] = None; import ortops"
    done = subprocess.run([sys.executable, "-P", "-c", code], capture_output=True, text=True, timeout=60)
    assert done.returncode != 0
    err = done.stderr.strip().splitlines()[-1]
    assert err.startswith("ImportError: ortops needs ONNX Runtime, and no onnxruntime module"), err
    for flavour in ("onnxruntime-gpu", "onnxruntime-directml", "onnxruntime-openvino", "ortops[cpu]"):
        assert flavour in err, err


@pytest.mark.parametrize("version,ok", [("1.28.9", False), ("1.9.0", False), ("0.99", False),
                                        ("1.29.0", True), ("1.31.1+cu12", True), ("2.0.0", True)])
def test_onnxruntime_below_the_bound_is_refused(version, ok):
    if ok:
        _onnxruntime.require_version(version, "1.29.0")
        return
    with pytest.raises(ImportError, match=rf"needs onnxruntime >= 1\.29\.0, got {version}:"):
        _onnxruntime.require_version(version, "1.29.0")


def test_the_imported_onnxruntime_is_admitted():
    import onnxruntime

    import ortops.ort.session  # noqa: F401 - its import runs the check

    assert _onnxruntime._numbers(onnxruntime.__version__) >= _onnxruntime._numbers(_onnxruntime.min_version())


# -- one version, typed ----------------------------------------------------------------


def test_one_version_source():
    assert "version" not in PYPROJECT and "version" in PYPROJECT["dynamic"]
    assert ortops.__version__ == metadata.version("ortops")


def test_package_is_typed():
    assert (pathlib.Path(ortops.__file__).parent / "py.typed").is_file()


@pytest.mark.parametrize("command", [["-m", "ortops"], ["ortops"]], ids=["python -m ortops", "ortops"])
def test_version_flag_prints_the_package_version(command):
    if command == ["ortops"]:      # the console script pip installed beside this interpreter
        command = [str(pathlib.Path(sys.executable).with_name("ortops"))]
    else:
        command = [sys.executable, "-P", *command]
    out = subprocess.run([*command, "--version"], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0 and out.stdout == f"ortops {metadata.version('ortops')}\n", out


# -- the public names ----------------------------------------------------------------


def test_plugin_ep_package_names():
    # ONNX Runtime's plugin-EP packaging guidance: get_library_path, get_ep_names, get_ep_name
    # (the onnxruntime-ep-* packages' names); the earlier ep_library_path is the same function.
    assert ortops.get_library_path is ortops.ep_library_path
    path = pathlib.Path(ortops.get_library_path())
    assert path.is_file() and path.name == "libortops_ort.so" and path.parent == pathlib.Path(ortops.__file__).parent
    assert ortops.get_ep_names() == [ortops.get_ep_name()] == [ortops.EP_NAME] == ["OrtopsExecutionProvider"]


def test_dir_lists_the_public_api_before_it_is_used():
    # In a fresh interpreter, where no lazy name has been loaded yet: dir() and __all__ agree
    # on the public names, and each of them resolves.
    code = ("import json, ortops; public = [n for n in dir(ortops) if not n.startswith('_')]; "
            "print(json.dumps([public, ortops.__all__, [n for n in ortops.__all__ if getattr(ortops, n, None) is None]]))")
    out = subprocess.run([sys.executable, "-P", "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    import json

    public, names, unresolved = json.loads(out.stdout)
    assert sorted(public) == sorted(names) and len(names) == len(set(names))
    assert {"lstm", "InferenceSession", "RecurrentLayer", "get_library_path", "get_ep_names"} <= set(public)
    assert unresolved == []


# -- logging -------------------------------------------------------------------------


def _cli_layer(path: pathlib.Path, function: str | None) -> bool:
    """The command layer may print: ortops/tools/cli.py and the commands it runs in ortops/tools/threads.py,
    and main() of a tools module."""
    rel = path.relative_to(ROOT / "ortops").as_posix()
    return rel in ("tools/cli.py", "tools/threads.py") or (rel.startswith("tools/") and function == "main")


def _prints(tree):
    """(function, line) of each print() call and sys.stdout/sys.stderr use."""
    found = []

    def visit(node, function):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            function = node.name
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "print":
            found.append((function, node.lineno))
        if (isinstance(node, ast.Attribute) and node.attr in ("stdout", "stderr")
                and isinstance(node.value, ast.Name) and node.value.id == "sys"):
            found.append((function, node.lineno))
        for child in ast.iter_child_nodes(node):
            visit(child, function)

    visit(tree, None)
    return found


def test_library_code_never_prints():
    offenders = []
    for path in sorted((ROOT / "ortops").rglob("*.py")):
        for function, line in _prints(ast.parse(path.read_text(), str(path))):
            if not _cli_layer(path, function):
                offenders.append(f"{path.relative_to(ROOT)}:{line} ({function})")
    assert not offenders, "library code prints (log through logging.getLogger('ortops')): " + ", ".join(offenders)


def test_the_checker_finds_a_print():
    tree = ast.parse("import sys\ndef f():\n    print('x')\n    sys.stderr.write('y')\n")
    assert _prints(tree) == [("f", 3), ("f", 4)]


def test_ortops_adds_no_handler():
    # No NullHandler: with no configuration, warnings reach logging's last-resort handler
    # (stderr); an application silences or routes them through the "ortops" logger.
    import ortops.ort.customop  # noqa: F401
    import ortops.tools.bench  # noqa: F401
    import ortops.tools.measure  # noqa: F401

    assert logging.getLogger("ortops").handlers == []
    assert logging.getLogger("ortops.bench").handlers == []


_WARN = """
import logging, pathlib, sys, tempfile
{setup}
from ortops.ort import costmodel
path = pathlib.Path(tempfile.mkdtemp()) / "costmodel.json"
path.write_text("not json")
assert costmodel.load("key", str(path)) is None
"""


def test_warnings_are_visible_by_default_and_can_be_silenced():
    # An unreadable cost cache (ortops.ort.costmodel.load) is a warning of the "ortops" logger.
    def stderr(setup):
        done = subprocess.run([sys.executable, "-P", "-c", _WARN.format(setup=setup)],
                              capture_output=True, text=True, timeout=60)
        assert done.returncode == 0, done.stderr
        return done.stderr

    shown = stderr("")
    assert shown.startswith("ortops: ") and "costmodel.json" in shown, shown
    assert stderr('logging.getLogger("ortops").setLevel(logging.ERROR)') == ""


# -- the custom-op library ------------------------------------------------------------


def test_no_onnxruntime_extensions_dependency():
    """ONNX Runtime runs the custom nodes through ortops' own library (libortops_ort.so):
    onnxruntime-extensions is neither required nor imported."""
    assert not any(d.startswith("onnxruntime-extensions") for d in PYPROJECT["dependencies"])
    import ortops.ort.session  # noqa: F401
    import sys

    assert "onnxruntime_extensions" not in sys.modules


# -- test hooks: only in the testing build (ORTOPS_TESTING), never in a wheel --------------------


def test_the_wheel_check_finds_the_test_hooks():
    """Every hook the testing build binds (ortops._vk.TEST_HOOKS) carries a docstring starting
    "Test hook:", which scripts/ci/check_wheel.py looks for in a wheel's module; run against a
    wheel (--shipping-build), the module installed must show none of them."""
    from _scripts import load_script

    from ortops import _vk

    check_wheel = load_script("ci/check_wheel")
    data = pathlib.Path(_vk.__file__).read_bytes()
    hooks = getattr(_vk, "TEST_HOOKS", None)
    if hooks is None:   # a wheel's module (tests/conftest.py: --shipping-build)
        assert check_wheel.hook_markers(data) == []
        return
    assert {"inject_fault", "Layer.run_coalesced", "batched_r", "exact_r", "coalesced_rows", "host_copy",
            "narrow_to_half", "copy_settings", "Context.host_buffer"} <= set(hooks)
    for name in hooks:
        owner = _vk
        for part in name.split("."):
            owner = getattr(owner, part)
        assert "Test hook:" in owner.__doc__, name
    found = check_wheel.hook_markers(data)
    assert "TEST_HOOKS" in found and any(m.startswith("Test hook: make every run fail") for m in found), found
    assert check_wheel.hook_markers(b"\0ortops\0Test hook: x\0") == ["Test hook: x"]
    assert check_wheel.hook_markers(b"\0host_copy\0Copy a C-contiguous array\0") == []


# -- the lab stays out of the wheel ------------------------------------------------------------


def test_the_wheel_ships_the_package_and_no_lab():
    """The wheel holds the package ortops/ (its modules, the native module, the library) and,
    of the measuring tools, only ``ortops bench``: pyproject packages ortops/ alone, none of
    its files is a lab harness by scripts/ci/check_wheel.py's rule (which CI's packaging job runs
    on the built wheel), and the installed package (built by pip as a wheel is) holds none."""
    from _scripts import load_script

    check_wheel = load_script("ci/check_wheel")
    wheel = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["scikit-build"]["wheel"]
    assert wheel["packages"] == ["ortops"]
    source = [p.relative_to(ROOT).as_posix() for p in (ROOT / "ortops").rglob("*") if p.is_file()]
    assert "ortops/tools/bench.py" in source and check_wheel.lab_files(source) == []
    installed = [str(f) for f in metadata.distribution("ortops").files or []]
    assert "ortops/tools/bench.py" in installed and check_wheel.lab_files(installed) == []
    assert not (ROOT / "experiments").exists()
    # The rule catches each of the lab's harnesses and folders wherever they would land.
    lab = [f"ortops/tools/{name}" for name in check_wheel.LAB_FILES] + [
        "bench/step_kernels.py", "experiments/host_import/host_import_bench.cpp", "ortops/host_import_bench"]
    assert check_wheel.lab_files(lab + ["ortops/tools/bench.py", "ortops/ort/placement.py"]) == sorted(lab)
    assert {f"{p.stem}.py" for p in (ROOT / "bench").glob("*.py")} >= set(check_wheel.LAB_FILES)
