// A recorded run: operations (Kompute's tensor syncs and ours, operations.hpp) recorded once
// into one command buffer, then submitted and waited for as often as needed.
//
// Why not kp::Sequence: its eval() creates a fence before every submit and destroys it after
// the wait, which on NVIDIA costs more host time than a whole 80-step layer takes on the GPU
// (an empty run went from about 0.56 to 0.04 ms with this class). This class keeps
// one command buffer and one fence for its lifetime, and waits by polling a host-coherent
// word the last command writes (OpFinish) before checking the fence (only on a GPU, see
// Context::pollCompletion). Everything recorded is still a Kompute operation; only the
// submission is ours.
//
// The recording methods check their arguments against the state they depend on (the
// program's push-word count, the context, the device limits cached in the Context, the
// buffers' sizes) before anything is recorded. Submission takes the queue's lock around
// vkQueueSubmit; eval() holds the sequence's run lock from submit to the end of the wait; a
// lost device is reported through Context::fail / checkAlive as DeviceLostError, and the
// destructor never throws.
#pragma once

#include <kompute/Kompute.hpp>

#include <memory>
#include <mutex>
#include <vector>

#include "vk/context.hpp"
#include "vk/memory.hpp"
#include "vk/program.hpp"

namespace ortops {

class Sequence
{
  public:
    // timestamps: the number of timestamp queries (0: none).
    Sequence(std::shared_ptr<Context> c, uint32_t timestamps);
    ~Sequence();
    Sequence(const Sequence&) = delete;
    Sequence& operator=(const Sequence&) = delete;

    // ---- recording

    // Copy each buffer's staging memory to its device memory (kp::OpTensorSyncDevice).
    void upload(const std::vector<std::shared_ptr<Buffer>>& buffers);
    // Copy each buffer's device memory to its staging memory (kp::OpTensorSyncLocal, which
    // orders shader writes before its copy and its copy before host reads).
    void download(const std::vector<std::shared_ptr<Buffer>>& buffers);
    // One dispatch of x * y * z workgroups; push holds exactly program->pushWords words.
    // Waits for the program's pipeline first (Program::wait). A zero count records nothing.
    void dispatch(std::shared_ptr<Program> program,
                  uint32_t x,
                  uint32_t y,
                  uint32_t z,
                  std::vector<uint32_t> push);
    // A global barrier between two scopes, "compute" or "transfer" (OpBarrier).
    void barrier(const std::string& src, const std::string& dst);
    // Copy size bytes between two buffers' device memory; size 0 records nothing.
    void copy(std::shared_ptr<Memory> src,
              std::shared_ptr<Memory> dst,
              uint64_t srcOffset,
              uint64_t dstOffset,
              uint64_t size);
    // Record the end-of-run marker eval() polls for (lower completion latency).
    void finish();
    // Write GPU timestamp `index` (< the count given at creation).
    void timestamp(uint32_t index);

    // ---- running

    // Submit the recorded commands and wait for them (one run at a time).
    void eval();
    // How long a wait may take before the device counts as lost (default: no limit; the
    // persistent step kernel's runs have one, rnn/persistent.hpp).
    void setFenceTimeout(uint64_t ns) { fenceTimeoutNs = ns; }
    // Run once; microseconds in submit, until the marker lands, and in the fence wait.
    std::vector<double> profileEval();
    // Timestamps of the last run, in nanoseconds.
    std::vector<double> timestamps();

  private:
    void record(std::shared_ptr<kp::OpBase> op);
    void end();
    void submit();
    void wait();

    std::shared_ptr<Context> ctx;
    Queue* queue = nullptr;
    // One run at a time: submit, wait and the completion flag belong to a single caller. The
    // Python side gives each concurrent run its own plan; this lock keeps misuse safe.
    std::mutex runLock;
    vk::CommandPool pool;
    vk::CommandBuffer cb;
    vk::Fence fence;
    vk::QueryPool queries;
    std::vector<std::shared_ptr<kp::OpBase>> ops;
    std::shared_ptr<HostBuffer> doneFlag;
    uint64_t fenceTimeoutNs = UINT64_MAX;
    uint32_t timestampCount = 0;
    uint32_t timestampsWritten = 0;
    bool recording = false;
    bool recorded = false;
    bool pending = false;
    bool finishRecorded = false;
};

} // namespace ortops
