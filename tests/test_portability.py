"""Portability enumeration (VK_KHR_portability_enumeration): enabled exactly where the loader
offers it, so that MoltenVK and other portability implementations are listed; conformant
devices (lavapipe, NVIDIA) are not portability implementations and nothing else changes."""

import dataclasses

import ortops
from ortops import device
from ortops.tools import cli

PORTABILITY = "VK_KHR_portability_enumeration"


def _native():
    return device._native()


def test_instance_enables_portability_enumeration_where_offered():
    vk = _native()
    vk.enumerate_devices()  # creates (and destroys) an instance without validation
    enabled = vk.enabled_instance_extensions()
    offered = PORTABILITY in vk.available_instance_extensions()
    assert (PORTABILITY in enabled) == offered, (enabled, offered)
    # Nothing else is enabled on the listing instance.
    assert [e for e in enabled if e != PORTABILITY] == []


def test_context_instance_adds_only_what_validation_needs():
    vk = _native()
    chosen = device.select()
    ctx = vk.Context(chosen.index, device.validation_enabled(), 1)
    enabled = vk.enabled_instance_extensions()
    del ctx
    offered = PORTABILITY in vk.available_instance_extensions()
    want = ({PORTABILITY} if offered else set()) | (
        {"VK_EXT_debug_utils"} if device.validation_enabled() else set())
    assert set(enabled) == want


def test_conformant_devices_are_not_portability_implementations():
    found = ortops.devices()
    assert found
    for d in found:
        assert isinstance(d.portability, bool)
        if d.driver in ("llvmpipe", "NVIDIA") or "llvmpipe" in d.name:
            assert d.portability is False, d
            assert "portability" not in str(d)


def test_devices_command_says_whether_a_device_is_a_portability_implementation(capsys):
    assert cli.main(["devices"]) == 0
    out = capsys.readouterr().out
    assert out.count("portability subset        no") == sum(not d.portability for d in ortops.devices())


def test_a_portability_device_is_named_so():
    d = ortops.devices()[0]
    moltenvk = dataclasses.replace(d, portability=True)
    assert "portability implementation" in str(moltenvk)
    assert "portability subset        yes" in moltenvk.describe()
