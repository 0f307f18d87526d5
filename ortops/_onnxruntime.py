"""Which onnxruntime ortops runs beside: any flavour, at least the admitted version.

Every onnxruntime flavour (onnxruntime, onnxruntime-gpu, onnxruntime-directml,
onnxruntime-openvino, ...) installs the same ``onnxruntime`` module, so ortops does not require
one of them by name (pip would install the CPU wheel over the user's GPU one); ``ortops[cpu]``
pulls the CPU wheel. This module says clearly when none is installed (checked at ``import
ortops``, without importing onnxruntime) and when the one imported is older than the admitted
lower bound (checked when ``ortops.ort`` imports it). The bound is read from the installed
package's metadata (pyproject.toml's ``cpu`` extra): one place states it.
"""

from __future__ import annotations

import importlib.util
import re

FLAVOURS = ("onnxruntime", "onnxruntime-gpu", "onnxruntime-directml", "onnxruntime-openvino")
#: Used when ortops runs from a source tree without installed metadata; a test checks it
#: equals pyproject.toml's bound.
FALLBACK_MIN_VERSION = "1.29.0"


def _missing_message() -> str:
    return (
        "ortops needs ONNX Runtime, and no onnxruntime module is installed. Install one "
        "flavour: pip install 'ortops[cpu]' (the CPU wheel, onnxruntime), or "
        + ", ".join(f"pip install {f}" for f in FLAVOURS[1:])
        + " for your accelerator; ortops runs beside whichever provides the onnxruntime module."
    )


def require_present() -> None:
    """Raise ImportError naming the flavours when no ``onnxruntime`` module can be imported."""
    if importlib.util.find_spec("onnxruntime") is None:
        raise ImportError(_missing_message(), name="onnxruntime")


def requirement(name: str) -> str:
    """The installed ortops' requirement on ``name`` (e.g. ``onnxruntime>=1.29.0``);
    just ``name`` where ortops runs from a source tree without metadata."""
    from importlib import metadata

    try:
        requires = metadata.requires("ortops") or []
    except metadata.PackageNotFoundError:
        return name
    for req in requires:
        if re.match(rf"{re.escape(name)}\s*[<>=!~]", req):
            return req.split(";")[0].strip()
    return name


def min_version() -> str:
    """The lowest onnxruntime version ortops admits (the ``cpu`` extra's lower bound)."""
    from importlib import metadata

    try:
        requires = metadata.requires("ortops") or []
    except metadata.PackageNotFoundError:
        return FALLBACK_MIN_VERSION
    for req in requires:
        m = re.match(r"onnxruntime\s*>=\s*([0-9][0-9.]*)", req)
        if m:
            return m.group(1)
    return FALLBACK_MIN_VERSION


def _numbers(version: str) -> tuple[int, ...]:
    m = re.match(r"([0-9]+(?:\.[0-9]+)*)", version)
    return tuple(int(x) for x in m.group(1).split(".")) if m else ()


def require_version(version: str, minimum: str | None = None) -> None:
    """Raise ImportError when ``version`` (the imported onnxruntime's) is below the bound."""
    minimum = minimum or min_version()
    if _numbers(version) < _numbers(minimum):
        raise ImportError(
            f"ortops needs onnxruntime >= {minimum}, got {version}: older versions fail ortops' "
            "tests in ONNX Runtime's own recurrent kernels (docs/onnxruntime.md, \"Supported "
            "onnxruntime versions\"). Upgrade the flavour you use (pip install --upgrade "
            "onnxruntime, or onnxruntime-gpu, ...), or pip install 'ortops[cpu]'.",
            name="onnxruntime",
        )
