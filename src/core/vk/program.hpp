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
//
// A pipeline the table does not hold yet is made on a thread of its own, begun by the
// constructor, and the descriptor set with it (it needs the pipeline's set layout): a plan
// makes all its programs and then records them (rnn/recording.cpp), so its shaders compile at
// the same time instead of one after another. Why: compiling is most of a layer's first run,
// and a cold driver cache costs seconds (issue 44: on the H200, placement "auto"'s first
// calibration took 2.1 s cold and 0.6 s warm). Whatever needs the pipeline waits for it
// (wait(), called by Sequence::dispatch and record); an error making it is rethrown there, the
// same exception as before, so a plan's recording still fails with it. The destructor waits
// too, so a program dropped unrecorded leaves no work behind.
#pragma once

#include <kompute/Kompute.hpp>

#include <future>
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

    // Wait until the pipeline and the descriptor set are made; rethrows the error that making
    // them raised (every call). Thread-safe.
    void wait() const;

    // Bind the pipeline and the buffers, push `push` (pushWords words) and dispatch x*y*z
    // workgroups. Waits first (wait()), then reads only what creation wrote: programs are
    // recorded from several threads.
    void record(const vk::CommandBuffer& cb, const std::vector<uint32_t>& push, uint32_t x, uint32_t y,
                uint32_t z) const;

  private:
    // Take the pipeline, allocate the set and write the buffers into it: in the constructor,
    // or on the making thread (then read only after mMaking is ready).
    void bind(std::shared_ptr<const Pipeline> made);

    std::shared_ptr<const Pipeline> mPipeline;
    vk::DescriptorPool mPool;
    vk::DescriptorSet mSet;
    // The thread making the pipeline and set, where the table did not hold the pipeline;
    // invalid where the constructor made them. get() and wait() are const: safe from several
    // threads at once.
    std::shared_future<void> mMaking;
};

} // namespace ortops
