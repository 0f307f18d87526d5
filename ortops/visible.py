"""Which Vulkan devices a scheduler assigned to this process.

Schedulers (Ray, Slurm, Kubernetes' NVIDIA device plugin, a shell script) hand a process its
GPUs through ``CUDA_VISIBLE_DEVICES`` and, in containers, ``NVIDIA_VISIBLE_DEVICES``. The
Vulkan loader and NVIDIA's Vulkan driver ignore both: every GPU the process can open is
enumerated. :func:`assigned_devices` reads the two variables and returns the Vulkan devices
they name, so that a replica Ray gave GPU 1 runs on GPU 1 rather than on the first device.

What is relied on, exactly:

* Only NVIDIA Vulkan devices (vendor id 0x10de) count; lavapipe and other vendors' GPUs are
  never "assigned" (CUDA does not see them either).
* A UUID entry (``GPU-8c1b…``, a prefix as CUDA allows, dashes optional) is matched against
  ``Device.uuid`` (VkPhysicalDeviceIDProperties.deviceUUID, which on NVIDIA holds the same
  16 bytes as the CUDA/NVML GPU UUID). This is exact whatever the order.
* An index entry is a CUDA ordinal. ``CUDA_DEVICE_ORDER=PCI_BUS_ID`` numbers GPUs by PCI bus
  id (``Device.pci_bus_id``, VK_EXT_pci_bus_info), which is what is done here. CUDA's default,
  ``FASTEST_FIRST``, puts the fastest GPU first and breaks ties by PCI bus id; for GPUs of one
  model (same Vulkan device id) that is the PCI order too, so it is used. For GPUs of different
  models the "fastest" rule is CUDA's own and not reproduced here: an index then raises an
  error asking for UUIDs or ``CUDA_DEVICE_ORDER=PCI_BUS_ID``.
* ``MIG-…`` entries (MIG instances) have no Vulkan device of their own: a clear error.
* ``NVIDIA_VISIBLE_DEVICES`` (NVIDIA's container runtime: ``all``, ``none``, ``void``, or a
  list of host indices or UUIDs) applies first, ``CUDA_VISIBLE_DEVICES`` then numbers what is
  left, as CUDA does inside such a container. Host indices are nvidia-smi's, which are PCI
  order; inside the container the runtime has already hidden the other GPUs from the driver,
  so when exactly as many NVIDIA devices are enumerated as indices are listed, all of them are
  the assigned ones.
* An empty ``CUDA_VISIBLE_DEVICES`` assigns no GPU (an empty list); neither variable set
  means no assignment at all (None): choose as usual (``device=``, ``ORTOPS_DEVICE``).
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence

NVIDIA_VENDOR_ID = 0x10DE

__all__ = ["assigned_devices", "assigned_device", "cuda_order", "NVIDIA_VENDOR_ID"]


def _entries(text: str) -> list[str]:
    return [e.strip() for e in text.split(",") if e.strip()]


def _pci_key(device) -> tuple:
    """Sort key for a PCI bus id "dddd:bb:dd.f" (hex fields)."""
    return tuple(int(part, 16) for part in device.pci_bus_id.replace(".", ":").split(":"))


def cuda_order(found: Sequence, order: str | None = None) -> list:
    """The NVIDIA devices of ``found`` in CUDA's ordinal order (``order``: the value of
    ``CUDA_DEVICE_ORDER``; None or ``FASTEST_FIRST`` is CUDA's default). See the module
    docstring for what is and is not reproduced."""
    gpus = [d for d in found if d.vendor_id == NVIDIA_VENDOR_ID]
    if len(gpus) <= 1:
        return gpus
    order = (order or "FASTEST_FIRST").strip().upper()
    if order not in ("FASTEST_FIRST", "PCI_BUS_ID"):
        raise ValueError(f"ortops: CUDA_DEVICE_ORDER must be FASTEST_FIRST or PCI_BUS_ID, got {order!r}")
    missing = [str(d) for d in gpus if not d.pci_bus_id]
    if missing:
        raise ValueError("ortops: cannot number NVIDIA GPUs as CUDA does: no PCI bus id "
                         f"(VK_EXT_pci_bus_info) for {', '.join(missing)}; give UUIDs (GPU-...) instead")
    if order == "FASTEST_FIRST" and len({d.device_id for d in gpus}) > 1:
        raise ValueError(
            "ortops: CUDA's default device order (FASTEST_FIRST) for GPUs of different models "
            f"({', '.join(sorted({d.name for d in gpus}))}) is CUDA's own and cannot be read from "
            "Vulkan: set CUDA_DEVICE_ORDER=PCI_BUS_ID or give GPU UUIDs (GPU-...) in CUDA_VISIBLE_DEVICES")
    return sorted(gpus, key=_pci_key)


def _by_uuid(entry: str, gpus: Sequence, variable: str):
    text = entry.lower()
    digits = (text[4:] if text.startswith("gpu-") else text).replace("-", "")
    hits = [d for d in gpus if d.uuid.replace("-", "").startswith(digits)]
    if len(hits) != 1:
        listing = "; ".join(f"{d} GPU-{d.uuid}" for d in gpus) or "none"
        what = "no" if not hits else f"{len(hits)}"
        raise ValueError(f"ortops: {variable} names {entry!r}, which matches {what} NVIDIA Vulkan "
                         f"device(s); NVIDIA Vulkan devices: {listing}")
    return hits[0]


def _pick(entries: list[str], gpus: list, variable: str) -> list:
    """The devices ``entries`` name, indices counting in ``gpus`` (already in CUDA order)."""
    out = []
    for entry in entries:
        low = entry.lower()
        if low.startswith("mig-"):
            raise ValueError(
                f"ortops: {variable} names the MIG instance {entry!r}: a MIG instance has no Vulkan "
                "device of its own (Vulkan sees whole GPUs); give whole GPUs by index or GPU-<uuid>")
        if entry.lstrip("-").isdigit():
            index = int(entry)
            if not 0 <= index < len(gpus):
                listing = "; ".join(f"{i}: {d} GPU-{d.uuid}" for i, d in enumerate(gpus)) or "none"
                raise ValueError(f"ortops: {variable} names GPU {index}, but {len(gpus)} NVIDIA Vulkan "
                                 f"device(s) are visible: {listing}")
            device = gpus[index]
        else:
            device = _by_uuid(entry, gpus, variable)
        if device not in out:
            out.append(device)
    return out


def _container_visible(text: str, gpus: list) -> list:
    """The NVIDIA devices NVIDIA_VISIBLE_DEVICES leaves (``gpus`` in PCI order)."""
    low = text.strip().lower()
    if low == "all":
        return gpus
    if low in ("", "none", "void"):
        return []
    entries = _entries(text)
    if all(e.isdigit() for e in entries) and len(entries) == len(gpus):
        # Inside the container: the runtime hid the other GPUs already.
        return gpus
    return _pick(entries, gpus, "NVIDIA_VISIBLE_DEVICES")


def assigned_devices(env: Mapping[str, str] | None = None, found: Sequence | None = None) -> list | None:
    """The Vulkan devices ``CUDA_VISIBLE_DEVICES`` / ``NVIDIA_VISIBLE_DEVICES`` assign to this
    process, in the order listed; None when neither is set. ``env`` defaults to
    ``os.environ`` and ``found`` to :func:`ortops.devices` (both given by tests)."""
    env = os.environ if env is None else env
    cuda = env.get("CUDA_VISIBLE_DEVICES")
    container = env.get("NVIDIA_VISIBLE_DEVICES")
    if cuda is None and container is None:
        return None
    if found is None:
        from ortops.device import devices

        found = devices()
    gpus = cuda_order(found, env.get("CUDA_DEVICE_ORDER"))
    if container is not None:
        kept = _container_visible(container, cuda_order(found, "PCI_BUS_ID"))
        gpus = [d for d in gpus if d in kept]
    if cuda is None:
        return gpus
    return _pick(_entries(cuda), gpus, "CUDA_VISIBLE_DEVICES")


def assigned_device(env: Mapping[str, str] | None = None, found: Sequence | None = None, rank: int = 0):
    """The ``rank``-th assigned device, or None when nothing was assigned (neither variable set,
    or an empty list): then ``device=None`` chooses as usual. A rank past the list is an error."""
    chosen = assigned_devices(env, found)
    if not chosen:
        return None
    if rank >= len(chosen):
        raise ValueError(f"ortops: rank {rank} asked for, but only {len(chosen)} GPU(s) are assigned: "
                         + "; ".join(str(d) for d in chosen))
    return chosen[rank]
