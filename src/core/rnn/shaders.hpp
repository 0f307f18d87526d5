// The compiled SPIR-V of every pass (glsl/<pass>.comp, compiled by CMake for float32 and
// float16, and for the float passes also in exact mode), embedded in the native core at build
// time (cmake/embed_spirv.cmake): neither door reads a shader file at run time.
#pragma once

#include <string>
#include <string_view>

#include "config/types.hpp"

namespace ortops {

// Whether a pass computes in float, so that it has an exact-mode variant (docs/exact.md).
bool
isFloatPass(std::string_view shader);

// The SPIR-V of `shader` for float16 or float32 tensors in `mode` (Mode::Fast runs the
// deterministic binaries, its matrix kernel is a shader of its own). std::runtime_error naming
// the file when it was not built.
const std::string&
spirv(std::string_view shader, bool float16, Mode mode);

} // namespace ortops
