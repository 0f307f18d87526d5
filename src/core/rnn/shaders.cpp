// Looking up the embedded SPIR-V (see shaders.hpp).

#include "rnn/shaders.hpp"

#include <cstddef>
#include <map>
#include <mutex>
#include <stdexcept>

namespace ortops {

struct EmbeddedSpirv
{
    const char* name;
    const unsigned char* data;
    size_t size;
};
extern const EmbeddedSpirv EMBEDDED_SPIRV[];

bool
isFloatPass(std::string_view shader)
{
    for (std::string_view p : { "input_projection", "input_projection_cpu", "state_init", "step", "step_batched", "step_tiled", "step_sequence",
                                "step_persistent", "output_sequence", "output_state" }) {
        if (shader == p) {
            return true;
        }
    }
    return false;
}

const std::string&
spirv(std::string_view shader, bool float16, Mode mode)
{
    static const std::map<std::string, std::string> table = [] {
        std::map<std::string, std::string> t;
        for (const EmbeddedSpirv* e = EMBEDDED_SPIRV; e->name; ++e) {
            t.emplace(e->name, std::string(reinterpret_cast<const char*>(e->data), e->size));
        }
        return t;
    }();
    std::string name(shader);
    name += float16 ? "_f16" : "_f32";
    if (mode == Mode::Exact && isFloatPass(shader)) {
        name += "_exact";
    }
    auto it = table.find(name);
    if (it == table.end()) {
        throw std::runtime_error("ortops: shader " + name + ".spv was not built into the native core");
    }
    return it->second;
}

} // namespace ortops
