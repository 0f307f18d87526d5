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

The rules live once, in the native core (``src/core/vk/visible.hpp``), which the plugin
execution provider uses for its default device too; this module hands them the devices and the
variables (``_vk.assigned_devices``, ``_vk.cuda_order``) and maps the positions back.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence

NVIDIA_VENDOR_ID = 0x10DE

__all__ = ["assigned_devices", "assigned_device", "cuda_order", "NVIDIA_VENDOR_ID"]


def _native():
    from ortops.device import _native as native

    return native()


def _described(found: Sequence) -> list[tuple]:
    """The devices as the core's rules read them (label, name, vendor, device id, UUID, PCI bus id)."""
    return [(str(d), d.name, d.vendor_id, d.device_id, d.uuid, d.pci_bus_id) for d in found]


def cuda_order(found: Sequence, order: str | None = None) -> list:
    """The NVIDIA devices of ``found`` in CUDA's ordinal order (``order``: the value of
    ``CUDA_DEVICE_ORDER``; None or ``FASTEST_FIRST`` is CUDA's default). See the module
    docstring for what is and is not reproduced."""
    found = list(found)
    return [found[i] for i in _native().cuda_order(_described(found), order)]


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
    found = list(found)
    chosen = _native().assigned_devices(_described(found), cuda, container, env.get("CUDA_DEVICE_ORDER"))
    return None if chosen is None else [found[i] for i in chosen]


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
