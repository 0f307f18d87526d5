"""Numerical modes of the recurrent kernels: one table, checked in one place.

- ``"deterministic"`` (the default): the same bits run after run on one device and driver;
  fixed summation order, each device's own exp/tanh/division and fused multiply-add.
- ``"exact"``: the same bits on every conformant Vulkan device (docs/exact.md): only
  correctly rounded add, subtract and multiply without contraction, own exp, log, reciprocal
  and activations, denormals flushed by the code, float16 rounding by integer code. Costs
  more GPU time (docs/perf.md).
- ``"fast"``: float16 layers project their inputs on matrix hardware (VK_KHR_cooperative_matrix:
  float16 products, float32 accumulation; ortops.fast) where the device has it, within the
  float16 tolerance and the same bits run to run; everything else, float32 layers included,
  runs the deterministic kernels (docs/modes.md).

A mode picks the compiled SPIR-V variant of every float pass (``<pass>_<precision><suffix>.spv``,
see CMakeLists.txt) and is part of each plan's key.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Dict

from ortops import vocabulary

__all__ = ["Mode", "MODES", "DEFAULT", "check_mode"]


@dataclass(frozen=True)
class Mode:
    name: str
    spirv_suffix: str    # appended to the float passes' SPIR-V file names


#: Mode "exact" has SPIR-V binaries of its own (CMakeLists.txt); "fast" runs the deterministic
#: ones (and, where the device has it, the matrix kernels: ortops.fast).
_SPIRV_SUFFIX = {"exact": "_exact"}

#: The modes: the core's names (ortops.vocabulary.MODES), in its order.
MODES: Dict[str, Mode] = {name: Mode(name, _SPIRV_SUFFIX.get(name, "")) for name in vocabulary.MODES}

#: The default mode: the vocabulary's first.
DEFAULT = vocabulary.MODES[0]

#: Passes with an exact variant (those that do float arithmetic; the rest only move words).
FLOAT_PASSES = frozenset({"input_projection", "input_projection_cpu", "state_init", "step", "step_batched", "step_tiled", "step_sequence",
                          "step_persistent", "output_sequence", "output_state"})


def check_mode(mode, where: str = "ortops") -> str:
    """The mode's canonical name; an unknown one raises ValueError listing the valid ones."""
    if mode is None:
        return DEFAULT
    name = str(mode).strip().lower() if isinstance(mode, str) else None
    if name not in MODES:
        raise ValueError(f"{where}: mode must be one of {', '.join(sorted(MODES))}, got {mode!r}")
    return name


def spirv_name(shader: str, mode: str) -> str:
    """The SPIR-V variant name suffix of ``shader`` in ``mode`` ("" or "_exact"; "fast" runs
    the deterministic binaries, with glsl/input_projection_coopmat.comp chosen by ortops.fast)."""
    return MODES[mode].spirv_suffix if shader in FLOAT_PASSES else ""
