"""Vulkan devices: listing, choosing one, and the per-process context on it.

A device is chosen by argument (``device=``: an index, a name substring, a type such as
``"discrete"`` or ``"cpu"``, a UUID or a unique prefix of one (``"GPU-"`` optional, as
nvidia-smi prints it), or a :class:`Device`), else by the ``ORTOPS_DEVICE`` environment
variable (same forms), else by preference: a discrete GPU, then an integrated one, then a
virtual one, then a CPU implementation such as lavapipe.

``ORTOPS_VALIDATION=1`` creates contexts with the Khronos validation layer and synchronization
validation; its messages are collected and read with :func:`validation_messages`.
"""

from __future__ import annotations

import os
import threading
from dataclasses import dataclass

_PREFERENCE = ("discrete", "integrated", "virtual", "cpu", "other")
_NO_DEVICE = (
    "ortops: no Vulkan device with a compute queue was found. Install a Vulkan driver for your "
    "GPU, or lavapipe (Vulkan on the CPU) from Debian's package mesa-vulkan-drivers "
    "(apt-get install mesa-vulkan-drivers libvulkan1)."
)


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
    """Refuse a device whose shaders may not preserve NaN, +-Inf and the sign of zero.

    Every float pass declares the SPIR-V execution mode SignedZeroInfNanPreserve for 32-bit
    floats (glsl/common.glsl): without it a compiler may assume no NaN or Inf exists and, for
    one, turn clip's compare-and-select into a NaN-dropping min/max. A shader may declare the
    mode only where the device reports shaderSignedZeroInfNanPreserveFloat32 (Vulkan 1.2 float
    controls, VkPhysicalDeviceFloatControlsProperties); a device without it is refused here,
    before anything is compiled, rather than run kernels whose NaN and Inf results would be
    the compiler's choice. See docs/special_values.md.
    """
    if not device.nan_preserve_float32:
        raise UnsupportedDeviceError(
            f"ortops: the Vulkan device {device} cannot run ortops's kernels: it does not report "
            "shaderSignedZeroInfNanPreserveFloat32 (Vulkan 1.2 float controls), so its shaders "
            "may not preserve NaN, +-Inf and -0, which the kernels declare they rely on "
            "(SignedZeroInfNanPreserve, docs/special_values.md). Choose another device with "
            "device= or ORTOPS_DEVICE (lavapipe, Mesa's Vulkan on the CPU, supports it)."
        )


def require_mode(device: Device, mode: str) -> None:
    """Refuse ``mode`` on a device that lacks a float control the mode needs.

    Exact mode (docs/exact.md) gives the same bits on every device only where NaN, +-Inf and
    -0 are preserved as written (SignedZeroInfNanPreserve for 32-bit floats); denormals it
    flushes in its own code, so it asks no denormal control of the device. A device without
    the control is refused with its name and the missing feature, never run with
    device-specific bits.
    """
    if mode == "exact" and not device.nan_preserve_float32:
        raise UnsupportedDeviceError(
            f"ortops: mode='exact' cannot give device-independent results on the Vulkan device "
            f"{device}: it does not report shaderSignedZeroInfNanPreserveFloat32 (Vulkan 1.2 "
            "float controls), so its compiler may rewrite NaN, +-Inf and -0 (docs/exact.md). "
            "Choose another device with device= or ORTOPS_DEVICE.")
    require_ieee(device)


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


def _match(spec: int | str | Device, found: list[Device]) -> Device:
    if isinstance(spec, Device):
        return spec
    if isinstance(spec, int) or (isinstance(spec, str) and spec.strip().isdigit()):
        index = int(spec)
        for d in found:
            if d.index == index:
                return d
        raise ValueError(
            f"ortops: no Vulkan device with index {index}; devices: "
            + "; ".join(str(d) for d in found)
        )
    if isinstance(spec, str):
        text = spec.strip().lower()
        by_uuid = match_uuid(spec.strip(), found)
        if by_uuid is not None:
            return by_uuid
        for d in found:
            if d.type == text:
                return d
        for d in found:
            if text in d.name.lower():
                return d
        raise ValueError(
            f"ortops: no Vulkan device matches {spec!r} (an index, a type such as 'discrete' or "
            "'cpu', a UUID or its prefix, or part of a name); devices: "
            + "; ".join(f"{d} uuid {d.uuid}" for d in found)
        )
    raise TypeError(f"ortops: device must be an int, a str or a Device, got {type(spec).__name__}")


_HEX = frozenset("0123456789abcdef")


def _uuid_prefix(text: str) -> str | None:
    """``text`` as lowercase UUID digits without dashes, or None if it does not look like a
    UUID: after nvidia-smi's ``GPU-`` any hex digits and dashes; without it at least 8 hex
    digits (an all-digit text is an index, handled before), so that a name fragment such as
    ``"cafe"`` is still matched against names."""
    t = text.strip().lower()
    explicit = t.startswith("gpu-")
    if explicit:
        t = t[4:]
    digits = t.replace("-", "")
    if not digits or not set(digits) <= _HEX or len(digits) > 32:
        return None
    return digits if explicit or len(digits) >= 8 else None


def match_uuid(text: str, found: list[Device]) -> Device | None:
    """The device whose UUID is ``text`` or starts with it (with or without ``GPU-``; dashes
    optional); None if ``text`` does not look like a UUID (at least 8 hex digits, or any
    number after ``GPU-``). A prefix of several devices' UUIDs, or of none, is a ValueError
    listing the devices."""
    digits = _uuid_prefix(text)
    if digits is None:
        return None
    hits = [d for d in found if d.uuid.replace("-", "").startswith(digits)]
    if len(hits) == 1:
        return hits[0]
    listing = "; ".join(f"{d} uuid {d.uuid or 'not reported'}" for d in found)
    if not hits:
        raise ValueError(f"ortops: no Vulkan device has a UUID starting with {text!r}; devices: {listing}")
    raise ValueError(f"ortops: the UUID prefix {text!r} matches {len(hits)} Vulkan devices "
                     f"(give more digits); devices: {listing}")


def select(device: int | str | Device | None = None) -> Device:

    """The device named by ``device``, else by ``ORTOPS_DEVICE``, else the preferred one."""
    found = devices()
    if not found:
        raise RuntimeError(_NO_DEVICE)
    if device is None:
        device = os.environ.get("ORTOPS_DEVICE") or None
    if device is not None:
        return _match(device, found)
    return min(found, key=lambda d: (_PREFERENCE.index(d.type), d.index))


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
