"""ortops as an ONNX Runtime plugin execution provider (EP): unmodified models, RNN / GRU /
LSTM nodes on a Vulkan device, every other node on ONNX Runtime's CPU provider.

The EP lives in the same native library as the custom ops, ``libortops_ort.so``
(``src/ep/``; it exports ``CreateEpFactories`` / ``ReleaseEpFactory`` beside
``RegisterCustomOps``). Any ONNX Runtime binding uses it as it uses any plugin EP: register
the library once per process, pick the ortops device(s) from the EP devices, add them to the
session options (docs/onnxruntime.md, "The execution provider")::

    import onnxruntime, ortops
    sess = onnxruntime.InferenceSession("model.onnx", sess_options=ortops.ep_session_options())

which is, in plain onnxruntime, with the names ONNX Runtime's plugin-EP packaging guidance
asks a package for (:func:`get_library_path`, :func:`get_ep_names`, :func:`get_ep_name`)::

    onnxruntime.register_execution_provider_library("ortops", ortops.get_library_path())
    devices = [d for d in onnxruntime.get_ep_devices() if d.ep_name in ortops.get_ep_names()]
    so = onnxruntime.SessionOptions()
    so.add_provider_for_devices(devices[:1], {"mode": "deterministic"})

or left to ONNX Runtime's automatic device selection
(``so.set_provider_selection_policy(onnxruntime.OrtExecutionProviderDevicePolicy.PREFER_GPU)``).

EP options (any other key is refused, naming these): ``device`` (a Vulkan device UUID, index
or name part; default: the EP device given), ``mode`` (:data:`ortops.vocabulary.MODES`:
docs/modes.md) and ``placement`` (:data:`ortops.vocabulary.PLACEMENTS`: ``gpu`` puts every
recurrent node the device can run on it, ``auto`` leaves to ONNX Runtime's CPU provider the
nodes the cost model predicts faster there; default ``auto`` on a CPU implementation of Vulkan
such as lavapipe, else ``gpu``).
"""

from __future__ import annotations

import os
import threading

__all__ = ["EP_NAME", "REGISTRATION_NAME", "get_library_path", "get_ep_name", "get_ep_names",
           "ep_library_path", "register_ep", "ep_devices", "ep_session_options"]

#: The EP's name (the factory's GetName): what ONNX Runtime's reports and providers lists say.
EP_NAME = "OrtopsExecutionProvider"
#: The name :func:`register_ep` registers the library under.
REGISTRATION_NAME = "ortops"
#: The EP devices' metadata keys (src/ep/ep.hpp).
META_UUID, META_NAME, META_INDEX = "vulkan_uuid", "vulkan_device_name", "vulkan_index"
_LIBRARY = "libortops_ort.so"

_lock = threading.Lock()
_registered = False


def get_library_path() -> str:
    """The path of the library holding the EP (``ortops/libortops_ort.so``, the custom-op
    library too), for ``register_execution_provider_library`` in any ONNX Runtime (the name
    ONNX Runtime's plugin-EP packaging guidance gives this helper)."""
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), _LIBRARY)
    if not os.path.isfile(path):
        raise RuntimeError(f"ortops: the library {path} is not installed; reinstall ortops "
                           "(pip install .) so that CMake builds it")
    return path


#: :func:`get_library_path` by its earlier name.
ep_library_path = get_library_path


def get_ep_name() -> str:
    """The EP's name, :data:`EP_NAME`: the ``ep_name`` of each of its ``onnxruntime.OrtEpDevice`` objects."""
    return EP_NAME


def get_ep_names() -> list[str]:
    """The names of the EPs the library provides (one: :data:`EP_NAME`)."""
    return [EP_NAME]


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
        onnxruntime.register_execution_provider_library(REGISTRATION_NAME, get_library_path())
        _registered = True


def ep_devices(device: str | int | None = None) -> list:
    """The ortops EP devices (``onnxruntime.OrtEpDevice``, one per usable Vulkan device; their
    ``ep_metadata`` holds the Vulkan device's UUID, name, driver and index), registering the
    library first; with ``device`` (a UUID or its first 8+ hex digits, an index, a type or part
    of the name: what :func:`ortops.device.select` takes) only the EP device of the device it
    names (none where that device is not offered). ValueError where ``device`` names no
    Vulkan device."""
    import onnxruntime

    register_ep()
    found = [d for d in onnxruntime.get_ep_devices() if d.ep_name == EP_NAME]
    if device is not None:
        from ortops.device import select

        uuid = select(device).uuid
        found = [d for d in found if d.ep_metadata.get(META_UUID) == uuid]
    return found


def ep_session_options(device: str | int | None = None, mode: str | None = None,
                       placement: str | None = None, sess_options=None):
    """``onnxruntime.SessionOptions`` (``sess_options`` if given) with the ortops EP first
    and ONNX Runtime's CPU provider after: RNN / GRU / LSTM nodes the Vulkan path takes run
    there, every other node on the CPU. ``device``: as :func:`ep_devices` (default: the first
    ortops EP device, the one the core prefers: ``ORTOPS_DEVICE``, else a discrete GPU, ...);
    ``mode``: one of :data:`ortops.vocabulary.MODES` (default deterministic); ``placement``:
    one of :data:`ortops.vocabulary.PLACEMENTS` (default: the EP's, ``auto`` on a CPU
    implementation of Vulkan, else ``gpu``). Raises ValueError for a bad option, RuntimeError
    when no Vulkan device is offered."""
    import onnxruntime

    from ortops import vocabulary

    where = "ortops.ep_session_options"
    if mode is not None:
        vocabulary.check("mode", mode, where)
    if placement is not None:
        vocabulary.check("placement", placement, where)
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
