"""Placement policies: which recurrent nodes the device takes.

* ``"gpu"`` (the default): every node the device path can run goes to the device.
* ``"auto"``: a node the device could run stays on ONNX Runtime CPU where the calibrated cost
  model (``ortops.ort.costmodel``) predicts ORT CPU faster for the node's shape; the placement
  report says both predictions either way. Where a dimension is dynamic the prediction assumes
  :data:`DEFAULT_SEQ` steps and a batch of :data:`DEFAULT_BATCH` (and says so).

The work of a node and the decision are the native core's (``src/core/placement/placement_policy.hpp``,
through ``_vk``), the ones the plugin execution provider's placement "auto" makes, so both
doors leave the same nodes to the CPU for one calibration.
"""

from __future__ import annotations

from ortops import vocabulary
from ortops.ort import costmodel

#: The placement policies: the core's names (ortops.vocabulary.PLACEMENTS), the default first.
POLICIES = vocabulary.PLACEMENTS
#: What "auto" assumes for a dynamic sequence length: a sentence or a second of audio frames
#: (the recognizer's 80 is static); streaming models have a static 1. The core's values
#: (placement_policy.hpp), read on first use: importing this module needs no native module.
#: What "auto" assumes for a dynamic batch (DEFAULT_BATCH): one request (``ortops run``'s
#: default too).
_NATIVE_CONSTANTS = ("DEFAULT_SEQ", "DEFAULT_BATCH")


def __getattr__(name: str):
    if name in _NATIVE_CONSTANTS:
        return getattr(costmodel._native(), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def check(policy: str) -> str:
    """``policy`` if it is one of :data:`POLICIES`; a ValueError naming the argument otherwise."""
    if policy not in POLICIES:
        raise ValueError(f"placement must be one of {', '.join(map(repr, POLICIES))}, got {policy!r}")
    return policy


def node_work(op: str, attrs, x_dims, w_dims) -> costmodel.Work:
    """The :class:`costmodel.Work` of one run of a node: X's dims (None where dynamic or
    unknown), W's dims, its attributes (an ``ortops.ort.nodeconfig.NodeAttrs``)."""
    dirs = 2 if attrs.direction == "bidirectional" else 1
    dims = (lambda d: None if d is None else [v if v else None for v in d])
    return costmodel.Work(*costmodel._native().node_work(costmodel.GATES[op], attrs.hidden_size or None,
                                                          int(attrs.layout or 0), dirs, dims(x_dims), dims(w_dims)))


def choose(op: str, attrs, x_dims, w_dims, device, cal: costmodel.Calibration | None = None) -> tuple[bool, str]:
    """``(device wins, why)`` for a node under "auto" (``cal``: the calibration to use; by
    default the device's, cached or measured)."""
    cal = cal or costmodel.calibration(device)
    w = node_work(op, attrs, x_dims, w_dims)
    gpu, why = costmodel._native().choose_placement(w.astuple(), cal.device.astuple(), cal.cpu.astuple())
    return bool(gpu), why
