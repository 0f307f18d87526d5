// A compute pipeline with its buffers bound: one SPIR-V shader, its descriptor set (the
// buffers, in binding order), specialization constants and the number of push-constant words
// each dispatch passes.
//
// The pipeline, layout and descriptor set are Kompute's (kp::Algorithm); Program keeps the
// buffers alive as long as the descriptor set that names them and checks at creation that they
// come from its context. Dispatches are recorded by Sequence::dispatch (OpDispatch), which
// checks the push words against pushWords.
#pragma once

#include <kompute/Kompute.hpp>

#include <memory>
#include <string>
#include <vector>

#include "context.hpp"
#include "memory.hpp"

namespace ortops {

struct Program
{
    std::shared_ptr<Context> ctx;
    std::shared_ptr<kp::Algorithm> algorithm;
    uint32_t pushWords;
    // Keeps the buffers alive as long as the descriptor set that names them.
    std::vector<std::shared_ptr<Buffer>> buffers;

    // spirv: the shader's bytes, a non-empty multiple of 4.
    Program(std::shared_ptr<Context> c,
            const std::string& spirv,
            const std::vector<std::shared_ptr<Buffer>>& buffers,
            const std::vector<uint32_t>& specialization,
            uint32_t pushWords);
};

} // namespace ortops
