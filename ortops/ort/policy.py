"""Placement policies: which recurrent nodes the device takes.

* ``"gpu"`` (the default): every node the device path can run goes to the device.
* ``"auto"``: a node the device could run stays on ONNX Runtime CPU where the calibrated cost
  model (``ortops.ort.costmodel``) predicts ORT CPU faster for the node's shape; the placement
  report says both predictions either way. Where a dimension is dynamic the prediction assumes
  :data:`DEFAULT_SEQ` steps and a batch of :data:`DEFAULT_BATCH` (and says so).
"""

from __future__ import annotations

from ortops.ort import costmodel

POLICIES = ("gpu", "auto")
#: What "auto" assumes for a dynamic sequence length: a sentence or a second of audio frames
#: (the recognizer's 80 is static); streaming models have a static 1.
DEFAULT_SEQ = 64
#: What "auto" assumes for a dynamic batch: one request (``ortops run``'s default too).
DEFAULT_BATCH = 1


def check(policy: str) -> str:
    """``policy`` if it is one of :data:`POLICIES`; a ValueError naming the argument otherwise."""
    if policy not in POLICIES:
        raise ValueError(f"placement must be one of {', '.join(map(repr, POLICIES))}, got {policy!r}")
    return policy


def _dim(dims, axis: int):
    return dims[axis] if dims is not None and len(dims) > axis and dims[axis] else None


def node_work(op: str, attrs, x_dims, w_dims) -> costmodel.Work:
    """The :class:`costmodel.Work` of one run of a node: X's dims (None where dynamic or
    unknown), W's dims, its attributes (an ``ortops.ort.nodeconfig.NodeAttrs``)."""
    assumed = []
    seq_axis, batch_axis = (1, 0) if attrs.layout else (0, 1)
    seq, batch = _dim(x_dims, seq_axis), _dim(x_dims, batch_axis)
    if seq is None:
        seq = DEFAULT_SEQ
        assumed.append(f"sequence {seq}")
    if batch is None:
        batch = DEFAULT_BATCH
        assumed.append(f"batch {batch}")
    hidden = attrs.hidden_size or (_dim(w_dims, 1) or 0) // costmodel.GATES[op] or 1
    inp = _dim(w_dims, 2) or _dim(x_dims, 2) or hidden
    dirs = 2 if attrs.direction == "bidirectional" else 1
    return costmodel.work(op, seq, batch, inp, hidden, dirs, ", ".join(assumed))


def _ms(seconds: float) -> str:
    return f"{seconds * 1e3:.3g} ms"


def choose(op: str, attrs, x_dims, w_dims, device, cal: costmodel.Calibration | None = None) -> tuple[bool, str]:
    """``(device wins, why)`` for a node under "auto" (``cal``: the calibration to use; by
    default the device's, cached or measured)."""
    cal = cal or costmodel.calibration(device)
    w = node_work(op, attrs, x_dims, w_dims)
    dev, cpu = cal.device.predict(w), cal.cpu.predict(w)
    assumed = f" (assumed {w.assumed})" if w.assumed else ""
    if cpu < dev:
        return False, f"ORT CPU: predicted {_ms(cpu)} vs device {_ms(dev)}{assumed}"
    return True, f"predicted {_ms(dev)} vs ORT CPU {_ms(cpu)}{assumed}"
