"""Device listing and selection."""

import pytest

import ortops
from ortops import device


def test_devices_lists_at_least_one_with_limits():
    found = ortops.devices()
    assert found, "no Vulkan device (lavapipe expected in CI)"
    for d in found:
        assert d.type in ("discrete", "integrated", "virtual", "cpu", "other")
        assert d.max_storage_buffer_range > 0
        assert d.max_workgroup_invocations >= 128
        assert len(d.max_workgroup_count) == 3 and min(d.max_workgroup_count) >= 65535
        assert d.subgroup_size >= 1
        assert d.timestamp_period_ns > 0


def test_default_prefers_gpus_over_cpu(monkeypatch):
    monkeypatch.delenv("ORTOPS_DEVICE", raising=False)
    found = ortops.devices()
    chosen = device.select()
    order = ("discrete", "integrated", "virtual", "cpu", "other")
    assert order.index(chosen.type) == min(order.index(d.type) for d in found)


def test_select_by_index_type_name_and_env(monkeypatch):
    first = ortops.devices()[0]
    assert device.select(first.index) == first
    assert device.select(str(first.index)) == first
    assert device.select(first.type) .type == first.type
    assert device.select(first.name[:6]).name.startswith(first.name[:6])
    monkeypatch.setenv("ORTOPS_DEVICE", str(first.index))
    assert device.select() == first


def test_unknown_device_is_a_clear_error(monkeypatch):
    with pytest.raises(ValueError, match="no Vulkan device matches 'no-such-gpu'"):
        device.select("no-such-gpu")
    with pytest.raises(ValueError, match="index 99"):
        device.select(99)


def test_no_device_names_the_package(monkeypatch):
    monkeypatch.setattr(device, "_devices_cache", [])
    with pytest.raises(RuntimeError, match="mesa-vulkan-drivers"):
        device.select()
