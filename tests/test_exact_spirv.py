"""Exact mode's kernels, read from the installed SPIR-V: only correctly rounded float arithmetic.

Vulkan requires add, subtract and multiply to be correctly rounded, and nothing else a
kernel might use for floats (division, exp, log, tanh, half conversions are each device's
choice), and lets a compiler fuse a multiply with an add unless the result is decorated
NoContraction. So every exact binary (``*_exact.spv``, ortops.modes) must: decorate every
OpFAdd, OpFSub and OpFMul NoContraction; hold no other float arithmetic instruction (no
OpFDiv, OpFRem, OpFMod, OpFNegate, vector or matrix products); and call no extended
instruction but integer ones (no Exp, Log, Tanh, Fma, InverseSqrt, Pack/UnpackHalf2x16, ...).
Pure Python on the words; needs the installed package, not a device.
"""

from __future__ import annotations

import struct

import pytest

from test_float_controls import FLOAT_PASSES, installed_shaders

OP_EXT_INST_IMPORT = 11
OP_EXT_INST = 12
OP_DECORATE = 71
DECORATION_NO_CONTRACTION = 42
CONTRACTIBLE = {129: "OpFAdd", 131: "OpFSub", 133: "OpFMul"}
FORBIDDEN = {127: "OpFNegate", 136: "OpFDiv", 140: "OpFRem", 141: "OpFMod",
             142: "OpVectorTimesScalar", 143: "OpMatrixTimesScalar", 144: "OpVectorTimesMatrix",
             145: "OpMatrixTimesVector", 146: "OpMatrixTimesMatrix", 147: "OpOuterProduct",
             148: "OpDot", 115: "OpQuantizeToF16", 114: "OpFConvert"}
# GLSL.std.450 instructions on integers only: SMin, UMin, SMax, UMax, FindILsb, FindSMsb, FindUMsb.
INTEGER_EXT = {39, 38, 42, 41, 73, 74, 75}


def scan(code: bytes) -> dict:
    """Per opcode of interest, the result ids; the ids decorated NoContraction; the
    GLSL.std.450 instruction numbers called."""
    words = struct.unpack(f"<{len(code) // 4}I", code)
    found = {"contractible": [], "forbidden": [], "no_contraction": set(), "ext": set()}
    i = 5
    while i < len(words):
        count, opcode = words[i] >> 16, words[i] & 0xFFFF
        ops = words[i + 1:i + count]
        if opcode in CONTRACTIBLE:
            found["contractible"].append((CONTRACTIBLE[opcode], ops[1]))
        elif opcode in FORBIDDEN:
            found["forbidden"].append(FORBIDDEN[opcode])
        elif opcode == OP_DECORATE and ops[1] == DECORATION_NO_CONTRACTION:
            found["no_contraction"].add(ops[0])
        elif opcode == OP_EXT_INST:
            found["ext"].add(ops[3])
        i += count
    return found


EXACT = sorted(f"{p}_{prec}_exact.spv" for p in FLOAT_PASSES for prec in ("f32", "f16"))


@pytest.mark.parametrize("name", EXACT)
def test_exact_binary_has_only_correctly_rounded_arithmetic(name):
    found = scan(installed_shaders()[name])
    loose = [(op, rid) for op, rid in found["contractible"] if rid not in found["no_contraction"]]
    assert not loose, f"{name}: float arithmetic without NoContraction: {loose[:5]}"
    assert not found["forbidden"], f"{name}: {sorted(set(found['forbidden']))}"
    assert found["ext"] <= INTEGER_EXT, f"{name}: GLSL.std.450 {sorted(found['ext'] - INTEGER_EXT)}"


def test_exact_step_does_arithmetic():
    # Guards the test above: the exact step kernel has float arithmetic to check.
    assert len(scan(installed_shaders()["step_f32_exact.spv"])["contractible"]) >= 3


def test_scan_sees_what_the_deterministic_kernels_use():
    # Guards the scanner: the default kernels use division and exp (GLSL.std.450 Exp = 27),
    # half packing, and leave products undecorated; the scan finds each.
    found = scan(installed_shaders()["step_f32.spv"])
    assert "OpFDiv" in found["forbidden"]
    assert 27 in found["ext"]
    assert any(rid not in found["no_contraction"] for _, rid in found["contractible"])
    assert found["ext"] - INTEGER_EXT
    assert scan(installed_shaders()["output_sequence_f16.spv"])["ext"] - INTEGER_EXT
