"""SPIR-V for the passes, compiled at build time from glsl/ and installed in ortops/spirv."""

from __future__ import annotations

import functools
from importlib import resources

import numpy as np

from ortops.modes import DEFAULT, spirv_name


@functools.lru_cache(maxsize=None)
def spirv(name: str, dtype=np.float32, mode: str = DEFAULT) -> bytes:
    """The compiled shader ``glsl/<name>.comp`` for tensors of ``dtype`` (float32 or float16)
    in ``mode`` (ortops.modes: the exact variant of a float pass is ``<name>_<p>_exact.spv``)."""
    precision = "f16" if np.dtype(dtype) == np.float16 else "f32"
    file = f"{name}_{precision}{spirv_name(name, mode)}.spv"
    path = resources.files("ortops") / "spirv" / file
    try:
        return path.read_bytes()
    except FileNotFoundError:
        raise RuntimeError(
            f"ortops: shader {file} is not installed; reinstall ortops "
            "(pip install .) so that CMake compiles glsl/"
        ) from None
