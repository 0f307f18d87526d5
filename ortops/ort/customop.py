"""The ONNX Runtime custom ops ``ortops::LSTM``, ``ortops::GRU`` and ``ortops::RNN``: what the
rewrite writes and where the library that runs them is.

The ops live in the native custom-op library ``libortops_ort.so`` (``src/ort/``, shipped in
the wheel; :func:`library_path`), which any ONNX Runtime loads with
``register_custom_ops_library`` — from Python, C, C++, C#, Java or Triton — and which runs
each node through the native core with no Python on the run path (docs/onnxruntime.md).

Contract of a custom node (``ortops.ort.rewrite`` writes it; ``src/ort/kernel.cpp`` reads it):

* domain ``ortops``, op type ``LSTM``, ``GRU`` or ``RNN`` for float32 and ``LSTM_f16``,
  ``GRU_f16``, ``RNN_f16`` for float16 (float16 tensors are taken as they are);
* one string attribute ``config``, JSON (``ortops.ort.nodeconfig``; version 4);
* inputs: ONNX's inputs of the op in ONNX's order, an absent optional one an empty name (and
  listed in ``config["absent"]``); the weights are constant initializers wherever the model's
  weights are constant (the kernel uploads them once when ONNX Runtime creates it), else
  values fed at run time (the kernel re-uploads only when their bits change);
* outputs: ONNX's outputs of the op; those not in ``config["outputs"]`` have an empty name
  and are not computed.

Errors: a failing node returns an ONNX Runtime status whose message reads
``ortops: <op> node '<name>': <what is wrong>`` (``... device lost ...`` for a lost device);
:class:`ortops.InferenceSession` raises it as :class:`NodeRunError` (and, for a lost device,
as an ``ortops.DeviceLostError`` too); plain onnxruntime raises its own exception with that
message. Nothing aborts the process.
"""

from __future__ import annotations

import os
import re
from typing import Mapping

from ortops.cells import CELLS
from ortops.ort.nodeconfig import ATTRIBUTE_DEFAULTS, DTYPES, NodeAttrs, NodeConfig, encode
from ortops.ort.nodeconfig import CONFIG_VERSION  # noqa: F401 - part of the custom op's contract
from ortops.validation import OUTPUTS  # noqa: F401 - the ops' outputs, for the rewrite and tools

DOMAIN = "ortops"
LIBRARY = "libortops_ort.so"

#: Inputs of the custom op in order, per standard op type (ONNX's, from ortops.cells).
INPUTS = {name: c.inputs for name, c in CELLS.items()}
#: The weights of any cell (W R B P): constant inputs are uploaded once per kernel.
WEIGHTS = tuple(dict.fromkeys(w for c in CELLS.values() for w in c.weights))


def library_path() -> str:
    """The custom-op library's path (``ortops/libortops_ort.so``), for
    ``SessionOptions.register_custom_ops_library`` here or in any other ONNX Runtime."""
    path = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), LIBRARY)
    if not os.path.isfile(path):
        raise RuntimeError(f"ortops: the custom-op library {path} is not installed; reinstall "
                           "ortops (pip install .) so that CMake builds it")
    return path


class NodeRunError(ValueError):
    """A recurrent node failed at run time (bad input or device error).

    The message names the node and its operator; ``node`` holds the node's name.
    """

    def __init__(self, node: str, op: str, message: str):
        super().__init__(f"{op} node {node!r}: {message}")
        self.node = node
        self.op = op


_lost_class = None


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


#: A node's status message: the custom-op kernel's and the EP's (``ortops: <OP> node '<name>':
#: <what>``; the EP names a com.microsoft DynamicQuantizeLSTM by its own op type).
_STATUS = re.compile(r"ortops: (LSTM|GRU|RNN|DynamicQuantizeLSTM) node '(.*?)': (.*)", re.DOTALL)


def node_error(e: BaseException) -> NodeRunError | None:
    """The :class:`NodeRunError` an ONNX Runtime exception reports (the library's status
    message inside ORT's), or None when the exception is not an ortops node's."""
    m = _STATUS.search(str(e))
    if m is None:
        return None
    op, node, text = m.group(1), m.group(2), m.group(3).strip()
    cell = "LSTM" if op == "DynamicQuantizeLSTM" else op
    if text.startswith(f"{cell}: "):   # the core's messages start with the cell's operator
        text = text[len(cell) + 2:]
    cls = _node_device_lost_class() if "device lost" in text.lower() or "device was lost" in text.lower() \
        else NodeRunError
    return cls(node, op, text)


# -- configuration -----------------------------------------------------------
# The config attribute is typed and encoded in ortops.ort.nodeconfig, decoded natively.

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


def _weights_checked(op: str, weights: dict, cfg_attrs: NodeAttrs | Mapping, device=None, mode=None):
    """What ``check_node`` did (deprecated): the weights and attributes checked by the core as
    ``RecurrentLayer``'s are, the mode on the device, each weight within its storage binding;
    returns the ``ortops.Device``. The placement of a whole node is the core's node checker's
    (``ortops.ort.session.placement``)."""
    import numpy as np

    from ortops import validation
    from ortops.device import require_mode, select
    from ortops.modes import check_mode

    names = CELLS[op].weights
    tensors = {name: weights.get(name) if name in CELLS[op].inputs else None for name in ("W", "R", "B", "P")}
    spec = validation.check_layer(op, tensors["W"], tensors["R"], tensors["B"], tensors["P"],
                                  allowed_dtypes=(np.float32, np.float16), **layer_kwargs(cfg_attrs, op))
    mode = check_mode(mode, op)
    dev = select(device)
    require_mode(dev, mode)
    validation.check_bindings(spec, {n: tensors[n] for n in names}, mode=mode, device=dev.name,
                              storage_range=dev.max_storage_buffer_range)
    return dev


from ortops._deprecated import module_getattr  # noqa: E402 - the deprecated names, after what they use

__getattr__ = module_getattr(__name__, {
    "check_node": ("ortops.ort.session.placement(model) (the core's node checker, the execution provider's)",
                   lambda: _weights_checked),
})
