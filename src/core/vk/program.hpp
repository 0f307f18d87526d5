// A compute pipeline with its buffers bound: one SPIR-V shader, its descriptor set (the
// buffers, in binding order), specialization constants and the number of push-constant words
// each dispatch passes.
//
// The pipeline and its layouts come from the context's pipeline table (pipelines.hpp), shared
// with every program of the same shader, specialization, binding count and push words; the
// descriptor set is the program's own. The buffers are Kompute's tensors (memory.hpp); Program
// keeps them alive as long as the descriptor set that names them and checks at creation that
// they come from its context. Dispatches are recorded by Sequence::dispatch (OpDispatch,
// through record), which checks the push words against pushWords.
#pragma once

#include <kompute/Kompute.hpp>

#include <memory>
#include <string>
#include <vector>

#include "vk/context.hpp"
#include "vk/memory.hpp"
#include "vk/pipelines.hpp"

namespace ortops {

struct Program
{
    std::shared_ptr<Context> ctx;
    std::shared_ptr<const Pipeline> pipeline;
    uint32_t pushWords;
    // Keeps the buffers alive as long as the descriptor set that names them.
    std::vector<std::shared_ptr<Buffer>> buffers;

    // spirv: the shader's bytes, a non-empty multiple of 4.
    Program(std::shared_ptr<Context> c,
            const std::string& spirv,
            const std::vector<std::shared_ptr<Buffer>>& buffers,
            const std::vector<uint32_t>& specialization,
            uint32_t pushWords);
    ~Program();
    Program(const Program&) = delete;
    Program& operator=(const Program&) = delete;

    // Bind the pipeline and the buffers, push `push` (pushWords words) and dispatch x*y*z
    // workgroups. Reads only what creation wrote: programs are recorded from several threads.
    void record(const vk::CommandBuffer& cb, const std::vector<uint32_t>& push, uint32_t x, uint32_t y,
                uint32_t z) const;

  private:
    vk::DescriptorPool mPool;
    vk::DescriptorSet mSet;
};

} // namespace ortops
