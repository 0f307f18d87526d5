"""The float controls the kernels declare, read from the installed SPIR-V, and the device check.

Every compute shader that does float arithmetic must declare the execution mode
SignedZeroInfNanPreserve for the width of each float type it uses (glsl/common.glsl): without
it a Vulkan compiler may assume no NaN, no Inf and no signed zero, and NVIDIA's turned an LSTM's
clip into a NaN-dropping min/max. Lavapipe keeps NaN either way, so no run on it can show a
missing declaration: these tests read the binaries themselves (pure Python: the SPIR-V words).
They need the installed package, not a Vulkan device.
"""

from __future__ import annotations

import dataclasses
import struct
from importlib import resources

import pytest

MAGIC = 0x07230203
OP_EXTENSION = 10
OP_ENTRY_POINT = 15
OP_EXECUTION_MODE = 16
OP_CAPABILITY = 17
OP_TYPE_FLOAT = 22
EXECUTION_MODEL_GLCOMPUTE = 5
MODE_SIGNED_ZERO_INF_NAN_PRESERVE = 4461
CAPABILITY_SIGNED_ZERO_INF_NAN_PRESERVE = 4466

# The passes that compute in float (every one that includes glsl/common.glsl), and those that
# only move 32-bit words (no float type, so nothing to declare and nothing asked of a device).
from ortops.modes import FLOAT_PASSES  # noqa: E402 (the package's one list)
WORD_PASSES = {"copy_words", "chain_step"}
# Matrix-hardware passes of mode "fast" (ortops.fast): float16 only, float16 and float32 values.
from ortops.fast import COOPMAT_PASSES  # noqa: E402


def _string(words) -> str:
    raw = struct.pack(f"<{len(words)}I", *words)
    return raw.split(b"\0", 1)[0].decode()


def parse(code: bytes) -> dict:
    """What a SPIR-V module declares: compute entry points, execution modes per entry point,
    capabilities, extensions and float widths."""
    assert len(code) % 4 == 0 and len(code) >= 20, "not a SPIR-V module"
    words = struct.unpack(f"<{len(code) // 4}I", code)
    assert words[0] == MAGIC, f"bad magic {words[0]:#x}"
    info = {"entry_points": set(), "modes": {}, "capabilities": set(), "extensions": set(),
            "float_widths": set()}
    i = 5
    while i < len(words):
        count, opcode = words[i] >> 16, words[i] & 0xFFFF
        assert count > 0, f"zero word count at word {i}"
        operands = words[i + 1:i + count]
        if opcode == OP_ENTRY_POINT and operands[0] == EXECUTION_MODEL_GLCOMPUTE:
            info["entry_points"].add(operands[1])
        elif opcode == OP_EXECUTION_MODE:
            info["modes"].setdefault(operands[0], set()).add(tuple(operands[1:]))
        elif opcode == OP_CAPABILITY:
            info["capabilities"].add(operands[0])
        elif opcode == OP_EXTENSION:
            info["extensions"].add(_string(operands))
        elif opcode == OP_TYPE_FLOAT:
            info["float_widths"].add(operands[1])
        i += count
    assert i == len(words), "truncated instruction"
    return info


def installed_shaders() -> dict:
    folder = resources.files("ortops") / "spirv"
    return {p.name: p.read_bytes() for p in folder.iterdir() if p.name.endswith(".spv")}


def test_every_installed_shader_is_known():
    # Guards the checks below: they see every pass in both precisions, and a new pass must be
    # classified here (float arithmetic or words only) before it can be installed.
    names = set(installed_shaders())
    expected = {f"{p}_{prec}.spv" for p in FLOAT_PASSES | WORD_PASSES for prec in ("f32", "f16")}
    # Exact mode (ortops.modes) has its own variant of every float pass.
    expected |= {f"{p}_{prec}_exact.spv" for p in FLOAT_PASSES for prec in ("f32", "f16")}
    expected |= {f"{p}_f16.spv" for p in COOPMAT_PASSES}
    assert names == expected


@pytest.mark.parametrize("name", sorted(installed_shaders()))
def test_float_shaders_declare_signed_zero_inf_nan_preserve(name):
    info = parse(installed_shaders()[name])
    assert info["entry_points"], f"{name}: no compute entry point"
    if name.rsplit("_", 1)[0] in WORD_PASSES:
        assert not info["float_widths"], f"{name}: a words-only pass uses a float type"
        return
    # All arithmetic is float32, float16 tensors included (unpackHalf2x16 / packHalf2x16),
    # but in the matrix-hardware passes, whose operands are float16 values.
    widths = {16, 32} if name.rsplit("_", 1)[0] in COOPMAT_PASSES else {32}
    assert info["float_widths"] == widths, f"{name}: float widths {sorted(info['float_widths'])}"
    for entry in info["entry_points"]:
        for width in info["float_widths"]:
            modes = info["modes"].get(entry, set())
            assert (MODE_SIGNED_ZERO_INF_NAN_PRESERVE, width) in modes, (
                f"{name}: entry point %{entry} lacks OpExecutionMode SignedZeroInfNanPreserve "
                f"{width}")
    assert CAPABILITY_SIGNED_ZERO_INF_NAN_PRESERVE in info["capabilities"]
    assert "SPV_KHR_float_controls" in info["extensions"]


def test_parser_finds_a_missing_declaration():
    # Guards the test above: step_f32.spv with the mode's literal changed to another mode
    # (DenormPreserve) no longer declares SignedZeroInfNanPreserve, and the parser sees that.
    code = bytearray(installed_shaders()["step_f32.spv"])
    words = list(struct.unpack(f"<{len(code) // 4}I", bytes(code)))
    i, changed = 5, False
    while i < len(words):
        count, opcode = words[i] >> 16, words[i] & 0xFFFF
        if opcode == OP_EXECUTION_MODE and words[i + 2] == MODE_SIGNED_ZERO_INF_NAN_PRESERVE:
            words[i + 2] = 4459   # DenormPreserve: any other mode
            changed = True
        i += count
    assert changed
    info = parse(struct.pack(f"<{len(words)}I", *words))
    entry = next(iter(info["entry_points"]))
    assert (MODE_SIGNED_ZERO_INF_NAN_PRESERVE, 32) not in info["modes"][entry]


def test_require_ieee_names_device_and_feature():
    from _cases import fake_device
    from ortops.device import UnsupportedDeviceError, require_ieee

    weak = fake_device(index=3, name="Some GPU", nan_preserve_float32=False)
    with pytest.raises(UnsupportedDeviceError) as info:
        require_ieee(weak)
    assert isinstance(info.value, RuntimeError)
    assert "[3] Some GPU" in str(info.value)
    assert "shaderSignedZeroInfNanPreserveFloat32" in str(info.value)
    require_ieee(dataclasses.replace(weak, nan_preserve_float32=True))   # accepted
