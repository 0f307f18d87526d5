"""Load the repository's scripts/*.py and the lab's bench/*.py (neither part of the installed
package) as modules."""

import importlib.util
import pathlib
import sys

ROOT = pathlib.Path(__file__).resolve().parents[1]


def load_script(name: str):
    """scripts/<name>.py as a module (cached in sys.modules); ``name`` may hold its folder
    (``"ci/conformance"``)."""
    key = "_ortops_script_" + name.replace("/", "_")
    if key in sys.modules:
        return sys.modules[key]
    spec = importlib.util.spec_from_file_location(key, ROOT / "scripts" / f"{name}.py")
    mod = importlib.util.module_from_spec(spec)
    sys.modules[key] = mod
    spec.loader.exec_module(mod)
    return mod


def load_bench(name: str):
    """bench/<name>.py, the lab's measuring code, as the module ``name``: bench/ goes on sys.path
    (as its scripts put it there themselves), so that its modules import one another once."""
    folder = str(ROOT / "bench")
    if folder not in sys.path:
        sys.path.insert(0, folder)
    return importlib.import_module(name)
