// Programs: SPIR-V checked and handed to a kp::Algorithm (see program.hpp).

#include "program.hpp"

#include <cstring>
#include <stdexcept>

namespace ortops {

Program::Program(std::shared_ptr<Context> c,
                 const std::string& code,
                 const std::vector<std::shared_ptr<Buffer>>& bound,
                 const std::vector<uint32_t>& specialization,
                 uint32_t push)
  : ctx(std::move(c))
  , pushWords(push)
{
    if (code.empty() || code.size() % 4 != 0) {
        throw std::invalid_argument("ortops: SPIR-V must be a non-empty multiple of 4 bytes");
    }
    std::vector<uint32_t> spirv(code.size() / 4);
    std::memcpy(spirv.data(), code.data(), code.size());
    std::vector<std::shared_ptr<kp::Tensor>> tensors;
    for (const auto& b : bound) {
        if (b->ctx != ctx) {
            throw std::invalid_argument("ortops: a program's buffers must come from its context");
        }
        tensors.push_back(b->tensor);
    }
    buffers = bound;
    std::vector<uint32_t> zeros(pushWords, 0);
    algorithm = std::make_shared<kp::Algorithm>(
      ctx->device, tensors, spirv, kp::Workgroup({ 1, 1, 1 }), specialization, zeros);
}

} // namespace ortops
