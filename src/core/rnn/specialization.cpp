// The shaders' specialization-constant tables (see specialization.hpp).

#include "rnn/specialization.hpp"

#include <cstring>
#include <stdexcept>
#include <string>

namespace ortops {

namespace {

// step.comp's activation constants: per direction d and slot f, g, h the function's code
// (ACT<d>_<slot>, ids 19-24), its alpha (25-30) and beta (31-36) as float bits.
void
addActivations(std::vector<Constant>& out)
{
    static const char* names[3][6] = {
        { "ACT0_F", "ACT0_G", "ACT0_H", "ACT1_F", "ACT1_G", "ACT1_H" },
        { "ALPHA0_F", "ALPHA0_G", "ALPHA0_H", "ALPHA1_F", "ALPHA1_G", "ALPHA1_H" },
        { "BETA0_F", "BETA0_G", "BETA0_H", "BETA1_F", "BETA1_G", "BETA1_H" },
    };
    const uint32_t first[3] = { 19, 25, 31 };
    const uint32_t defaults[3][3] = { { 0, 1, 1 }, { 0, 0, 0 }, { 0, 0, 0 } };
    for (int kind = 0; kind < 3; kind++) {
        for (int d = 0; d < 2; d++) {
            for (int k = 0; k < 3; k++) {
                out.push_back({ names[kind][3 * d + k], first[kind] + 3 * d + k, defaults[kind][k] });
            }
        }
    }
}

// glsl/cell.glsl's constants, which both step kernels include.
std::vector<Constant>
cellConstants()
{
    std::vector<Constant> c = {
        { "CELL", 0, 0 },         { "PASS", 1, 0 },      { "GENERAL", 4, 0 },
        { "HAS_BIAS", 5, 0 },     { "HAS_PEEP", 6, 0 },  { "HAS_CLIP", 7, 0 },
        { "CLIP_BITS", 8, 0 },    { "INPUT_FORGET", 9, 0 }, { "LBR", 10, 0 },
        { "HAS_LENS", 11, 0 },    { "HIDDEN", 12, 1 },   { "BATCH", 13, 1 },
        { "SEQ", 14, 1 },         { "DIRS", 15, 1 },     { "REVERSE0", 16, 0 },
        { "XW_OFFSET", 17, 0 },   { "STATE_OFFSET", 18, 0 },
    };
    addActivations(c);
    return c;
}

std::vector<Constant>
with(std::vector<Constant> base, std::initializer_list<Constant> more)
{
    base.insert(base.end(), more);
    return base;
}

std::vector<ShaderLayout>
makeLayouts()
{
    return {
        { "step",
          with(cellConstants(),
               { { "NB", 2, 1 }, { "UNITS", 3, 2 }, { "ROWS", 40, 8 }, { "TY", 41, 8 }, { "RPT", 42, 1 } }),
          { { "y", "TY" } } },
        { "step_batched",
          with(cellConstants(),
               { { "UPT", 40, 1 }, { "BY", 41, 8 }, { "NI", 42, 1 }, { "B32", 43, 32 },
                 { "HT_OFFSET", 44, 0 }, { "PREFETCH", 45, 1 }, { "KSPLIT", 46, 1 } }),
          { { "y", "BY" }, { "z", "KSPLIT" } } },
        { "step_tiled",
          with(cellConstants(),
               { { "UPT", 40, 1 }, { "BY", 41, 1 }, { "NI", 42, 1 }, { "B32", 43, 32 },
                 { "HT_OFFSET", 44, 0 }, { "PREFETCH", 45, 1 }, { "KSPLIT", 46, 1 }, { "TB", 47, 4 } }),
          { { "y", "BY" }, { "z", "KSPLIT" } } },
        { "step_coopmat", with(cellConstants(), { { "NBT", 40, 1 } }), {} },
        { "step_sequence", with(cellConstants(), { { "THREADS", 40, 64 }, { "NB", 41, 1 }, { "NI", 42, 1 },
                                               { "R_REGS", 43, 0 }, { "LANES", 44, 0 },
                                               { "UPT", 45, 1 } }),
          { { "x", "THREADS" } } },
        { "step_persistent", with(cellConstants(), { { "THREADS", 40, 32 }, { "UNITS_MAX", 41, 1 },
                                                 { "SPINS", 42, 1048576 }, { "WINDOW", 43, 2048 },
                                                 { "DISCOVERY", 44, 1 }, { "PIECE", 45, 0 },
                                                 { "POLL_DELAY", 46, 0 }, { "DESIGN", 47, 0 },
                                                 { "PER_INVOCATION", 48, 1 } }),
          { { "x", "THREADS" } } },
        { "input_projection",
          { { "N", 0, 1 }, { "K", 1, 1 }, { "SEQ", 2, 1 }, { "BATCH", 3, 1 }, { "LAYOUT", 4, 0 },
            { "XW_OFFSET", 5, 0 }, { "TPT", 6, 4 }, { "KT", 7, 16 }, { "STAGES", 8, 1 } },
          {} },
        { "input_projection_cpu",
          { { "N", 0, 1 }, { "K", 1, 1 }, { "SEQ", 2, 1 }, { "BATCH", 3, 1 }, { "LAYOUT", 4, 0 },
            { "XW_OFFSET", 5, 0 }, { "MR", 6, 4 }, { "THREADS", 7, 64 }, { "W_REGS", 8, 1 },
            { "LANES", 9, 8 }, { "NC", 10, 1 } },
          { { "x", "THREADS" } } },
        { "input_projection_coopmat",
          { { "N", 0, 1 }, { "K", 1, 1 }, { "SEQ", 2, 1 }, { "BATCH", 3, 1 }, { "LAYOUT", 4, 0 },
            { "XW_OFFSET", 5, 0 } },
          {} },
        { "state_init",
          { { "DIRS", 0, 1 }, { "BATCH", 1, 1 }, { "HIDDEN", 2, 1 }, { "SEQ", 3, 0 },
            { "LAYOUT", 4, 0 }, { "HAS_H0", 5, 0 }, { "HAS_C0", 6, 0 }, { "HAS_CELL", 7, 0 },
            { "STATE_OFFSET", 8, 0 }, { "TRANSPOSED", 9, 0 }, { "NI", 10, 1 }, { "B32", 11, 32 },
            { "HT_OFFSET", 12, 0 } },
          {} },
        { "output_sequence",
          { { "DIRS", 0, 1 }, { "BATCH", 1, 1 }, { "HIDDEN", 2, 1 }, { "SEQ", 3, 1 },
            { "LAYOUT", 4, 0 }, { "HAS_LENS", 5, 0 }, { "REVERSE0", 6, 0 }, { "STATE_OFFSET", 7, 0 } },
          {} },
        { "output_state",
          { { "DIRS", 0, 1 }, { "BATCH", 1, 1 }, { "HIDDEN", 2, 1 }, { "SEQ", 3, 1 },
            { "LAYOUT", 4, 0 }, { "HAS_LENS", 5, 0 }, { "CELL_STATE", 6, 0 },
            { "STATE_OFFSET", 7, 0 }, { "ZERO_EMPTY", 8, 1 } },
          {} },
        { "copy_words", {}, {} },
        { "chain_step", {}, {} },
    };
}

} // namespace

const std::vector<ShaderLayout>&
shaderLayouts()
{
    static const std::vector<ShaderLayout> layouts = makeLayouts();
    return layouts;
}

const ShaderLayout&
shaderLayout(std::string_view shader)
{
    for (const auto& l : shaderLayouts()) {
        if (l.shader == shader) {
            return l;
        }
    }
    throw std::invalid_argument("ortops: no shader " + std::string(shader) + ".comp");
}

std::vector<uint32_t>
pack(std::string_view shader, const Constants& values)
{
    const ShaderLayout& layout = shaderLayout(shader);
    for (const auto& [name, value] : values) {
        bool known = false;
        for (const auto& c : layout.constants) {
            known = known || c.name == name;
        }
        if (!known) {
            throw std::invalid_argument(std::string(shader) + ".comp has no specialization constant " +
                                        std::string(name));
        }
    }
    if (layout.constants.empty()) {
        return {};
    }
    uint32_t top = 0;
    for (const auto& c : layout.constants) {
        top = std::max(top, c.id);
    }
    std::vector<uint32_t> words(top + 1, 0);
    for (const auto& c : layout.constants) {
        uint32_t v = c.defaultValue;
        for (const auto& [name, value] : values) {
            if (name == c.name) {
                v = value;
            }
        }
        words[c.id] = v;
    }
    return words;
}

uint32_t
floatBits(float x)
{
    uint32_t u;
    std::memcpy(&u, &x, 4);
    return u;
}

} // namespace ortops
