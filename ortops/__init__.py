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
    # The plugin execution provider (ortops/ep.py): unmodified models through onnxruntime,
    # with the names ONNX Runtime's plugin-EP packaging guidance asks a package for
    # (get_library_path, get_ep_names, get_ep_name); ep_library_path is get_library_path.
    "get_library_path": ("ortops.ep", "get_library_path"),
    "get_ep_names": ("ortops.ep", "get_ep_names"),
    "get_ep_name": ("ortops.ep", "get_ep_name"),
    "EP_NAME": ("ortops.ep", "EP_NAME"),
    "ep_library_path": ("ortops.ep", "ep_library_path"),
    "ep_session_options": ("ortops.ep", "ep_session_options"),
    "DeviceLostError": ("ortops._vk", "DeviceLostError"),
    "NodeRunError": ("ortops.ort.customop", "NodeRunError"),
    "ModelError": ("ortops.ort.rewrite", "ModelError"),
}

_SUBMODULES = ("reference", "validation", "activations", "cells")

__all__ = sorted(_LAZY) + list(_SUBMODULES)


def __getattr__(name):
    if name in _LAZY:
        import importlib

        module, attr = _LAZY[name]
        value = getattr(importlib.import_module(module), attr)
        globals()[name] = value
        return value
    if name in _SUBMODULES:
        import importlib

        return importlib.import_module(f"ortops.{name}")
    raise AttributeError(f"module 'ortops' has no attribute {name!r}")


def __dir__():
    # The lazy names too (PEP 562): dir(ortops) lists the public API before it is first used.
    return sorted(set(globals()) | set(__all__))
