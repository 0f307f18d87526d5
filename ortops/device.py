"""Vulkan devices: listing, choosing one, and the per-process context on it.

A device is chosen by argument (``device=``: an index, a name substring, a type such as
``"discrete"`` or ``"cpu"``, a UUID or a unique prefix of one (``"GPU-"`` optional, as
nvidia-smi prints it), or a :class:`Device`), else by the ``ORTOPS_DEVICE`` environment
variable (same forms), else, where NVIDIA devices are present, the GPU ``CUDA_VISIBLE_DEVICES``
/ ``NVIDIA_VISIBLE_DEVICES`` assign (ortops.visible), else by preference: a discrete GPU, then
an integrated one, then a virtual one, then a CPU implementation such as lavapipe. The native
core makes the choice, the same for every door (``src/core/vk/devices.hpp``, ``chooseAmong``);
a selection that matches no device is a ValueError naming what was asked and listing the
devices there are.

``ORTOPS_VALIDATION=1`` creates contexts with the Khronos validation layer and synchronization
validation; its messages are collected and read with :func:`validation_messages`.
"""

from __future__ import annotations

import os
import threading
from dataclasses import dataclass

def _native():
    try:
        from ortops import _vk
    except ImportError as exc:
        import ortops

        if "libvulkan" in str(exc):
            hint = "it needs the Vulkan loader: apt-get install libvulkan1 mesa-vulkan-drivers"
        else:
            hint = (f"this ortops ({os.path.dirname(ortops.__file__)}) has no compiled module: "
                    "install it (scripts/setup.sh or pip install .) and import it from outside "
                    "the source tree (or with python -P)")
        raise RuntimeError(f"ortops: the native module could not be loaded ({exc}); {hint}") from exc
    return _vk


@dataclass(frozen=True)
class Device:
    """One Vulkan device and the limits that decide what runs on it."""

    index: int
    name: str
    type: str
    driver: str
    driver_info: str
    api_version: str
    vendor_id: int
    device_id: int
    max_storage_buffer_range: int
    max_workgroup_size: tuple
    max_workgroup_invocations: int
    max_workgroup_count: tuple
    max_shared_memory: int
    max_push_constants_size: int
    subgroup_size: int
    float16: bool
    float64: bool
    nan_preserve_float16: bool    # SignedZeroInfNanPreserve allowed for 16-bit floats
    nan_preserve_float32: bool    # ... and for 32-bit floats (the kernels require this one)
    denorm_preserve_float32: bool
    denorm_flush_float32: bool
    timestamp_period_ns: float
    timestamps: bool
    #: A portability implementation (it exposes VK_KHR_portability_subset: MoltenVK on Apple
    #: GPUs, other layered drivers): not fully conformant; listed because the instance enables
    #: VK_KHR_portability_enumeration where the loader offers it.
    portability: bool = False
    # Identity (VkPhysicalDeviceIDProperties; VK_EXT_pci_bus_info). On NVIDIA ``uuid`` is the
    # GPU UUID nvidia-smi, NVML and CUDA report (nvidia-smi prints it after "GPU-").
    uuid: str = ""                 # 8-4-4-4-12 lowercase hex
    luid: str | None = None        # 16 hex digits where the driver reports a valid LUID (Windows)
    pci_bus_id: str | None = None  # "dddd:bb:dd.f" where the device offers VK_EXT_pci_bus_info
    #: VK_KHR_cooperative_matrix's combinations (ortops.fast.CoopMatShape) usable in compute
    #: shaders; empty without the extension. Mode "fast" uses matrix hardware only where the
    #: one its kernel needs (ortops.fast.REQUIRED) is listed.
    cooperative_matrix: tuple = ()
    #: (smallest, largest) compute subgroup size (Vulkan 1.3 subgroup size control); () below 1.3.
    subgroup_size_range: tuple = ()
    #: Compute units that run workgroups (VK_NV_shader_sm_builtins' shaderSMCount; 0 where the
    #: device does not say) and whether it offers the Vulkan memory model at device scope: what
    #: the persistent step kernel needs (ortops.variants.PERSISTENT_STEPS).
    compute_units: int = 0
    memory_model_device_scope: bool = False

    def __str__(self) -> str:
        kind = f"{self.type}, portability implementation" if self.portability else self.type
        return (
            f"[{self.index}] {self.name} ({kind}, {self.driver} {self.driver_info}, "
            f"Vulkan {self.api_version})"
        )

    def describe(self) -> str:
        """Several lines: the name and the limits ortops relies on."""
        x, y, z = self.max_workgroup_size
        return "\n".join(
            [
                str(self),
                f"    max storage buffer range  {self.max_storage_buffer_range} bytes",
                f"    max workgroup size        {x} x {y} x {z} ({self.max_workgroup_invocations} invocations)",
                "    max workgroup count       {} x {} x {}".format(*self.max_workgroup_count),
                f"    shared memory             {self.max_shared_memory} bytes",
                f"    subgroup size             {self.subgroup_size}" + (
                    " (range {}-{})".format(*self.subgroup_size_range) if self.subgroup_size_range else ""),
                f"    float16 / float64 shaders {'yes' if self.float16 else 'no'} / {'yes' if self.float64 else 'no'}",
                "    NaN/Inf/-0 preserved      float32 {} / float16 {}".format(
                    "yes" if self.nan_preserve_float32 else "no", "yes" if self.nan_preserve_float16 else "no"),
                "    denormals float32         {}".format(
                    "preserved" if self.denorm_preserve_float32 else
                    ("flushed on request" if self.denorm_flush_float32 else "driver's choice")),
                f"    timestamp period          {self.timestamp_period_ns:g} ns"
                + ("" if self.timestamps else " (no timestamps on the compute queue)"),
                "    portability subset        {}".format(
                    "yes (VK_KHR_portability_subset: not fully conformant)" if self.portability
                    else "no"),
                f"    uuid                      {self.uuid or 'not reported'}",
                f"    pci bus id                {self.pci_bus_id or 'not reported'}",
            ] + ([f"    luid                      {self.luid}"] if self.luid else [])
            + self._describe_cooperative_matrix()
        )

    def _describe_cooperative_matrix(self) -> list:
        if not self.cooperative_matrix:
            return ["    cooperative matrix        no (mode 'fast' runs the portable kernels)"]
        return ["    cooperative matrix        " + str(s) for s in self.cooperative_matrix]


class UnsupportedDeviceError(RuntimeError):
    """The Vulkan device lacks a feature every ortops kernel relies on."""


def require_ieee(device: Device) -> None:
    """Refuse a device whose shaders may not preserve NaN, +-Inf and the sign of zero
    (UnsupportedDeviceError naming the device and the missing float control; the native core's
    rule, ``src/core/rnn/device_check.hpp``; docs/special_values.md)."""
    _native().require_device(device)


def require_mode(device: Device, mode: str) -> None:
    """Refuse ``mode`` on a device that lacks a float control the mode needs, and any mode on a
    device that cannot run the kernels at all (UnsupportedDeviceError; exact mode: docs/exact.md;
    the native core's rule, ``src/core/rnn/device_check.hpp``)."""
    _native().require_device(device, mode)


def refusal(device: Device, mode: str | None = None) -> str | None:
    """Why ``device`` cannot run ortops's kernels (in ``mode``), or None (the core's rule)."""
    return _native().device_refusal(device, mode)


_devices_cache: list[Device] | None = None


def devices() -> list[Device]:
    """Every Vulkan device with a compute queue, in the driver's enumeration order."""
    global _devices_cache
    if _devices_cache is None:
        from ortops.fast import shapes_of

        fields = Device.__dataclass_fields__
        _devices_cache = [
            Device(**{k: v for k, v in d.items() if k in fields and k != "cooperative_matrix"},
                   cooperative_matrix=shapes_of(d.get("cooperative_matrix")))
            for d in _native().enumerate_devices()
        ]
    return list(_devices_cache)


def select(device: int | str | Device | None = None) -> Device:
    """The device named by ``device``, else by ``ORTOPS_DEVICE``, else the one the scheduler
    assigns, else the preferred one (the module docstring; the native core chooses). ValueError
    naming what was asked and listing the devices where nothing matches; ``NoDeviceError`` (a
    RuntimeError) where there is no Vulkan device and none was asked for."""
    if isinstance(device, Device):
        return device
    if device is not None and not isinstance(device, (int, str)):
        raise TypeError(f"ortops: device must be an int, a str or a Device, got {type(device).__name__}")
    found = devices()
    return found[_native().choose_device(found, None if device is None else str(device))]


def no_device_error() -> type[RuntimeError]:
    """The exception :func:`select` raises where there is no Vulkan device at all and none was
    asked for (a RuntimeError)."""
    return _native().NoDeviceError


_contexts: dict[int, object] = {}
_contexts_lock = threading.Lock()


#: Device queues a context spreads its plans over (ORTOPS_QUEUES overrides). One: on the H200
#: (docs/perf.md, "Threads") eight queues made a single-threaded recognizer run 0.4 ms slower
#: (1.43-1.53 ms against 1.09-1.20 ms: consecutive submissions switch queues) and gave no
#: more runs/s from 2 to 8 threads than one queue did.
DEFAULT_QUEUES = 1


def max_queues() -> int:
    """How many queues of the compute family a new context creates (at most; the device may
    offer fewer): ``ORTOPS_QUEUES``, else :data:`DEFAULT_QUEUES`."""
    text = os.environ.get("ORTOPS_QUEUES", "").strip()
    if not text:
        return DEFAULT_QUEUES
    if not text.isdigit() or int(text) < 1:
        raise ValueError(f"ortops: ORTOPS_QUEUES must be a positive integer, got {text!r}")
    return int(text)


def validation_enabled() -> bool:
    """Whether contexts are created under the validation layer (ORTOPS_VALIDATION=1)."""
    return os.environ.get("ORTOPS_VALIDATION", "").strip() not in ("", "0", "false", "no")


def context(device=None):
    """The process-wide native context (instance, device, queues) on the chosen device.

    A context whose device was lost (``DeviceLostError``) is replaced by a new one here, so a
    new session or layer starts afresh while the old ones keep raising.
    """
    chosen = select(device)
    with _contexts_lock:
        ctx = _contexts.get(chosen.index)
        if ctx is None or ctx.lost:
            # The native core's context of this device (src/core/vk/devices.hpp), shared with the
            # custom-op library: one instance, device and set of queue locks per process.
            ctx = _native().shared_context(chosen.index, validation_enabled(), max_queues())
            _contexts[chosen.index] = ctx
    return chosen, ctx


def device_lost_error() -> type:
    """The exception a run raises when its Vulkan device was lost (a RuntimeError)."""
    return _native().DeviceLostError


def validation_messages() -> list[str]:
    """Validation-layer warnings and errors reported since the last call (then cleared)."""
    return list(_native().take_messages())


def _device_among(text: str, found: list[Device]) -> Device | None:
    """The device of ``found`` that ``select(text)`` chooses (the core's rule), else None."""
    chosen = select(text)
    return next((d for d in found if d.uuid == chosen.uuid), None)


from ortops._deprecated import module_getattr  # noqa: E402 - the deprecated names, after what they use

__getattr__ = module_getattr(__name__, {
    "match_uuid": ("ortops.device.select(uuid): the core's one device rule", lambda: _device_among),
})
