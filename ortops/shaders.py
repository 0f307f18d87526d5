"""SPIR-V for the passes, compiled at build time from glsl/ and installed in ortops/spirv."""

from __future__ import annotations

import functools
from importlib import resources

import numpy as np


@functools.lru_cache(maxsize=None)
def spirv(name: str, dtype=np.float32) -> bytes:
    """The compiled shader ``glsl/<name>.comp`` for tensors of ``dtype`` (float32 or float16)."""
    precision = "f16" if np.dtype(dtype) == np.float16 else "f32"
    path = resources.files("ortops") / "spirv" / f"{name}_{precision}.spv"
    try:
        return path.read_bytes()
    except FileNotFoundError:
        raise RuntimeError(
            f"ortops: shader {name}_{precision}.spv is not installed; reinstall ortops "
            "(pip install .) so that CMake compiles glsl/"
        ) from None
