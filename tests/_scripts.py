"""Load the repository's scripts/*.py (not part of the installed package) as modules."""

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
