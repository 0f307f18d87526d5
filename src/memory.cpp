// Host access to mapped memory, Kompute tensors as buffers, host-cached readback buffers
// (see memory.hpp).

#include "memory.hpp"

#include "hostcopy.hpp"

#include <algorithm>
#include <cstring>
#include <stdexcept>
#include <vector>

namespace py = pybind11;

namespace ortops {

namespace {

bool
contiguousBuffer(const py::buffer_info& info)
{
    py::ssize_t expected = info.itemsize;
    for (py::ssize_t i = info.ndim - 1; i >= 0; i--) {
        if (info.shape[i] != 1 && info.strides[i] != expected) {
            return false;
        }
        expected *= info.shape[i];
    }
    return true;
}

} // namespace

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
Memory::write(py::buffer data, uint64_t offset)
{
    py::buffer_info info = data.request();
    uint64_t n = static_cast<uint64_t>(info.size) * info.itemsize;
    char* dst = range(offset, n, "write");
    if (!contiguousBuffer(info)) {
        throw std::invalid_argument("ortops: buffer write needs C-contiguous data");
    }
    {
        py::gil_scoped_release release;
        hostcopy::copy(dst, info.ptr, n);
    }
    flush();
}

void
Memory::read(py::buffer out, uint64_t offset)
{
    py::buffer_info info = out.request(true);
    uint64_t n = static_cast<uint64_t>(info.size) * info.itemsize;
    const char* src = range(offset, n, "read");
    if (!contiguousBuffer(info)) {
        throw std::invalid_argument("ortops: buffer read needs a C-contiguous target");
    }
    invalidate();
    py::gil_scoped_release release;
    hostcopy::copy(info.ptr, src, n);
}

// ---------------------------------------------------------------- host to host

void
hostCopy(py::buffer dst, py::buffer src)
{
    py::buffer_info to = dst.request(true);
    py::buffer_info from = src.request();
    uint64_t n = static_cast<uint64_t>(from.size) * from.itemsize;
    uint64_t m = static_cast<uint64_t>(to.size) * to.itemsize;
    if (n != m) {
        throw std::invalid_argument("ortops: host_copy needs equal sizes, got " + std::to_string(n) +
                                    " bytes into " + std::to_string(m));
    }
    if (!contiguousBuffer(to) || !contiguousBuffer(from)) {
        throw std::invalid_argument("ortops: host_copy needs C-contiguous source and target");
    }
    py::gil_scoped_release release;
    hostcopy::copy(to.ptr, from.ptr, n);
}

void
hostNarrowToHalf(py::buffer dst, py::buffer src)
{
    py::buffer_info to = dst.request(true);
    py::buffer_info from = src.request();
    if (from.itemsize != 4 || from.format != "f" || to.itemsize != 2 || to.format != "e") {
        throw std::invalid_argument("ortops: narrow_to_half needs a float32 source and a float16 "
                                    "target, got " + from.format + " into " + to.format);
    }
    if (from.size != to.size) {
        throw std::invalid_argument("ortops: narrow_to_half needs as many values in the target, got " +
                                    std::to_string(from.size) + " into " + std::to_string(to.size));
    }
    if (!contiguousBuffer(to) || !contiguousBuffer(from)) {
        throw std::invalid_argument("ortops: narrow_to_half needs C-contiguous source and target");
    }
    py::gil_scoped_release release;
    hostcopy::narrowToHalf(static_cast<uint16_t*>(to.ptr), static_cast<const float*>(from.ptr),
                           static_cast<size_t>(from.size));
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
