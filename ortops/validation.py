"""The Python door's argument checks for the ONNX recurrent operators LSTM, GRU and RNN.

A layer's configuration is checked once, by the native core, for every door: the config
decoder (``src/core/config/nodeconfig.cpp``: attribute values, activation lists, directions) and the
layer's spec (``src/core/rnn/spec.cpp``: dtypes, ranks, shapes, hidden_size from R), reached
through ``_vk.check_layer`` with a config this module encodes as the custom-op library's
nodes carry it (``ortops.ort.nodeconfig``, version 4). What stays here is Python's own: that
the arrays are numpy arrays of one dtype the caller allows (the config's dtype is W's), that an
array is small enough to be bound before anything copies it, and converting the keyword
arguments to the config's JSON (numpy scalars, bytes, +inf clip meaning none). The per-run
inputs (:func:`check_inputs`) are checked here, for the float64 reference, which has no layer.
Every error is a ``ValueError`` whose message names the operator, the argument, what was
expected and what came, e.g. ``"LSTM: R must have shape [2, 1024, 256] (num_directions,
4*hidden_size, hidden_size), got [2, 1024, 128]"``.

Optional inputs are absent only when passed as ``None``; a zero-size array is
an input like any other and must have the right shape.

Where these checks differ from ONNX Runtime 1.32 CPU (found by running it):

* ``hidden_size`` is optional here (taken from R); ORT requires the attribute.
  A hidden size of 0 is an error here, as in ORT's LSTM and GRU (ORT's RNN
  accepts it and returns empty outputs).
* ``clip``: ORT's LSTM and GRU refuse ``clip <= 0`` and NaN at session
  creation and accept +inf (which clamps nothing); we do the same for all
  three. ORT's RNN instead ignores a negative or NaN clip and, with
  ``clip = 0``, clamps every pre-activation to 0.
* ``input_forget`` / ``linear_before_reset``: ORT treats any non-zero value as
  1; we accept only 0 and 1. ORT refuses the attribute on the other
  operators as unknown; we refuse a non-zero value there (0, the API default,
  is accepted).
* ``sequence_lens`` must be int32 (ORT refuses int64 when loading the model)
  with every value in [0, seq_length] (ORT: InvalidArgument at run time).
* Arrays must be in the machine's byte order: a big-endian float32 array
  (``>f4`` on x86) is refused, and the message says "big-endian float32
  (>f4)". ORT 1.32 accepts such a feed and reads its bytes as native ones
  (wrong values); ``ortops.InferenceSession`` converts such feeds to native
  order (values kept) before ORT sees them.
* ``direction`` must be spelled exactly ``forward``, ``reverse`` or
  ``bidirectional`` (ORT does the same).
* An input size of 0 is accepted (X · Wᵀ is then 0); ORT's LSTM and RNN accept
  it, ORT's GRU aborts the process.
* seq_length = 0 and batch_size = 0 are valid here; see ``ortops.reference``
  for what they produce and how ORT differs.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from typing import Optional, Sequence, Tuple

import numpy as np

from .activations import Activation
from .cells import CELLS, cell
from . import vocabulary
from .limits import UnsupportedLayerError
from .modes import DEFAULT as DEFAULT_MODE
from .ort.nodeconfig import CONFIG_VERSION, encode

__all__ = ["GATES", "OUTPUTS", "LayerSpec", "check_layer", "check_inputs", "output_shapes", "check_bindings",
           "layer_config"]

#: Gates per cell (rows of W and R per hidden unit) and outputs per cell, in ONNX's order;
#: views of ortops.cells.CELLS, kept for the modules and scripts that import them.
GATES = {name: c.gates for name, c in CELLS.items()}
OUTPUTS = {name: c.outputs for name, c in CELLS.items()}
#: The numpy types a layer computes in: the core's names (ortops.vocabulary.DTYPES).
LAYER_DTYPES = tuple(np.dtype(name).type for name in vocabulary.DTYPES)

def _having(name: str) -> str:
    """The cells that have input or attribute ``name``, for "only defined for ..." messages."""
    return ", ".join(n for n, c in CELLS.items() if name in c.inputs or name in c.attributes)


@dataclass(frozen=True)
class LayerSpec:
    """Everything about one recurrent layer that does not depend on X.

    ``activations`` holds one tuple per direction (see
    :func:`ortops.activations.resolve_activations`); ``clip`` is ``None`` when
    absent; ``has_bias`` / ``has_peepholes`` say whether B / P were given;
    ``config`` is the node config the core checked (JSON text, ``ortops.ort.nodeconfig``'s
    format), which :func:`layer_config` completes for the native layer.
    """

    op: str
    dtype: np.dtype
    direction: str
    num_directions: int
    hidden_size: int
    input_size: int
    gates: int
    layout: int
    activations: Tuple[Tuple[Activation, ...], ...]
    clip: Optional[float]
    input_forget: bool
    linear_before_reset: bool
    has_bias: bool
    has_peepholes: bool
    config: str = field(default="", repr=False, compare=False)


def _shape(a) -> str:
    return "[" + ", ".join(str(int(d)) for d in a.shape) + "]"


def _list(dims) -> str:
    return "[" + ", ".join(str(d) for d in dims) + "]"


def _require_array(op: str, name: str, a) -> None:
    if not isinstance(a, np.ndarray):
        raise ValueError(f"{op}: {name} must be a numpy array, got {type(a).__name__}")


def _require_shape(op: str, name: str, a, expected, meaning: str) -> None:
    if tuple(a.shape) != tuple(expected):
        raise ValueError(
            f"{op}: {name} must have shape {_list(expected)} ({meaning}), got {_shape(a)}"
        )


#: The most bytes one storage binding can span on any Vulkan device (maxStorageBufferRange is a
#: 32-bit limit). An array the layer binds whole (a weight, X, a state) beyond it is refused here,
#: before anything copies it: a zero-stride view (np.broadcast_to) of a huge shape costs nothing
#: to pass but would be materialised by the contiguous copy before the device's own, lower,
#: limit is checked (scripts/ci/fuzz_python.py).
MAX_BINDING_BYTES = 2**32 - 1


def _require_bindable(op: str, name: str, a) -> None:
    nbytes = int(a.size) * int(a.dtype.itemsize)
    if nbytes > MAX_BINDING_BYTES:
        raise UnsupportedLayerError(
            f"{op}: {name} of shape {_shape(a)} is {nbytes} bytes, more than any Vulkan device binds "
            f"in one storage buffer ({MAX_BINDING_BYTES} bytes: maxStorageBufferRange is a 32-bit limit)")


def _require_rank(op: str, name: str, a, rank: int, meaning: str) -> None:
    if a.ndim != rank:
        raise ValueError(
            f"{op}: {name} must have rank {rank} [{meaning}], got shape {_shape(a)}"
        )


def _dtype_text(dtype) -> str:
    """A dtype's name, with its byte order when that is not the machine's: a big-endian
    float32 array (``>f4``) is not a float32 array here, and "got float32" would not say why."""
    dtype = np.dtype(dtype)
    if dtype.isnative:
        return dtype.name
    order = "big" if dtype.byteorder == ">" else "little"
    return f"{order}-endian {dtype.name} ({dtype.str})"


def _dtype_names(dtypes) -> str:
    names = [np.dtype(d).name for d in dtypes]
    return names[0] if len(names) == 1 else ", ".join(names[:-1]) + " or " + names[-1]


def _weights_dtype(op: str, allowed_dtypes, weights: dict) -> np.dtype:
    """The layer's dtype (W's, one of ``allowed_dtypes``) once every weight given is a numpy
    array of it that a device could bind whole: the Python door's own checks (the config it
    writes names one dtype, and nothing may be copied before it is known to fit)."""
    allowed = tuple(np.dtype(d) for d in allowed_dtypes)
    W = weights["W"]
    _require_array(op, "W", W)
    if W.dtype not in allowed:
        raise ValueError(f"{op}: W must have dtype {_dtype_names(allowed)}, got {_dtype_text(W.dtype)}")
    for name, a in weights.items():
        if a is None and name != "R":
            continue
        _require_array(op, name, a)
        if a.dtype != W.dtype:
            raise ValueError(f"{op}: {name} must have the dtype of W ({W.dtype.name}), got {_dtype_text(a.dtype)}")
        _require_bindable(op, name, a)
    return W.dtype


def _json_value(op: str, name: str, value):
    """A keyword argument as the config's JSON holds it: numpy scalars and arrays as Python's
    own, bytes decoded; NaN and infinities, which JSON cannot hold, refused naming the argument
    (the core's decoder checks every value the JSON holds)."""
    if isinstance(value, np.ndarray):
        value = value.tolist()
    if isinstance(value, np.generic):
        value = value.item()
    if isinstance(value, bytes):
        value = value.decode("utf-8", errors="replace")
    if isinstance(value, (list, tuple)):
        return [_json_value(op, f"{name}[{i}]", v) for i, v in enumerate(value)]
    if isinstance(value, float) and not math.isfinite(value):
        raise ValueError(f"{op}: {name} must be a finite number, got {value!r}")
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    raise ValueError(f"{op}: {name} must be a number, a string or a list of them, got {value!r}")


def _attrs(op: str, attrs: dict) -> dict:
    """The config's ``attrs`` from the keyword arguments (Python's conversions only: a single
    activation name as a list of one, the flags' bools as 0 / 1, clip +inf as no clip, which
    it is; every rule on the values is the core's)."""
    names = attrs["activations"]
    if names is not None and not isinstance(names, (str, bytes)):
        try:
            names = list(names)
        except TypeError:
            raise ValueError(f"{op}: activations must be a list of names, got {names!r}") from None
    attrs = dict(attrs, activations=[names] if isinstance(names, (str, bytes)) else names)
    for flag in ("input_forget", "linear_before_reset"):
        if isinstance(attrs[flag], (bool, np.bool_)):
            attrs[flag] = int(attrs[flag])
    if isinstance(attrs["clip"], (float, np.floating)) and attrs["clip"] == math.inf:
        attrs["clip"] = None
    return {k: _json_value(op, k, v) for k, v in attrs.items()}


def _native_check(op: str, config: str, weights: dict, limit: Optional[Tuple[str, int]] = None) -> dict:
    """The core's check (``_vk.check_layer``; with ``limit``, (device name,
    maxStorageBufferRange), each weight's storage binding too); its refusals as this package's
    errors."""
    from ortops.device import _native

    vk = _native()
    shapes = {k: tuple(int(d) for d in a.shape) for k, a in weights.items() if a is not None}
    device, storage_range = limit if limit is not None else (None, None)
    try:
        return vk.check_layer(config, shapes, device, storage_range)
    except vk.UnsupportedLayerError as e:
        raise UnsupportedLayerError(str(e)) from None
    except vk.InputError as e:
        raise ValueError(str(e)) from None


def check_layer(
    op: str,
    W,
    R,
    B=None,
    P=None,
    *,
    hidden_size: Optional[int] = None,
    direction: str = "forward",
    layout: int = 0,
    activations: Optional[Sequence[str]] = None,
    activation_alpha: Optional[Sequence[float]] = None,
    activation_beta: Optional[Sequence[float]] = None,
    clip: Optional[float] = None,
    input_forget: int = 0,
    linear_before_reset: int = 0,
    allowed_dtypes=LAYER_DTYPES,
) -> LayerSpec:
    """Check the weights and attributes of one LSTM/GRU/RNN layer.

    W [num_directions, gates*hidden_size, input_size], R [num_directions,
    gates*hidden_size, hidden_size], B [num_directions, 2*gates*hidden_size]
    and P [num_directions, 3*hidden_size] (LSTM only) must share one dtype
    from ``allowed_dtypes``; gates is 4 (LSTM), 3 (GRU) or 1 (RNN). ``None``
    means an optional input is absent. Returns the :class:`LayerSpec`; raises ValueError
    naming the operator and the argument otherwise.
    """
    c = cell(op)
    weights = {"W": W, "R": R, "B": B, "P": P}
    dtype = _weights_dtype(op, allowed_dtypes, weights)
    attrs = _attrs(op, dict(hidden_size=hidden_size, direction=direction, layout=layout,
                            activations=activations, activation_alpha=activation_alpha,
                            activation_beta=activation_beta, clip=clip, input_forget=input_forget,
                            linear_before_reset=linear_before_reset))
    # The checks do not depend on the precision: a float64 layer (the reference's) as float32.
    config = encode({
        "v": CONFIG_VERSION, "node": "", "op": op, "dtype": np.dtype(dtype if dtype == np.float16 else np.float32).name,
        "attrs": attrs, "absent": [n for n in ("B", "P") if n in c.inputs and weights[n] is None],
        "outputs": list(c.outputs), "device": None, "mode": DEFAULT_MODE,
    })
    checked = _native_check(op, config, weights)
    return LayerSpec(
        op=op, dtype=dtype, direction=checked["direction"], num_directions=checked["num_directions"],
        hidden_size=checked["hidden_size"], input_size=checked["input_size"], gates=c.gates,
        layout=attrs["layout"],
        activations=tuple(tuple(Activation(*a) for a in d) for d in checked["activations"]),
        clip=None if clip is None else float(clip), input_forget=bool(attrs["input_forget"]),
        linear_before_reset=bool(attrs["linear_before_reset"]), has_bias=B is not None,
        has_peepholes=P is not None, config=config)


def check_bindings(spec: LayerSpec, weights: dict, *, mode: str, device: str, storage_range: int) -> None:
    """Each weight of a checked layer within a device's storage-binding limit, as the core's
    upload checks it (the core's one message; in mode exact R is bound as float32 words):
    UnsupportedLayerError otherwise. ``weights`` maps W, R, B, P to arrays (or None)."""
    config = encode(dict(json.loads(spec.config), mode=mode))
    _native_check(spec.op, config, weights, (device, storage_range))


def layer_config(spec: LayerSpec, *, mode: str, device: Optional[str]) -> str:
    """The config the native layer is built from: the one the core checked, on this device
    (its UUID, or None) in this mode."""
    return encode(dict(json.loads(spec.config), mode=mode, device=device))


def _state_shape(spec: LayerSpec, batch: int) -> Tuple[int, int, int]:
    if spec.layout == 0:
        return (spec.num_directions, batch, spec.hidden_size)
    return (batch, spec.num_directions, spec.hidden_size)


def _state_text(spec: LayerSpec) -> str:
    if spec.layout == 0:
        return "num_directions, batch_size, hidden_size"
    return "batch_size, num_directions, hidden_size (layout 1)"


def check_inputs(
    spec: LayerSpec, X, sequence_lens=None, initial_h=None, initial_c=None
) -> Tuple[int, int]:
    """Check the per-run inputs of a layer described by ``spec``.

    X is [seq_length, batch_size, input_size] (layout 0) or [batch_size,
    seq_length, input_size] (layout 1) in the dtype of the weights;
    sequence_lens is int32 [batch_size] with every value in [0, seq_length];
    initial_h and initial_c (LSTM only) are [num_directions, batch_size,
    hidden_size] (layout 0) or [batch_size, num_directions, hidden_size]
    (layout 1). ``None`` means absent. seq_length = 0 and batch_size = 0 are
    valid. Returns ``(seq_length, batch_size)``; raises ValueError naming the
    operator and the argument otherwise.
    """
    op = spec.op
    _require_array(op, "X", X)
    if X.dtype != spec.dtype:
        raise ValueError(f"{op}: X must have the dtype of W ({spec.dtype.name}), got {_dtype_text(X.dtype)}")
    _require_bindable(op, "X", X)
    if spec.layout == 0:
        _require_rank(op, "X", X, 3, "seq_length, batch_size, input_size")
        seq, batch = int(X.shape[0]), int(X.shape[1])
        expected = (seq, batch, spec.input_size)
        meaning = "seq_length, batch_size, input_size from W"
    else:
        _require_rank(op, "X", X, 3, "batch_size, seq_length, input_size (layout 1)")
        batch, seq = int(X.shape[0]), int(X.shape[1])
        expected = (batch, seq, spec.input_size)
        meaning = "batch_size, seq_length, input_size from W; layout 1"
    _require_shape(op, "X", X, expected, meaning)

    if sequence_lens is not None:
        _require_array(op, "sequence_lens", sequence_lens)
        if sequence_lens.dtype != np.int32:
            raise ValueError(
                f"{op}: sequence_lens must have dtype int32, got {_dtype_text(sequence_lens.dtype)}"
            )
        _require_shape(op, "sequence_lens", sequence_lens, (batch,), "batch_size")
        bad = np.flatnonzero((sequence_lens < 0) | (sequence_lens > seq))
        if bad.size:
            b = int(bad[0])
            raise ValueError(
                f"{op}: sequence_lens[{b}] = {int(sequence_lens[b])} is outside [0, {seq}] "
                f"(batch row {b}; {bad.size} row(s) out of range)"
            )

    if initial_c is not None and "initial_c" not in cell(op).inputs:
        raise ValueError(
            f"{op}: initial_c is only defined for {_having('initial_c')}, got {type(initial_c).__name__}"
        )
    state_shape = _state_shape(spec, batch)
    for name, a in (("initial_h", initial_h), ("initial_c", initial_c)):
        if a is None:
            continue
        _require_array(op, name, a)
        if a.dtype != spec.dtype:
            raise ValueError(
                f"{op}: {name} must have the dtype of W ({spec.dtype.name}), got {_dtype_text(a.dtype)}"
            )
        _require_shape(op, name, a, state_shape, _state_text(spec))
        _require_bindable(op, name, a)
    return seq, batch


def check_out(spec: LayerSpec, out, shapes: dict) -> None:
    """``out`` of a layer call: a mapping of output names (of ``shapes``) to C-contiguous,
    writeable numpy arrays of that output's shape and the weights' dtype."""
    op = spec.op
    if not hasattr(out, "items"):
        raise ValueError(f"{op}: out must be a mapping of output names to arrays, got {type(out).__name__}")
    for name, a in out.items():
        if name not in shapes:
            raise ValueError(f"{op}: out may name {', '.join(shapes)}, got {name!r}")
        arg = f"out[{name!r}]"
        _require_array(op, arg, a)
        if a.dtype != spec.dtype:
            raise ValueError(f"{op}: {arg} must have the dtype of W ({spec.dtype.name}), got {_dtype_text(a.dtype)}")
        _require_shape(op, arg, a, shapes[name], f"the shape of {name}")
        if not (a.flags.c_contiguous and a.flags.writeable):
            got = "a read-only array" if not a.flags.writeable else "a non-contiguous array"
            raise ValueError(f"{op}: {arg} must be a C-contiguous, writeable array, got {got}")


def output_shapes(spec: LayerSpec, seq: int, batch: int) -> dict:
    """Shapes of the outputs: ``{"Y", "Y_h"}`` plus ``"Y_c"`` for LSTM.

    Layout 0: Y [seq, num_directions, batch, hidden], Y_h/Y_c [num_directions,
    batch, hidden]. Layout 1: Y [batch, seq, num_directions, hidden], Y_h/Y_c
    [batch, num_directions, hidden].
    """
    d, H = spec.num_directions, spec.hidden_size
    if spec.layout == 0:
        shapes = {"Y": (seq, d, batch, H), "Y_h": (d, batch, H)}
    else:
        shapes = {"Y": (batch, seq, d, H), "Y_h": (batch, d, H)}
    if "Y_c" in CELLS[spec.op].outputs:
        shapes["Y_c"] = shapes["Y_h"]
    return shapes
