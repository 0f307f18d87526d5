// Device memory the host and the shaders see: storage buffers (Kompute tensors) and host-side
// readback buffers of our own.
//
// Memory is anything a transfer command can name (OpCopy) and, where it is mapped, the host
// can write into or read from: the checks on a host access (mapped at all, range inside the
// buffer, C-contiguous data) live here, and the copies run on the copy threads (hostcopy.hpp). Buffer wraps a kp::Tensor of 32-bit words; HostBuffer is
// host-cached memory Kompute does not offer (see its comment), also used for the sequences'
// completion word.
#pragma once

#include <kompute/Kompute.hpp>

#include <memory>
#include <vector>
#include <string>

#include "vk/context.hpp"

namespace ortops {

// One piece of a scattered host access: `bytes` between host address `host` and byte
// `offset` of the mapped memory. For a write, a null `host` writes zeros.
struct Piece
{
    const void* host = nullptr;
    uint64_t offset = 0;
    uint64_t bytes = 0;
};

// Copy each piece between its host address and `base` + its offset: into `base` (`toBase`; a
// null host address writes zeros) or out of it (a null host address reads nothing), one after
// another on the calling thread, a piece of a MiB or more over the copy threads. Nothing is checked:
// Memory's writePieces and readPieces check every piece against the mapped range first.
void
copyPieces(const std::vector<Piece>& pieces, char* base, bool toBase);

struct Memory
{
    uint64_t bytes = 0;
    virtual ~Memory() = default;
    virtual vk::Buffer handle() const = 0;
    // Host address of the buffer's mapped memory, or nullptr for device-only memory.
    virtual void* mapped() const = 0;
    // Make device writes visible to the host / host writes visible to the device, where the
    // memory is not coherent.
    virtual void invalidate() {}
    virtual void flush() {}

    // Copy n bytes into the mapped memory at a byte offset (on the copy threads,
    // hostcopy.hpp). The Python door checks contiguity and releases the GIL around it.
    void write(const void* data, uint64_t n, uint64_t offset);
    // Copy n bytes of the mapped memory at a byte offset out.
    void read(void* out, uint64_t n, uint64_t offset);
    // The same for many pieces (a coalesced run's requests, coalesce.hpp): one flush or
    // invalidate for all of them; pieces of 1 MiB or more go to the copy threads, smaller ones
    // are copied here (the threads' hand-off costs more than a small copy).
    void writePieces(const std::vector<Piece>& pieces);
    void readPieces(const std::vector<Piece>& pieces);

  private:
    char* range(uint64_t offset, uint64_t n, const char* what) const;
};

// A storage buffer of 32-bit words. "device" buffers are device-local with a host-visible
// staging twin (inputs and outputs: the host writes/reads the staging memory, the sequence
// copies); "storage" buffers are device-local only (weights, scratch).
struct Buffer : Memory
{
    std::shared_ptr<Context> ctx;
    std::shared_ptr<kp::Tensor> tensor;

    Buffer(std::shared_ptr<Context> c, uint64_t nbytes, const std::string& kind);

    void* mapped() const override;
    vk::Buffer handle() const override;
};

// Host memory the device copies results into. Kompute's staging memory is the first
// host-visible coherent type, which on discrete GPUs is uncached (write-combined): fine for
// the host to write inputs into, but reading results out of it runs at a fraction of memory
// bandwidth (measured on the H200: tens of ms for 50 MB). Readback buffers prefer
// host-cached memory, invalidated before each read when it is not coherent.
struct HostBuffer : Memory
{
    std::shared_ptr<Context> ctx;
    vk::Buffer buffer;
    vk::DeviceMemory memory;
    void* pointer = nullptr;
    bool coherent = false;

    // needCoherent: only host-coherent memory (the completion word, polled without an
    // invalidate).
    HostBuffer(std::shared_ptr<Context> c, uint64_t nbytes, bool needCoherent);
    ~HostBuffer() override;
    HostBuffer(const HostBuffer&) = delete;
    HostBuffer& operator=(const HostBuffer&) = delete;

    vk::Buffer handle() const override { return buffer; }
    void* mapped() const override { return pointer; }
    void invalidate() override;
    void flush() override;

    // The first word, read and written atomically (the completion word of OpFinish).
    uint32_t word() const
    {
        return __atomic_load_n(static_cast<uint32_t*>(pointer), __ATOMIC_ACQUIRE);
    }
    void setWord(uint32_t v) { __atomic_store_n(static_cast<uint32_t*>(pointer), v, __ATOMIC_RELEASE); }
};

} // namespace ortops
