"""The ``config`` attribute of an ortops custom node, typed, encoded and decoded here only.

``ortops.ort.rewrite`` makes a :class:`NodeConfig` per custom node and writes it with
:meth:`NodeConfig.to_json`; ``ortops.ort.customop`` reads it back with
:meth:`NodeConfig.from_json` (cached: ORT hands the same string on every run). The JSON
format (``customop``'s module docstring, "Contract of a custom node"): one object with the
keys ``v`` (:data:`CONFIG_VERSION`), ``key``, ``node``, ``op``, ``dtype``, ``attrs``,
``weights``, ``absent``, ``outputs``, ``gate``, ``mode`` (ortops.modes) and the optional
``device``; written with
sorted keys, no spaces, floats by ``repr`` (the float64 value of the float32 attribute, so
it round-trips exactly).
"""

from __future__ import annotations

import dataclasses
import json
import threading
from dataclasses import dataclass
from typing import Mapping

import numpy as np

from ortops.cells import CELLS
from ortops import modes
from ortops.modes import check_mode

CONFIG_VERSION = 3   # 2: the run-token input, the Squeeze check, no status output; 3: mode

#: Config dtype -> (custom op type suffix, numpy dtype of the op's float inputs, numpy dtype
#: of its outputs). float16 inputs arrive widened to float32: onnxruntime-extensions aborts
#: the process on a float16 input of a Python op (customop's docstring).
DTYPES = {
    "float32": ("", np.float32, np.float32),
    "float16": ("_f16", np.float32, np.float16),
    "float64": ("_f64", np.float64, np.float64),
}
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
        """Lenient like the decoder always was: missing keys take their defaults, keys that
        are no attribute are ignored."""
        if not isinstance(d, Mapping):
            raise ValueError(f"ortops custom node: config attrs is not an object ({d!r})")
        kw = {}
        for f in dataclasses.fields(cls):
            if f.name in d:
                v = d[f.name]
                kw[f.name] = _tuple(v) if f.name.startswith("activation") else v
        return cls(**kw)


@dataclass(frozen=True)
class NodeConfig:
    """One custom node's configuration (the ``config`` attribute)."""

    key: str            # the layer's key: REGISTRY entries, the inline cache
    node: str           # the node's name (in error messages)
    op: str             # LSTM, GRU or RNN
    dtype: str          # one of DTYPE_NAMES
    attrs: NodeAttrs
    weights: str        # "registry" (prebuilt layer, weight inputs empty) or "inputs"
    absent: tuple       # optional inputs fed the empty initializer
    outputs: tuple      # outputs computed (the others come back empty)
    gate: str           # the output fed through the check Squeeze
    device: str | None = None   # inputs mode: the device name for the layer
    mode: str = modes.DEFAULT  # the layer's numerical mode (ortops.modes)
    version: int = CONFIG_VERSION

    def to_dict(self) -> dict:
        return {"v": self.version, "key": self.key, "node": self.node, "op": self.op, "dtype": self.dtype,
                "attrs": self.attrs.to_dict(), "weights": self.weights, "absent": list(self.absent),
                "outputs": list(self.outputs), "gate": self.gate, "device": self.device,
                "mode": self.mode}

    def to_json(self) -> str:
        return encode(self.to_dict())

    @classmethod
    def from_json(cls, text: str) -> "NodeConfig":
        """Parse (and cache) a ``config`` attribute; raise ValueError if malformed."""
        cfg = _CACHE.get(text)
        if cfg is not None:
            return cfg
        try:
            d = json.loads(text)
        except ValueError as e:
            raise ValueError(f"ortops custom node: config attribute is not JSON ({e})") from None
        if not isinstance(d, dict) or d.get("v") != CONFIG_VERSION:
            raise ValueError(
                f"ortops custom node: config version {d.get('v') if isinstance(d, dict) else None!r} "
                f"is not the supported version {CONFIG_VERSION}"
            )
        for name in ("key", "node", "op", "dtype", "attrs", "weights", "absent", "outputs", "gate", "mode"):
            if name not in d:
                raise ValueError(f"ortops custom node: config lacks {name!r}")
        if d["op"] not in CELLS or d["dtype"] not in DTYPE_NAMES:
            raise ValueError(f"ortops custom node: unsupported op/dtype {d['op']}/{d['dtype']}")
        cfg = cls(key=d["key"], node=d["node"], op=d["op"], dtype=d["dtype"], attrs=NodeAttrs.from_dict(d["attrs"]),
                  weights=d["weights"], absent=tuple(d["absent"]), outputs=tuple(d["outputs"]), gate=d["gate"],
                  device=d.get("device"), mode=check_mode(d["mode"], "ortops custom node"),
                  version=d["v"])
        with _LOCK:
            if len(_CACHE) > 4096:  # bound the cache; configs are tiny, models few
                _CACHE.clear()
            _CACHE[text] = cfg
        return cfg


def encode(config: NodeConfig | Mapping) -> str:
    """The attribute string of a config (a NodeConfig, or its dict form).

    ``json`` writes floats with ``repr``, the shortest string that reads back as the same
    float64, so float32 attribute values survive exactly.
    """
    if isinstance(config, NodeConfig):
        config = config.to_dict()
    return json.dumps(config, sort_keys=True, allow_nan=False, separators=(",", ":"))


_CACHE: dict[str, NodeConfig] = {}
_LOCK = threading.Lock()
