"""ONNX Runtime custom ops ``ortops::LSTM``, ``ortops::GRU`` and ``ortops::RNN``.

The ops are Python ops of onnxruntime-extensions: ORT calls back into this
module, which runs the layer on the Vulkan device through
:class:`ortops.RecurrentLayer`. ``ortops.ort.rewrite`` produces the nodes; this
module only knows how to execute them.

Contract of a custom node (see ``rewrite.py`` for the producer):

* One string attribute ``config`` holding JSON (:func:`encode_config`). It
  carries the whole standard-node configuration, because extensions cannot
  declare list attributes and passes float attributes through a
  6-significant-digit string. Floats are written by ``repr`` of the float64
  value of the ONNX float32 attribute, so they round-trip exactly.
* Inputs, always all of them (extensions has no optional inputs):
  ``X, W, R, B, sequence_lens, initial_h`` and for LSTM also ``initial_c, P``,
  then the run token (int64 ``[1]``, see "Errors" below).
  An absent optional input is fed the shared empty initializer and listed in
  ``config["absent"]``; the op goes by that list, never by the shape (a
  zero-batch ``initial_h`` is a legitimate empty tensor). With
  ``config["weights"] == "registry"`` the weight inputs are empty too and the
  prebuilt layer is looked up by ``config["key"]`` in :data:`REGISTRY`.
* Outputs, always all of them: ``Y, Y_h`` (and ``Y_c`` for LSTM). Outputs not
  in ``config["outputs"]`` are not computed and come back as empty arrays.
  The output named by ``config["gate"]`` comes back with an extra leading
  axis of size 1, and the rewrite feeds it through the check node
  ``Squeeze(raw, axes=[0])``.

Errors. An exception raised inside a Python op terminates the whole process
(the extensions kernel is ``noexcept``), so the hook below never raises. On
an error it returns a gated output of shape ``[0]``: the check ``Squeeze``
then fails (dimension 0 is 0, not 1), ORT reports an ordinary run error, and
the process and the device stay usable. The error itself is recorded under
the run's token: :class:`ortops.InferenceSession` feeds a fresh token to
every run (a graph input the rewrite adds) and re-raises the errors recorded
under it, so a run raises its own error and only its own, whichever thread
ORT ran the node on (ORT's parallel executor runs nodes on pool threads, so
a thread-local would not do). A converted model feeds token 0: its errors go
to the ``ortops`` logger, the only way a plain onnxruntime user learns why.

Why a Squeeze: on success it costs nothing (ORT's Squeeze aliases its input;
18-19 us against the Reshape's 17-18 us in an ORT profile with a 2 MiB Y on
the 2-core development machine). The check was ``Reshape(raw, status)`` with
a shape output of the node, until ORT's fusion of Reshape/Squeeze/Unsqueeze
chains that end in a static shape (the Squeeze after an LSTM in PyTorch's
exports) failed session creation on it in ORT 1.21 to 1.30 and dropped the
shape edge (the check) in 1.31 and later. The Squeeze's axes are an
attribute or an initializer, no other node's output, so nothing is dropped;
if ORT fuses it into a Reshape to the static shape, a failed node's empty
output still fails that Reshape (unless the static shape has no element).

Float16: extensions aborts the process when a float16 tensor is an *input*
of a Python op (outputs are fine). Float16 nodes therefore get float32
inputs through ``Cast`` (exact: every half value is a float32 value) and
cast back here before the layer sees them; outputs are float16.
"""

from __future__ import annotations

import logging
import sys
from typing import Mapping

import numpy as np

from ortops.cells import CELLS
from ortops.ort.nodeconfig import ATTRIBUTE_DEFAULTS, DTYPES, NodeAttrs, NodeConfig, encode
from ortops.ort.nodeconfig import CONFIG_VERSION  # noqa: F401 - part of the custom op's contract
from ortops.ort import outarrays
from ortops.ort.registry import WEIGHTS, Registry
from ortops.validation import OUTPUTS, output_shapes

DOMAIN = "ortops"

log = logging.getLogger("ortops")

#: Inputs of the custom op in order, per standard op type (ONNX's, from ortops.cells).
INPUTS = {name: c.inputs for name, c in CELLS.items()}
# Outputs of the custom op: OUTPUTS (ortops.validation).
# WEIGHTS (ortops.ort.registry): the weights of any cell (W R B P), uploaded once per layer.
#: The last input of every custom node: the run token (module docstring, "Errors").
RUN_INPUT = "ortops_run"


#: Prebuilt layers by key, devices, the converted-model cache and the errors of each run
#: (ortops.ort.registry). ``ortops.InferenceSession`` adds its layers when created and removes
#: them when closed or collected.
REGISTRY = Registry()


class NodeRunError(ValueError):
    """A recurrent node failed at run time (bad input or device error).

    The message names the node and its operator; ``node`` holds the node's
    name.
    """

    def __init__(self, node: str, op: str, message: str):
        super().__init__(f"{op} node {node!r}: {message}")
        self.node = node
        self.op = op


_lost_class = None


def _is_device_lost(e: BaseException) -> bool:
    # Only a layer's run raises DeviceLostError, so the native module is loaded by then; never
    # import here (this runs inside the hook's error path, which must not raise).
    vk = sys.modules.get("ortops._vk")
    return vk is not None and isinstance(e, vk.DeviceLostError)


def _node_device_lost_class():
    """NodeRunError that is also an ``ortops.DeviceLostError`` (so either ``except`` catches
    a run on a lost device); made on first need, since it derives from the native class."""
    global _lost_class
    if _lost_class is None:
        from ortops import _vk

        _lost_class = type("NodeDeviceLostError", (NodeRunError, _vk.DeviceLostError),
                           {"__module__": __name__,
                            "__doc__": "A recurrent node's Vulkan device was lost; create a new session."})
    return _lost_class


# -- configuration -----------------------------------------------------------
# The config attribute is typed, encoded and decoded in ortops.ort.nodeconfig.

#: Serialise a node configuration (a NodeConfig or its dict form) to the attribute string.
encode_config = encode
#: Parse (and cache) a ``config`` attribute into a NodeConfig; ValueError if malformed.
decode_config = NodeConfig.from_json


def op_type(op: str, dtype: str) -> str:
    """Custom op type (without domain) for a standard op and config dtype."""
    return op + DTYPES[dtype][0]


def layer_kwargs(cfg_attrs: NodeAttrs | Mapping, op: str) -> dict:
    """Keyword arguments of ``RecurrentLayer`` for a config's ``attrs``.

    Only the attributes the operator has are passed, so a kernel that refuses
    e.g. ``input_forget`` on a GRU is never asked.
    """
    if isinstance(cfg_attrs, NodeAttrs):
        cfg_attrs = cfg_attrs.to_dict()
    return {name: cfg_attrs.get(name, ATTRIBUTE_DEFAULTS.get(name)) for name in sorted(CELLS[op].attributes)}


def build_layer(op: str, weights: dict, cfg_attrs: NodeAttrs | Mapping, device=None, mode=None):
    """Construct (and upload) a ``RecurrentLayer`` in ``mode`` (ortops.modes); weights maps
    W/R/B/P to arrays or None."""
    from ortops.layer import RecurrentLayer

    return RecurrentLayer(
        op,
        weights["W"],
        weights["R"],
        weights.get("B"),
        weights.get("P") if "P" in CELLS[op].inputs else None,
        device=device,
        mode=mode,
        **layer_kwargs(cfg_attrs, op),
    )


# -- errors ------------------------------------------------------------------------


def _record_error(token: int, err: BaseException) -> None:
    if token:
        REGISTRY.record_error(token, err)
    else:
        # A plain onnxruntime session only sees the check node fail; this is where its user
        # learns why (logging's last-resort handler prints it when nothing is configured).
        log.error("ortops: %s", err)


# -- execution -----------------------------------------------------------------


def run_node(cfg: NodeConfig, feed: list) -> tuple:
    """Run one custom node: returns its outputs (the gated one with its leading check axis)."""
    op = cfg.op
    names = INPUTS[op]
    if len(feed) != len(names) + 1:
        raise ValueError(f"expected {len(names) + 1} inputs ({', '.join(names)}, {RUN_INPUT}), "
                         f"got {len(feed)}")
    feed = feed[:len(names)]      # the run token, last, is the hook's
    absent = set(cfg.absent)
    _, _, out_dt = DTYPES[cfg.dtype]
    vals = {}
    for name, arr in zip(names, feed):
        if name in absent or (name in WEIGHTS and cfg.weights == "registry"):
            vals[name] = None
        elif name == "sequence_lens":
            vals[name] = arr
        else:
            # float16 arrives widened to float32 (exact); narrowing is exact too.
            vals[name] = arr if arr.dtype == out_dt else _narrowed(arr, out_dt)
    # Shapes and sequence_lens (range, naming the batch row) are checked by the layer, with
    # ortops.validation like every other path; errors are wrapped with the node's name.
    X = vals["X"]
    lens = vals["sequence_lens"]

    if cfg.weights == "registry":
        layer = REGISTRY.prebuilt(cfg.key)
        if layer is None:
            raise ValueError(
                f"no prebuilt layer for key {cfg.key!r}: this node was rewritten for an "
                "ortops.InferenceSession that is closed; use ortops.convert for standalone models"
            )
    else:
        if vals["W"] is None or vals["R"] is None:
            raise ValueError("W and R are required inputs")
        # build_layer looked up here, at call time (tests wrap it)
        layer = REGISTRY.layer_for(cfg, {n: vals.get(n) for n in WEIGHTS}, build_layer)

    wanted = cfg.outputs
    kwargs = {"sequence_lens": lens, "initial_h": vals["initial_h"], "outputs": wanted}
    if "initial_c" in CELLS[op].inputs:
        kwargs["initial_c"] = vals["initial_c"]
    out = _reused_outputs(layer, X, wanted)
    if out:
        kwargs["out"] = out
    result = layer(X, **kwargs)

    # No copy here: the layer's arrays are C-contiguous in out_dt already, and the gated one
    # gets its axis as a view; extensions copies each into ORT's tensor (docs/onnxruntime.md,
    # "Copies").
    outs = []
    for name, value in zip(OUTPUTS[op], result):
        if name in wanted:
            if value is None:
                raise RuntimeError(f"the layer returned no {name} although it was requested")
            outs.append(np.ascontiguousarray(value, dtype=out_dt))
        else:
            outs.append(np.zeros((0,), out_dt))
    gate = OUTPUTS[op].index(cfg.gate)
    outs[gate] = outs[gate][np.newaxis]  # the check Squeeze(axes=[0]) takes it away again
    return tuple(outs)


def _narrowed(arr: np.ndarray, dtype) -> np.ndarray:
    """``arr`` in ``dtype``: float32 to float16 natively on the copy threads (numpy's astype
    takes 17 ms for a 26 MB input where this takes under 1 ms, 2-core development machine;
    the same bits: round to nearest even), anything else by numpy."""
    if arr.dtype == np.float32 and np.dtype(dtype) == np.float16:
        from ortops import _vk

        out = np.empty(arr.shape, np.float16)
        _vk.narrow_to_half(out, np.ascontiguousarray(arr))
        return out
    return arr.astype(dtype)


def _reused_outputs(layer, X, wanted) -> dict | None:
    """Inside the hook, the calling thread's reused output arrays for this run (ortops.ort.
    outarrays: extensions copies them out before the next run); None elsewhere, so that a
    direct caller of run_node keeps fresh arrays."""
    from ortops.layer import RecurrentLayer

    if not (outarrays.active() and isinstance(layer, RecurrentLayer)
            and isinstance(X, np.ndarray) and X.ndim == 3):
        return None   # a malformed X is the layer's to report
    s = layer.spec
    seq, batch = (X.shape[0], X.shape[1]) if s.layout == 0 else (X.shape[1], X.shape[0])
    return outarrays.arrays(wanted, output_shapes(s, seq, batch), s.dtype)


def _as_node_error(e: BaseException, node: str, op: str) -> NodeRunError:
    if isinstance(e, NodeRunError):
        return e
    text = str(e)
    if isinstance(e, ValueError):
        # validation's messages start with the operator, which ours names already
        text = text[len(op) + 2:] if text.startswith(f"{op}: ") else text
    else:
        text = f"{type(e).__name__}: {text}"
    cls = _node_device_lost_class() if _is_device_lost(e) else NodeRunError
    err = cls(node, op, text)
    err.__cause__ = e
    return err


def _failure_outputs(op: str, out_dt) -> tuple:
    # Gated output of shape [0]: the check Squeeze(axes=[0]) fails (dimension 0 is not 1).
    return tuple(np.zeros((0,), out_dt) for _ in OUTPUTS[op])


# -- registration with onnxruntime-extensions -------------------------------------

_OPS: dict[int, tuple[str, str]] = {}  # Opdef id -> (op, dtype)
_registered = False
_default_hook = None


def _hook(k_id, feed, attributes):
    """Replacement for extensions' invocation hook.

    Returns numpy arrays (not lists: ~40x faster, and float16 works). Never
    raises for ortops ops (an exception here aborts the process, see the
    module docstring); other Python ops keep the default behaviour.
    """
    spec = _OPS.get(k_id)
    if spec is None:
        return _default_hook(k_id, feed, attributes)
    op, dtype = spec
    out_dt = DTYPES[dtype][2]
    node, token = "?", 0
    try:
        if feed and np.asarray(feed[-1]).size:
            token = int(np.asarray(feed[-1]).reshape(-1)[0])
        cfg = decode_config(attributes.get("config", ""))
        node = cfg.node
        with outarrays.reused():
            outs = run_node(cfg, feed)
    except BaseException as e:  # noqa: BLE001 - must not propagate into C++
        err = _as_node_error(e, node, op)
        _record_error(token, err)
        outs = _failure_outputs(op, out_dt)
    res = [k_id]
    for arr in outs:
        res.append(arr.shape)
        res.append(arr.reshape(-1))
    return tuple(res)


#: The private names of onnxruntime_extensions the hook relies on; pyproject.toml admits the
#: versions CI tests them with (scripts/test_extensions.sh: the oldest and the newest).
HOOK_INTERNALS = (("_ocos", "_on_pyop_invocation"), ("PyCustomOpDef", "install_hooker"))


def _check_hook_internals(ocos, opdef) -> None:
    owners = {"_ocos": ocos, "PyCustomOpDef": opdef}
    missing = [f"{o}.{n}" for o, n in HOOK_INTERNALS if not hasattr(owners[o], n)]
    if missing:
        from importlib import metadata

        from ortops._onnxruntime import requirement

        raise ImportError(
            f"ortops: onnxruntime-extensions {metadata.version('onnxruntime-extensions')} lacks "
            f"{', '.join(missing)}, which ortops' custom-op hook uses; install a version ortops "
            f"admits: pip install '{requirement('onnxruntime-extensions')}'")


def register_ops() -> None:
    """Define the ortops custom ops in onnxruntime-extensions and install the
    hook (idempotent). Must run before a session using them is created."""
    global _registered, _default_hook
    if _registered:
        return
    from onnxruntime_extensions import PyCustomOpDef, onnx_op
    from onnxruntime_extensions import _ocos

    dt = {"float32": PyCustomOpDef.dt_float, "float16": PyCustomOpDef.dt_float16,
          "float64": PyCustomOpDef.dt_double}
    for op, inputs in INPUTS.items():
        for dtype, (suffix, in_np, out_np) in DTYPES.items():
            in_t = PyCustomOpDef.dt_double if in_np is np.float64 else PyCustomOpDef.dt_float
            types = [PyCustomOpDef.dt_int32 if n == "sequence_lens" else in_t for n in inputs]
            types.append(PyCustomOpDef.dt_int64)   # RUN_INPUT
            outs = [dt[dtype]] * len(OUTPUTS[op])

            def body(*args, **kw):  # never called: _hook dispatches ortops ops itself
                raise RuntimeError("ortops op called outside its hook")

            opdef = onnx_op(op_type=f"{DOMAIN}::{op}{suffix}", inputs=types, outputs=outs,
                            attrs={"config": PyCustomOpDef.dt_string})(body)
            _OPS[id(opdef)] = (op, dtype)
    _check_hook_internals(_ocos, PyCustomOpDef)
    _default_hook = _ocos._on_pyop_invocation
    PyCustomOpDef.install_hooker(_hook)
    _registered = True
