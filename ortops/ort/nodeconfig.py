"""The ``config`` attribute of an ortops custom node: typed and encoded here, decoded by the
native core's strict decoder (``src/core/config/nodeconfig.cpp``, the one decoder both doors use).

``ortops.ort.rewrite`` makes a :class:`NodeConfig` per custom node and writes it with
:meth:`NodeConfig.to_json`; the custom-op library (``src/ort/``) decodes it when ONNX Runtime
creates the node's kernel, and :meth:`NodeConfig.from_json` reads it back through the same
decoder. The format (version 4, ``src/core/config/nodeconfig.hpp`` has the contract): one JSON object
with exactly the keys ``v``, ``node``, ``op``, ``dtype``, ``attrs`` (exactly the nine attribute
keys, ``null`` where absent), ``absent``, ``outputs``, ``device`` (a Vulkan device UUID or
``null``) and ``mode``; written with sorted keys, no spaces, floats by ``repr`` (the float64
value of the float32 attribute, so it round-trips exactly). A model is untrusted input: the
decoder refuses anything else (docs/security.md).
"""

from __future__ import annotations

import dataclasses
import json
import threading
from dataclasses import dataclass
from typing import Mapping

import numpy as np

from ortops import modes, vocabulary

CONFIG_VERSION = 4   # 2: run token and Squeeze check; 3: mode; 4: the native library's node

#: Config dtype (the core's names, ortops.vocabulary.DTYPES) -> (custom op type suffix, numpy
#: dtype of the op's tensors). The float16 ops are named with "_f16" (src/ort/op.cpp).
DTYPES = {name: ("_f16" if np.dtype(name) == np.float16 else "", np.dtype(name).type) for name in vocabulary.DTYPES}
DTYPE_NAMES = tuple(DTYPES)

# ONNX's defaults of the attributes that have one and that a config may lack (the others
# default to None: absent).
ATTRIBUTE_DEFAULTS = {"direction": "forward", "layout": 0, "input_forget": 0, "linear_before_reset": 0}


def _tuple(v):
    return None if v is None else tuple(v)


@dataclass(frozen=True)
class NodeAttrs:
    """The standard node's attributes, normalised (None: absent); lists are tuples."""

    hidden_size: int | None = None
    direction: str = "forward"
    layout: int = 0
    activations: tuple | None = None
    activation_alpha: tuple | None = None
    activation_beta: tuple | None = None
    clip: float | None = None
    input_forget: int = 0
    linear_before_reset: int = 0

    def to_dict(self) -> dict:
        return {f.name: (list(v) if isinstance(v, tuple) else v)
                for f in dataclasses.fields(self) for v in [getattr(self, f.name)]}

    @classmethod
    def from_dict(cls, d: Mapping) -> "NodeAttrs":
        """From the decoder's dict (every key present, already checked)."""
        kw = {f.name: (_tuple(d[f.name]) if f.name.startswith("activation") else d[f.name])
              for f in dataclasses.fields(cls) if f.name in d}
        return cls(**kw)


@dataclass(frozen=True)
class NodeConfig:
    """One custom node's configuration (the ``config`` attribute)."""

    node: str           # the node's name (in error messages)
    op: str             # LSTM, GRU or RNN
    dtype: str          # one of DTYPE_NAMES
    attrs: NodeAttrs
    absent: tuple       # optional inputs the node is not fed
    outputs: tuple      # outputs computed (the node names only these)
    device: str | None = None   # the Vulkan device's UUID (None: ORTOPS_DEVICE or the default)
    mode: str = modes.DEFAULT   # the layer's numerical mode (ortops.modes)
    version: int = CONFIG_VERSION

    def to_dict(self) -> dict:
        return {"v": self.version, "node": self.node, "op": self.op, "dtype": self.dtype,
                "attrs": self.attrs.to_dict(), "absent": list(self.absent),
                "outputs": list(self.outputs), "device": self.device, "mode": self.mode}

    def to_json(self) -> str:
        return encode(self.to_dict())

    @classmethod
    def from_json(cls, text: str | bytes) -> "NodeConfig":
        """Decode (and cache) a ``config`` attribute with the native decoder; ValueError naming
        what is wrong (and the node, where it could be read) otherwise."""
        key = text if isinstance(text, (str, bytes)) else str(text)
        cfg = _CACHE.get(key)
        if cfg is not None:
            return cfg
        from ortops import _vk

        d = _vk.decode_node_config(text)
        cfg = cls(node=d["node"], op=d["op"], dtype=d["dtype"], attrs=NodeAttrs.from_dict(d["attrs"]),
                  absent=tuple(d["absent"]), outputs=tuple(d["outputs"]), device=d["device"],
                  mode=d["mode"], version=d["v"])
        with _LOCK:
            if len(_CACHE) > 1024:  # bound the cache; configs are tiny, models few
                _CACHE.clear()
            _CACHE[key] = cfg
        return cfg


def encode(config: NodeConfig | Mapping) -> str:
    """The attribute string of a config (a NodeConfig, or its dict form).

    ``json`` writes floats with ``repr``, the shortest string that reads back as the same
    float64, so float32 attribute values survive exactly.
    """
    if isinstance(config, NodeConfig):
        config = config.to_dict()
    return json.dumps(config, sort_keys=True, allow_nan=False, separators=(",", ":"))


_CACHE: dict = {}
_LOCK = threading.Lock()
