"""ortops: ONNX RNN, GRU and LSTM layers on any Vulkan device, through Kompute.

The public names are imported lazily so that ``import ortops`` stays cheap and
pure-Python parts (``ortops.reference``, ``ortops.validation``) work even where
no Vulkan loader is installed.
"""

# The one place the version is written: pyproject.toml reads it from here (scikit-build-core's
# regex metadata provider), and the wheel's metadata says the same.
__version__ = "0.1.0"

from ortops._onnxruntime import require_present as _require_onnxruntime

_require_onnxruntime()  # a clear ImportError naming the flavours when none is installed

_LAZY = {
    "devices": ("ortops.device", "devices"),
    "Device": ("ortops.device", "Device"),
    "assigned_devices": ("ortops.visible", "assigned_devices"),
    "lstm": ("ortops.ops", "lstm"),
    "gru": ("ortops.ops", "gru"),
    "rnn": ("ortops.ops", "rnn"),
    "RecurrentLayer": ("ortops.layer", "RecurrentLayer"),
    "InferenceSession": ("ortops.ort.session", "InferenceSession"),
    "convert": ("ortops.ort.session", "convert"),
    "register": ("ortops.ort.session", "register"),
    "library_path": ("ortops.ort.session", "library_path"),
    # The plugin execution provider (ortops/ep.py): unmodified models through onnxruntime.
    "ep_library_path": ("ortops.ep", "ep_library_path"),
    "ep_session_options": ("ortops.ep", "ep_session_options"),
    "DeviceLostError": ("ortops._vk", "DeviceLostError"),
    "NodeRunError": ("ortops.ort.customop", "NodeRunError"),
    "ModelError": ("ortops.ort.rewrite", "ModelError"),
}

__all__ = sorted(_LAZY) + ["reference", "validation", "activations", "cells"]


def __getattr__(name):
    if name in _LAZY:
        import importlib

        module, attr = _LAZY[name]
        value = getattr(importlib.import_module(module), attr)
        globals()[name] = value
        return value
    if name in ("reference", "validation", "activations", "cells"):
        import importlib

        return importlib.import_module(f"ortops.{name}")
    raise AttributeError(f"module 'ortops' has no attribute {name!r}")
