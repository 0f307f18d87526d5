"""Give a SPIR-V module SignedZeroInfNanPreserve for every float width it uses (a build step).

glslang's spirv_execution_mode (GL_EXT_spirv_intrinsics) keeps one declaration per execution
mode, so a shader cannot declare SignedZeroInfNanPreserve for both 16- and 32-bit floats: the
second replaces the first (glslang 13.1.1). A shader with float16 values
(glsl/input_projection_coopmat.comp) declares the 32-bit one through glsl/common.glsl, and this
step copies that instruction for each other width of an OpTypeFloat in the module. Usage:
python spirv_float_modes.py IN.spv OUT.spv
"""

from __future__ import annotations

import struct
import sys

OP_EXECUTION_MODE = 16
OP_TYPE_FLOAT = 22
MODE = 4461      # SignedZeroInfNanPreserve


def add_modes(code: bytes) -> bytes:
    words = list(struct.unpack(f"<{len(code) // 4}I", code))
    i, widths, declared, at = 5, set(), {}, None
    while i < len(words):
        count, opcode = words[i] >> 16, words[i] & 0xFFFF
        if opcode == OP_TYPE_FLOAT:
            widths.add(words[i + 2])
        elif opcode == OP_EXECUTION_MODE and words[i + 2] == MODE:
            declared[words[i + 3]] = words[i + 1]      # width -> entry point
            at = i + count
        i += count
    if at is None:
        raise SystemExit("spirv_float_modes: the module declares no SignedZeroInfNanPreserve "
                         "(include glsl/common.glsl)")
    entry = next(iter(declared.values()))
    extra = [w for width in sorted(widths - set(declared))
             for w in ((4 << 16) | OP_EXECUTION_MODE, entry, MODE, width)]
    return struct.pack(f"<{len(words) + len(extra)}I", *(words[:at] + extra + words[at:]))


if __name__ == "__main__":
    src, dst = sys.argv[1:3]
    with open(src, "rb") as f:
        code = f.read()
    with open(dst, "wb") as f:
        f.write(add_modes(code))
