// Named specialization constants: for each shader in glsl/, its constants by name, as the
// shader declares them (`layout(constant_id = N) const uint NAME = default;`). A program's
// constants are given by name and packed here into the id-indexed list Vulkan takes (ids a
// caller leaves out take the shader's default; ids no constant uses, 0), so no plan writes a
// list by position. tests/test_specialization.py checks ortops.specialization's copy against
// every constant_id in glsl/, tests/test_native_tables.py this table against that copy.
#pragma once

#include <cstdint>
#include <string_view>
#include <utility>
#include <vector>

namespace ortops {

struct Constant
{
    std::string_view name;
    uint32_t id;
    uint32_t defaultValue;
};

struct ShaderLayout
{
    std::string_view shader;
    std::vector<Constant> constants;
    // dimension ("x", "y", "z") -> the constant whose id local_size_<dim>_id names
    std::vector<std::pair<std::string_view, std::string_view>> localSize;
};

// Every shader's layout.
const std::vector<ShaderLayout>&
shaderLayouts();

// A shader's layout; std::invalid_argument for an unknown shader.
const ShaderLayout&
shaderLayout(std::string_view shader);

using Constants = std::vector<std::pair<std::string_view, uint32_t>>;

// The id-indexed words of `values` for `shader`; a name the shader does not declare throws
// std::invalid_argument naming it.
std::vector<uint32_t>
pack(std::string_view shader, const Constants& values);

// The float32 bit pattern of x, for a float passed as a uint constant.
uint32_t
floatBits(float x);

} // namespace ortops
