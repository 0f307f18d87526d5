"""Device identity and the scheduler's GPUs: ``device=`` by UUID, and CUDA_VISIBLE_DEVICES /
NVIDIA_VISIBLE_DEVICES mapped to Vulkan devices (ortops.visible), on made-up device lists
(no Vulkan device needed: listed in tests/conftest.py NO_DEVICE), plus the real devices'
identity fields (gpu)."""

from __future__ import annotations

import dataclasses
import re

import pytest

from ortops import device as device_mod
from _cases import fake_device
from ortops.visible import assigned_device, assigned_devices, cuda_order


def _gpu(index, uuid, pci, name="NVIDIA H200", **kw):
    return fake_device(index=index, name=name, uuid=uuid, pci_bus_id=pci, **kw)


# Enumerated by the driver in an order that is NOT the PCI order (it need not be), plus a
# CPU device that CUDA never sees.
UA = "8c1b2f3e-1111-2222-3333-444455556666"
UB = "8c1b9a00-aaaa-bbbb-cccc-ddddeeeeffff"
UC = "0f0e0d0c-0000-1111-2222-333344445555"
FOUND = [
    _gpu(0, UB, "0000:9a:00.0"),
    fake_device(index=1, name="llvmpipe", type="cpu", vendor_id=0x10005, device_id=0,
                uuid="6d657361-3232-2e33-2e36-000000000000"),
    _gpu(2, UA, "0000:18:00.0"),
    _gpu(3, UC, "0001:05:00.0"),
]
A, LAVA, B, C = FOUND[2], FOUND[1], FOUND[0], FOUND[3]   # PCI order: A (0000:18), B (0000:9a), C (0001:05)


def test_cuda_order_is_pci_order_for_one_model():
    assert cuda_order(FOUND) == [A, B, C]
    assert cuda_order(FOUND, "PCI_BUS_ID") == [A, B, C]


def test_cuda_order_refuses_to_guess_fastest_first_across_models():
    mixed = [FOUND[0], dataclasses.replace(FOUND[2], name="NVIDIA L4", device_id=0x27b8)]
    with pytest.raises(ValueError, match="FASTEST_FIRST.*CUDA_DEVICE_ORDER=PCI_BUS_ID"):
        cuda_order(mixed)
    assert [d.uuid for d in cuda_order(mixed, "pci_bus_id")] == [UA, UB]
    with pytest.raises(ValueError, match="CUDA_DEVICE_ORDER must be"):
        cuda_order(FOUND, "SLOWEST_FIRST")


@pytest.mark.parametrize("env, want", [
    ({}, None),
    ({"CUDA_VISIBLE_DEVICES": ""}, []),
    ({"CUDA_VISIBLE_DEVICES": "0"}, ["A"]),
    ({"CUDA_VISIBLE_DEVICES": "1"}, ["B"]),
    ({"CUDA_VISIBLE_DEVICES": "2,0"}, ["C", "A"]),
    ({"CUDA_VISIBLE_DEVICES": " 1 , 1 "}, ["B"]),
    ({"CUDA_VISIBLE_DEVICES": f"GPU-{UB}"}, ["B"]),
    ({"CUDA_VISIBLE_DEVICES": "GPU-8c1b9"}, ["B"]),                    # a unique prefix, as CUDA allows
    ({"CUDA_VISIBLE_DEVICES": UC.upper()}, ["C"]),                     # no GPU-, upper case
    ({"CUDA_VISIBLE_DEVICES": f"GPU-{UC},0"}, ["C", "A"]),
    ({"NVIDIA_VISIBLE_DEVICES": "all"}, ["A", "B", "C"]),
    ({"NVIDIA_VISIBLE_DEVICES": "none"}, []),
    ({"NVIDIA_VISIBLE_DEVICES": "void"}, []),
    ({"NVIDIA_VISIBLE_DEVICES": "2"}, ["C"]),                          # host index, all GPUs seen
    ({"NVIDIA_VISIBLE_DEVICES": "0,1,2"}, ["A", "B", "C"]),            # inside the container
    ({"NVIDIA_VISIBLE_DEVICES": f"GPU-{UB},GPU-{UC}", "CUDA_VISIBLE_DEVICES": "1"}, ["C"]),
    ({"CUDA_VISIBLE_DEVICES": "0", "CUDA_DEVICE_ORDER": "PCI_BUS_ID"}, ["A"]),
])
def test_assigned_devices_maps_scheduler_variables(env, want):
    names = {id(A): "A", id(B): "B", id(C): "C"}
    got = assigned_devices(env, FOUND)
    assert (None if got is None else [names[id(d)] for d in got]) == want


@pytest.mark.parametrize("value, message", [
    ("MIG-5f2a1c3e-aaaa-bbbb-cccc-dddddddddddd", "MIG instance .*no Vulkan device of its own"),
    ("3", r"names GPU 3, but 3 NVIDIA Vulkan device\(s\) are visible: 0: .*GPU-8c1b2f3e"),
    ("-1", "names GPU -1"),
    ("GPU-8c1b", r"matches 2 NVIDIA Vulkan device\(s\)"),          # ambiguous prefix
    ("GPU-ffff", r"matches no NVIDIA Vulkan device\(s\)"),
    ("GPU-6d657361", "matches no NVIDIA Vulkan"),                  # lavapipe's UUID is not a GPU
])
def test_bad_assignment_is_a_clear_error(value, message):
    with pytest.raises(ValueError, match=f"CUDA_VISIBLE_DEVICES.*{message}"):
        assigned_devices({"CUDA_VISIBLE_DEVICES": value}, FOUND)


def test_no_nvidia_device_means_index_is_an_error_and_empty_is_none():
    cpu_only = [LAVA]
    with pytest.raises(ValueError, match=r"names GPU 0, but 0 NVIDIA Vulkan device\(s\) are visible: none"):
        assigned_devices({"CUDA_VISIBLE_DEVICES": "0"}, cpu_only)
    assert assigned_devices({"CUDA_VISIBLE_DEVICES": ""}, cpu_only) == []
    assert assigned_device({"CUDA_VISIBLE_DEVICES": ""}, cpu_only) is None
    assert assigned_device({}, cpu_only) is None


def test_assigned_device_by_rank():
    env = {"CUDA_VISIBLE_DEVICES": "2,1"}
    assert assigned_device(env, FOUND) is C
    assert assigned_device(env, FOUND, rank=1) is B
    with pytest.raises(ValueError, match="rank 2 asked for, but only 2 GPU"):
        assigned_device(env, FOUND, rank=2)


def test_missing_pci_bus_id_with_several_gpus_asks_for_uuids():
    no_pci = [dataclasses.replace(d, pci_bus_id=None) for d in (A, B)]
    with pytest.raises(ValueError, match="no PCI bus id.*give UUIDs"):
        assigned_devices({"CUDA_VISIBLE_DEVICES": "0"}, no_pci)
    assert assigned_devices({"CUDA_VISIBLE_DEVICES": f"GPU-{UA}"}, [A]) == [A]   # one GPU: no order needed


@pytest.mark.parametrize("spec, want", [
    (UA, "A"), (f"GPU-{UA}", "A"), (f"gpu-{UA.upper()}", "A"), ("8c1b2f3e", "A"),
    ("8c1b9a00-aa", "B"), ("GPU-0f", "C"), (UA.replace("-", ""), "A"),
])
def test_select_by_uuid_or_unique_prefix(monkeypatch, spec, want):
    monkeypatch.setattr(device_mod, "_devices_cache", list(FOUND))
    assert device_mod.select(spec) is {"A": A, "B": B, "C": C}[want]


def test_ambiguous_or_unknown_uuid_lists_the_devices(monkeypatch):
    monkeypatch.setattr(device_mod, "_devices_cache", list(FOUND))
    with pytest.raises(ValueError, match=r"'GPU-8c1b' matches 2 Vulkan devices.*uuid 8c1b9a00"):
        device_mod.select("GPU-8c1b")
    with pytest.raises(ValueError, match=r"no Vulkan device has a UUID starting with 'deadbeef'.*llvmpipe .* uuid 6d657361"):
        device_mod.select("deadbeef")
    # Short hex without GPU- is a name fragment, not a UUID: "NVIDIA" contains no "cafe".
    with pytest.raises(ValueError, match="no Vulkan device matches 'cafe'.*a UUID or its prefix"):
        device_mod.select("cafe")
    # Not hex: a name fragment, the first device whose name holds it.
    assert device_mod.select("H200") is B


def test_real_devices_report_a_uuid():
    """Every enumerated device reports its 16-byte UUID in the canonical form; selecting by it
    (and by GPU-<it>) finds that device again; the PCI bus id, where reported, has lspci's form."""
    found = device_mod.devices()
    assert found
    for d in found:
        assert re.fullmatch(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}", d.uuid), d.uuid
        assert d.pci_bus_id is None or re.fullmatch(r"[0-9a-f]{4}:[0-9a-f]{2}:[0-9a-f]{2}\.[0-7]", d.pci_bus_id)
        assert d.luid is None or re.fullmatch(r"[0-9a-f]{16}", d.luid)
        if sum(x.uuid == d.uuid for x in found) == 1:
            assert device_mod.select(d.uuid) == d
            assert device_mod.select("GPU-" + d.uuid) == d
        assert f"uuid                      {d.uuid}" in d.describe()
