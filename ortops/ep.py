"""ortops as an ONNX Runtime plugin execution provider (EP): unmodified models, RNN / GRU /
LSTM nodes on a Vulkan device, every other node on ONNX Runtime's CPU provider.

The EP lives in the same native library as the custom ops, ``libortops_ort.so``
(``src/ep/``; it exports ``CreateEpFactories`` / ``ReleaseEpFactory`` beside
``RegisterCustomOps``). Any ONNX Runtime binding uses it as it uses any plugin EP: register
the library once per process, pick the ortops device(s) from the EP devices, add them to the
session options (docs/onnxruntime.md, "The execution provider")::

    import onnxruntime, ortops
    sess = onnxruntime.InferenceSession("model.onnx", sess_options=ortops.ep_session_options())

which is, in plain onnxruntime::

    onnxruntime.register_execution_provider_library("ortops", ortops.ep_library_path())
    devices = [d for d in onnxruntime.get_ep_devices() if d.ep_name == "OrtopsExecutionProvider"]
    so = onnxruntime.SessionOptions()
    so.add_provider_for_devices(devices[:1], {"mode": "deterministic"})

EP options: ``device`` (a Vulkan device UUID, index or name part; default: the EP device
given), ``mode`` (``deterministic``, ``exact``, ``fast``: docs/modes.md) and ``placement``
(``gpu``; ``auto`` behaves as ``gpu`` until the cost model is in the native core).
"""

from __future__ import annotations

import os
import threading

__all__ = ["EP_NAME", "REGISTRATION_NAME", "ep_library_path", "register_ep", "ep_devices",
           "ep_session_options"]

#: The EP's name (the factory's GetName): what ONNX Runtime's reports and providers lists say.
EP_NAME = "OrtopsExecutionProvider"
#: The name :func:`register_ep` registers the library under.
REGISTRATION_NAME = "ortops"
#: The EP devices' metadata keys (src/ep/ep.hpp).
META_UUID, META_NAME, META_INDEX = "vulkan_uuid", "vulkan_device_name", "vulkan_index"
_MODES = ("deterministic", "exact", "fast")      # ortops.modes.MODES' names
_PLACEMENTS = ("gpu", "auto")
_LIBRARY = "libortops_ort.so"

_lock = threading.Lock()
_registered = False


def ep_library_path() -> str:
    """The path of the library holding the EP (``ortops/libortops_ort.so``, the custom-op
    library too), for ``register_execution_provider_library`` in any ONNX Runtime."""
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), _LIBRARY)
    if not os.path.isfile(path):
        raise RuntimeError(f"ortops: the library {path} is not installed; reinstall ortops "
                           "(pip install .) so that CMake builds it")
    return path


def register_ep() -> None:
    """Register the EP library with this process's onnxruntime, once (later calls do nothing)."""
    global _registered
    import onnxruntime

    with _lock:
        if _registered:
            return
        if any(d.ep_name == EP_NAME for d in onnxruntime.get_ep_devices()):
            _registered = True     # registered already, by the application itself
            return
        onnxruntime.register_execution_provider_library(REGISTRATION_NAME, ep_library_path())
        _registered = True


def _matches(dev, spec: str) -> bool:
    meta = dev.ep_metadata
    uuid = meta.get(META_UUID, "")
    s = spec.strip().lower()
    if s.startswith("gpu-"):
        s = s[4:]
    if s.isdigit():
        return meta.get(META_INDEX) == s
    digits = s.replace("-", "")
    if len(digits) >= 8 and all(c in "0123456789abcdef" for c in digits):
        return uuid.replace("-", "").startswith(digits)
    return s in meta.get(META_NAME, "").lower()


def ep_devices(device: str | int | None = None) -> list:
    """The ortops EP devices (``onnxruntime.OrtEpDevice``, one per usable Vulkan device; their
    ``ep_metadata`` holds the Vulkan device's UUID, name, driver and index), registering the
    library first; with ``device`` (a UUID or its first 8+ hex digits, an index, or part of
    the name) only the matching one(s)."""
    import onnxruntime

    register_ep()
    found = [d for d in onnxruntime.get_ep_devices() if d.ep_name == EP_NAME]
    if device is not None:
        found = [d for d in found if _matches(d, str(device))]
    return found


def ep_session_options(device: str | int | None = None, mode: str | None = None,
                       placement: str | None = None, sess_options=None):
    """``onnxruntime.SessionOptions`` (``sess_options`` if given) with the ortops EP first
    and ONNX Runtime's CPU provider after: RNN / GRU / LSTM nodes the Vulkan path takes run
    there, every other node on the CPU. ``device``: as :func:`ep_devices` (default: the first
    ortops EP device, the one the core prefers: ``ORTOPS_DEVICE``, else a discrete GPU, ...); ``mode``: deterministic (default), exact or fast; ``placement``: gpu
    (default) or auto. Raises ValueError for a bad option, RuntimeError when no Vulkan device
    is offered."""
    import onnxruntime

    if mode is not None and mode not in _MODES:
        raise ValueError(f"ortops.ep_session_options: mode must be one of {', '.join(_MODES)}, got {mode!r}")
    if placement is not None and placement not in _PLACEMENTS:
        raise ValueError(f"ortops.ep_session_options: placement must be one of {', '.join(_PLACEMENTS)}, "
                         f"got {placement!r}")
    devices = ep_devices(device)
    if not devices:
        offered = [d.ep_metadata.get(META_NAME, "?") for d in ep_devices()]
        raise RuntimeError(f"ortops.ep_session_options: no ortops EP device matches device={device!r} "
                           f"(offered: {offered or 'none: no usable Vulkan device'})")
    chosen = devices[0]
    options = {"device": chosen.ep_metadata.get(META_UUID, "")}
    if mode is not None:
        options["mode"] = mode
    if placement is not None:
        options["placement"] = placement
    so = sess_options if sess_options is not None else onnxruntime.SessionOptions()
    so.add_provider_for_devices([chosen], options)
    cpu = [d for d in onnxruntime.get_ep_devices() if d.ep_name == "CPUExecutionProvider"]
    if cpu:
        so.add_provider_for_devices(cpu[:1], {})
    return so
