// Writes ortops/_tables.py at build time from the native core's tables (src/core/config/cells.hpp,
// activations.hpp, specialization.cpp): the one source of what a cell is, which activations
// exist and each shader's named constants. The Python package reads this module (ortops.cells,
// ortops.activations, ortops.specialization) in pure Python, so the float64 reference and the
// argument checks need no Vulkan loader, and no second copy of a table is written by hand.
#include <cstdio>
#include <string>
#include <string_view>

#include "config/activations.hpp"
#include "config/cells.hpp"
#include "config/types.hpp"
#include "rnn/specialization.hpp"

namespace {

std::string
str(std::string_view s)
{
    return "\"" + std::string(s) + "\"";
}

template<typename Array>
std::string
tuple(const Array& a, uint32_t n)
{
    std::string out = "(";
    for (uint32_t i = 0; i < n; i++) {
        out += str(a[i]) + ", ";
    }
    return out + ")";
}

std::string
number(float x)
{
    char buf[64];
    std::snprintf(buf, sizeof buf, "%.9g", static_cast<double>(x));
    return buf;
}

} // namespace

int
main()
{
    using namespace ortops;
    std::printf("# Generated at build time by src/tools/gen_tables.cpp from the native core's tables:\n"
                "# do not edit (edit src/core/config/cells.hpp, activations.hpp, specialization.cpp).\n\n");
    std::printf("#: (name, code, gate_order, inputs, outputs, slots, default_activations, input_forget,\n"
                "#:  linear_before_reset, extra state planes with linear_before_reset 0 and 1) per cell,\n"
                "#:  in the order LSTM, GRU, RNN.\n");
    std::printf("CELLS = (\n");
    for (const Cell& c : CELLS) {
        std::printf("    (%s, %u, %s, %s, %s, %s, %s, %s, %s, (%u, %u)),\n", str(c.name).c_str(), c.code,
                    tuple(c.gateOrder, c.gates).c_str(), tuple(c.inputs, c.inputCount).c_str(),
                    tuple(c.outputs, c.outputCount).c_str(), tuple(c.slots, c.slotCount).c_str(),
                    tuple(c.defaultActivations, c.slotCount).c_str(), c.inputForget ? "True" : "False",
                    c.linearBeforeReset ? "True" : "False", c.extraStatePlanes(false), c.extraStatePlanes(true));
    }
    std::printf(")\n\n");
    std::printf("#: (name, takes_alpha, takes_beta, default_alpha, default_beta); the index is the shaders' code.\n");
    std::printf("ACTIVATIONS = (\n");
    for (const auto& a : ACTIVATIONS) {
        std::printf("    (%s, %s, %s, %s, %s),\n", str(a.name).c_str(), a.takesAlpha ? "True" : "False",
                    a.takesBeta ? "True" : "False", number(a.defaultAlpha).c_str(), number(a.defaultBeta).c_str());
    }
    std::printf(")\n\n");
    std::printf("#: shader -> ({constant: (constant_id, default)}, {dimension: constant of its local size}).\n");
    std::printf("LAYOUTS = {\n");
    for (const auto& l : shaderLayouts()) {
        std::string constants = "{";
        for (const auto& c : l.constants) {
            constants += str(c.name) + ": (" + std::to_string(c.id) + ", " + std::to_string(c.defaultValue) + "), ";
        }
        constants += "}";
        std::string local = "{";
        for (const auto& [dim, name] : l.localSize) {
            local += str(dim) + ": " + str(name) + ", ";
        }
        local += "}";
        std::printf("    %s: (%s, %s),\n", str(l.shader).c_str(), constants.c_str(), local.c_str());
    }
    std::printf("}\n\n");
    std::printf("#: The vocabularies (src/core/config/types.hpp): what each may be named, in the core's order.\n");
    auto names = [](const auto& values, auto name) {
        std::string out = "(";
        for (const auto& v : values) {
            out += str(name(v)) + ", ";
        }
        return out + ")";
    };
    std::string versions = "(";
    for (int v : SUPPORTED_VERSIONS) {
        versions += std::to_string(v) + ", ";
    }
    versions += ")";
    std::string ops = "(";
    for (const Cell& c : CELLS) {
        ops += str(c.name) + ", ";
    }
    ops += ")";
    std::printf("VOCABULARIES = {\n");
    std::printf("    \"mode\": %s,\n", names(MODES, modeName).c_str());
    std::printf("    \"placement\": %s,\n", names(PLACEMENTS, placementName).c_str());
    std::printf("    \"dtype\": %s,\n", names(LAYER_TYPES, elementTypeName).c_str());
    std::printf("    \"direction\": %s,\n", names(DIRECTIONS, directionName).c_str());
    std::printf("    \"op\": %s,\n", ops.c_str());
    std::printf("    \"supported_versions\": %s,\n", versions.c_str());
    std::printf("}\n");
    return 0;
}
