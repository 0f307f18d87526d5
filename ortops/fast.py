"""Mode "fast" (ortops.modes, docs/modes.md): which input projection a plan records.

A float16 layer's input projection Xw = X . W^T runs on matrix hardware
(VK_KHR_cooperative_matrix: float16 x float16 products, float32 accumulation;
glsl/input_projection_coopmat.comp) where the device lists the combination that kernel is
written for and the context enabled the extension (src/core/vk/cooperative_matrix.cpp). On the same
conditions, for the cells' default activations and from the batch of
ortops.variants.COOPMAT_STEPS_FROM, the native core also records the steps' R . h on the
matrix units (glsl/step_coopmat.comp, :data:`STEP_KERNEL`; a plan says which it recorded in its
``steps``). Everything else
runs the portable deterministic kernels: float32 layers always (float16 products would round
float32 inputs to 11 bits, far outside the float32 contract of 1e-5), and float16 layers on a
device without the hardware, where fast mode gives the same bits as "deterministic".
"""

from __future__ import annotations

from typing import NamedTuple, Tuple

import numpy as np

from ortops.device import _native

__all__ = ["CoopMatShape", "COOPMAT_PASSES", "KERNEL", "PORTABLE", "REQUIRED", "STEP_KERNEL", "projection_kernel",
           "coopmat_reason"]

PORTABLE = "input_projection"
KERNEL = "input_projection_coopmat"
#: The step kernel of mode "fast" on the same hardware (glsl/step_coopmat.comp: R . h on the
#: matrix units), chosen by the native core from ortops.variants.COOPMAT_STEPS_FROM's batch for
#: float16 layers with the cells' default activations, where the projection kernel can run.
STEP_KERNEL = "step_coopmat"
#: The matrix-hardware passes: float16 variants only, float16 and float32 values.
COOPMAT_PASSES = frozenset({KERNEL, STEP_KERNEL})

#: Whether fast mode records the cooperative-matrix projection at all: yes unless
#: ORTOPS_COOPMAT=0 (read by the native core, src/core/rnn/controls.hpp). The first version
#: measured slower than the portable projection on the H200 and was opt-in; the second projects
#: LSTM 200x64x512->512 bidirectional float16 in 0.47 against 2.62 ms and 100x64x1024->1024 in
#: 0.83 against 5.11 ms (docs/modes.md).
ENABLED: bool = _native().coopmat_requested()


class CoopMatShape(NamedTuple):
    """One VkCooperativeMatrixPropertiesKHR entry, as ``Device.cooperative_matrix`` lists it."""

    m: int
    n: int
    k: int
    a: str
    b: str
    c: str
    result: str
    saturating: bool
    scope: str

    def __str__(self) -> str:
        sat = ", saturating" if self.saturating else ""
        return (f"{self.m}x{self.n}x{self.k} {self.a} x {self.b} + {self.c} -> {self.result} "
                f"({self.scope}{sat})")


#: The one combination the matrix kernels are written for (the native core's).
REQUIRED = CoopMatShape(**_native().coopmat_required())


def shapes_of(entries) -> Tuple[CoopMatShape, ...]:
    """The native description's list of dicts as CoopMatShapes (hashable, for Device)."""
    return tuple(CoopMatShape(**e) for e in entries or ())


def coopmat_reason(device, ctx) -> str | None:
    """Why ``device`` (with its context ``ctx``) cannot run the cooperative-matrix kernels, or
    None when it can (the native core's rule, src/core/rnn/kernel_choice.hpp)."""
    return _native().coopmat_reason(device, bool(getattr(ctx, "cooperative_matrix", False)),
                                    getattr(ctx, "cooperative_matrix_off", ""))


def projection_kernel(mode: str, dtype, device, ctx) -> str:
    """The input projection shader a plan of a layer records: :data:`KERNEL` in mode "fast" for
    a float16 layer on a device that can run it (the native core's rule), else :data:`PORTABLE`."""
    taken = _native().use_coopmat(mode, np.dtype(dtype).name, device, bool(getattr(ctx, "cooperative_matrix", False)),
                                  ENABLED)
    return KERNEL if taken else PORTABLE
