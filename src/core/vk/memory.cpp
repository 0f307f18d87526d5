// Host access to mapped memory, Kompute tensors as buffers, host-cached readback buffers
// (see memory.hpp).

#include "vk/memory.hpp"

#include "vk/hostcopy.hpp"

#include <algorithm>
#include <cstring>
#include <stdexcept>
#include <vector>

namespace ortops {

// ---------------------------------------------------------------- Memory

char*
Memory::range(uint64_t offset, uint64_t n, const char* what) const
{
    if (!mapped()) {
        throw std::runtime_error(std::string("ortops: cannot ") + what +
                                 " a device-only (storage) buffer from the host");
    }
    if (offset > bytes || n > bytes - offset) {
        throw std::out_of_range(std::string("ortops: ") + what + " of " + std::to_string(n) +
                                " bytes at offset " + std::to_string(offset) +
                                " is outside a buffer of " + std::to_string(bytes) + " bytes");
    }
    return static_cast<char*>(mapped()) + offset;
}

void
Memory::write(const void* data, uint64_t n, uint64_t offset)
{
    char* dst = range(offset, n, "write");
    hostcopy::copy(dst, data, n);
    flush();
}

void
Memory::read(void* out, uint64_t n, uint64_t offset)
{
    const char* src = range(offset, n, "read");
    invalidate();
    hostcopy::copy(out, src, n);
}

namespace {

constexpr uint64_t POOL_PIECE = 1u << 20;

} // namespace

void
copyPieces(const std::vector<Piece>& pieces, char* base, bool toBase)
{
    for (const Piece& p : pieces) {
        char* at = base + p.offset;
        if (p.host == nullptr) {   // writes zeros, reads nothing
            if (toBase) {
                std::memset(at, 0, p.bytes);
            }
            continue;
        }
        void* dst = toBase ? static_cast<void*>(at) : const_cast<void*>(p.host);
        const void* src = toBase ? p.host : at;
        if (p.bytes >= POOL_PIECE) {
            hostcopy::copy(dst, src, p.bytes);
        } else {
            std::memcpy(dst, src, p.bytes);
        }
    }
}

void
Memory::writePieces(const std::vector<Piece>& pieces)
{
    for (const Piece& p : pieces) {
        range(p.offset, p.bytes, "write");   // every piece checked before any is copied
    }
    copyPieces(pieces, static_cast<char*>(mapped()), true);
    flush();
}

void
Memory::readPieces(const std::vector<Piece>& pieces)
{
    for (const Piece& p : pieces) {
        range(p.offset, p.bytes, "read");
    }
    invalidate();
    copyPieces(pieces, static_cast<char*>(mapped()), false);
}

// ---------------------------------------------------------------- Buffer

Buffer::Buffer(std::shared_ptr<Context> c, uint64_t nbytes, const std::string& kind)
  : ctx(std::move(c))
{
    bytes = nbytes;
    kp::Tensor::TensorTypes type;
    if (kind == "device") {
        type = kp::Tensor::TensorTypes::eDevice;
    } else if (kind == "storage") {
        type = kp::Tensor::TensorTypes::eStorage;
    } else {
        throw std::invalid_argument("ortops: buffer kind must be device or storage, got " + kind);
    }
    // Vulkan forbids zero-sized buffers; empty tensors get one word nobody reads.
    uint64_t words = std::max<uint64_t>(1, (nbytes + 3) / 4);
    if (words > 0xFFFFFFFFull) {
        throw std::length_error("ortops: buffer of " + std::to_string(nbytes) +
                                " bytes exceeds Kompute's 2^32-element tensor size");
    }
    // Kompute copies its initial data into the mapped memory; zeros also make every
    // fresh buffer deterministic.
    std::vector<uint32_t> zeros(type == kp::Tensor::TensorTypes::eStorage ? 1 : words, 0);
    tensor = std::make_shared<kp::Tensor>(ctx->physical,
                                          ctx->device,
                                          zeros.data(),
                                          static_cast<uint32_t>(words),
                                          4,
                                          kp::Tensor::TensorDataTypes::eUnsignedInt,
                                          type);
}

void*
Buffer::mapped() const
{
    // Kompute maps the staging memory of device tensors.
    return tensor->tensorType() == kp::Tensor::TensorTypes::eStorage ? nullptr
                                                                      : tensor->rawData();
}

vk::Buffer
Buffer::handle() const
{
    return tensor->constructDescriptorBufferInfo().buffer;
}

// ---------------------------------------------------------------- HostBuffer

HostBuffer::HostBuffer(std::shared_ptr<Context> c, uint64_t nbytes, bool needCoherent)
  : ctx(std::move(c))
{
    bytes = nbytes;
    uint64_t size = std::max<uint64_t>(4, (nbytes + 3) / 4 * 4);
    vk::BufferCreateInfo info(
      {}, size, vk::BufferUsageFlagBits::eTransferSrc | vk::BufferUsageFlagBits::eTransferDst);
    buffer = ctx->device->createBuffer(info);
    auto reqs = ctx->device->getBufferMemoryRequirements(buffer);
    auto props = ctx->physical->getMemoryProperties();
    using M = vk::MemoryPropertyFlagBits;
    std::vector<vk::MemoryPropertyFlags> wanted = {
        M::eHostVisible | M::eHostCached | M::eHostCoherent,
    };
    if (!needCoherent) {
        wanted.push_back(M::eHostVisible | M::eHostCached);
    }
    wanted.push_back(M::eHostVisible | M::eHostCoherent);
    int chosen = -1;
    for (const auto& flags : wanted) {
        for (uint32_t i = 0; i < props.memoryTypeCount && chosen < 0; i++) {
            if ((reqs.memoryTypeBits & (1u << i)) &&
                (props.memoryTypes[i].propertyFlags & flags) == flags) {
                chosen = static_cast<int>(i);
                coherent =
                  static_cast<bool>(props.memoryTypes[i].propertyFlags & M::eHostCoherent);
            }
        }
        if (chosen >= 0) {
            break;
        }
    }
    if (chosen < 0) {
        ctx->device->destroyBuffer(buffer);
        throw std::runtime_error("ortops: no host-visible memory type for a readback buffer");
    }
    memory = ctx->device->allocateMemory(vk::MemoryAllocateInfo(reqs.size, chosen));
    ctx->device->bindBufferMemory(buffer, memory, 0);
    pointer = ctx->device->mapMemory(memory, 0, VK_WHOLE_SIZE);
}

HostBuffer::~HostBuffer()
{
    ctx->device->unmapMemory(memory);
    ctx->device->destroyBuffer(buffer);
    ctx->device->freeMemory(memory);
}

void
HostBuffer::invalidate()
{
    if (!coherent) {
        ctx->device->invalidateMappedMemoryRanges(vk::MappedMemoryRange(memory, 0, VK_WHOLE_SIZE));
    }
}

void
HostBuffer::flush()
{
    if (!coherent) {
        ctx->device->flushMappedMemoryRanges(vk::MappedMemoryRange(memory, 0, VK_WHOLE_SIZE));
    }
}

} // namespace ortops
