// ortops._vk: the native half of ortops, a thin pybind11 binding of Kompute's C++ API.
//
// Why a binding of our own rather than PyPI's kp module: kp 0.9.0's Python module records only
// transfer-write -> shader-read barriers, per tensor, inside OpAlgoDispatch, and does not expose
// OpMemoryBarrier. One step's dispatch is then not ordered before the next step's (a write-after-
// write / read-after-write hazard that lavapipe hides because it runs dispatches one at a time).
// Binding Kompute's C++ classes ourselves lets us
//   * record execution+memory barriers with full access masks (OpBarrier below, one global
//     VkMemoryBarrier rather than one buffer barrier per tensor: the recurrent loop orders every
//     buffer at once, and a global barrier is what the Vulkan spec recommends for that);
//   * dispatch without kp's per-tensor transfer barriers (OpDispatch), so a step costs one
//     dispatch plus one barrier and nothing else;
//   * write GPU timestamps exactly where we want them (OpTimestamp), not after every op;
//   * create the Vulkan instance and device ourselves, so that the Khronos validation layer
//     with synchronization validation can be switched on per process and its messages
//     collected here (take_messages) for the tests to fail on.
// Tensors (kp::Tensor), pipelines (kp::Algorithm) and command recording/submission
// (kp::Sequence) remain Kompute's.

#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <kompute/Kompute.hpp>

#include <cstring>
#include <memory>
#include <mutex>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>
#include <atomic>
#include <chrono>
#include <thread>

namespace py = pybind11;

namespace {

// ---------------------------------------------------------------- validation messages

std::mutex g_messages_mutex;
std::vector<std::string> g_messages;

VKAPI_ATTR VkBool32 VKAPI_CALL
onValidationMessage(VkDebugUtilsMessageSeverityFlagBitsEXT severity,
                    VkDebugUtilsMessageTypeFlagsEXT /*types*/,
                    const VkDebugUtilsMessengerCallbackDataEXT* data,
                    void* /*user*/)
{
    // Info and verbose messages are chatter (loader, layer start-up); warnings and errors
    // are what synchronization validation reports hazards as.
    if (severity >= VK_DEBUG_UTILS_MESSAGE_SEVERITY_WARNING_BIT_EXT) {
        std::string text = data->pMessageIdName ? data->pMessageIdName : "";
        text += ": ";
        text += data->pMessage ? data->pMessage : "";
        std::lock_guard<std::mutex> lock(g_messages_mutex);
        g_messages.push_back(std::move(text));
    }
    return VK_FALSE;
}

std::vector<std::string>
takeMessages()
{
    std::lock_guard<std::mutex> lock(g_messages_mutex);
    std::vector<std::string> out;
    out.swap(g_messages);
    return out;
}

bool
layerAvailable(const char* name)
{
    for (const auto& layer : vk::enumerateInstanceLayerProperties()) {
        if (std::strcmp(layer.layerName, name) == 0) {
            return true;
        }
    }
    return false;
}

const char* kValidationLayer = "VK_LAYER_KHRONOS_validation";

// ---------------------------------------------------------------- instance and device

vk::Instance
createInstance(bool validation, VkDebugUtilsMessengerCreateInfoEXT* messengerInfo)
{
    // Vulkan 1.2 for VkPhysicalDeviceDriverProperties and Vulkan 1.1 subgroup properties;
    // lavapipe (Debian 12) and every current GPU driver offer it.
    vk::ApplicationInfo app("ortops", 1, "ortops", 1, VK_API_VERSION_1_2);
    std::vector<const char*> layers;
    std::vector<const char*> extensions;
    vk::ValidationFeatureEnableEXT syncValidation =
      vk::ValidationFeatureEnableEXT::eSynchronizationValidation;
    vk::ValidationFeaturesEXT features(syncValidation, {});
    vk::InstanceCreateInfo info({}, &app);
    if (validation) {
        if (!layerAvailable(kValidationLayer)) {
            throw std::runtime_error(
              "ortops: Vulkan validation was requested (ORTOPS_VALIDATION) but the layer "
              "VK_LAYER_KHRONOS_validation is not installed (Debian package: "
              "vulkan-validationlayers)");
        }
        layers.push_back(kValidationLayer);
        extensions.push_back(VK_EXT_DEBUG_UTILS_EXTENSION_NAME);
        // Synchronization validation is off by default in the layer; ask for it here as well
        // as through vk_layer_settings.txt so that the switch works without the settings file.
        features.pNext = messengerInfo;
        info.pNext = &features;
    }
    info.setPEnabledLayerNames(layers);
    info.setPEnabledExtensionNames(extensions);
    return vk::createInstance(info);
}

std::string
deviceTypeName(vk::PhysicalDeviceType type)
{
    switch (type) {
        case vk::PhysicalDeviceType::eDiscreteGpu:
            return "discrete";
        case vk::PhysicalDeviceType::eIntegratedGpu:
            return "integrated";
        case vk::PhysicalDeviceType::eVirtualGpu:
            return "virtual";
        case vk::PhysicalDeviceType::eCpu:
            return "cpu";
        default:
            return "other";
    }
}

int
computeQueueFamily(const vk::PhysicalDevice& device)
{
    auto families = device.getQueueFamilyProperties();
    for (uint32_t i = 0; i < families.size(); i++) {
        if (families[i].queueFlags & vk::QueueFlagBits::eCompute) {
            return static_cast<int>(i);
        }
    }
    return -1;
}

py::dict
describe(const vk::PhysicalDevice& device, uint32_t index)
{
    auto chain = device.getProperties2<vk::PhysicalDeviceProperties2,
                                       vk::PhysicalDeviceDriverProperties,
                                       vk::PhysicalDeviceSubgroupProperties,
                                       vk::PhysicalDeviceFloatControlsProperties>();
    const auto& props = chain.get<vk::PhysicalDeviceProperties2>().properties;
    const auto& driver = chain.get<vk::PhysicalDeviceDriverProperties>();
    const auto& subgroup = chain.get<vk::PhysicalDeviceSubgroupProperties>();
    const auto& floats = chain.get<vk::PhysicalDeviceFloatControlsProperties>();
    auto features = device.getFeatures2<vk::PhysicalDeviceFeatures2,
                                        vk::PhysicalDeviceShaderFloat16Int8Features,
                                        vk::PhysicalDevice16BitStorageFeatures>();
    int family = computeQueueFamily(device);
    uint32_t timestampBits = 0;
    if (family >= 0) {
        timestampBits = device.getQueueFamilyProperties()[family].timestampValidBits;
    }
    const auto& limits = props.limits;
    py::dict d;
    d["index"] = index;
    d["name"] = std::string(props.deviceName.data());
    d["type"] = deviceTypeName(props.deviceType);
    d["vendor_id"] = props.vendorID;
    d["device_id"] = props.deviceID;
    d["api_version"] = std::to_string(VK_VERSION_MAJOR(props.apiVersion)) + "." +
                       std::to_string(VK_VERSION_MINOR(props.apiVersion)) + "." +
                       std::to_string(VK_VERSION_PATCH(props.apiVersion));
    d["driver"] = std::string(driver.driverName.data());
    d["driver_info"] = std::string(driver.driverInfo.data());
    d["driver_version"] = props.driverVersion;
    d["max_storage_buffer_range"] = limits.maxStorageBufferRange;
    d["max_workgroup_size"] = py::make_tuple(limits.maxComputeWorkGroupSize[0],
                                             limits.maxComputeWorkGroupSize[1],
                                             limits.maxComputeWorkGroupSize[2]);
    d["max_workgroup_invocations"] = limits.maxComputeWorkGroupInvocations;
    d["max_workgroup_count"] = py::make_tuple(limits.maxComputeWorkGroupCount[0],
                                              limits.maxComputeWorkGroupCount[1],
                                              limits.maxComputeWorkGroupCount[2]);
    d["max_shared_memory"] = limits.maxComputeSharedMemorySize;
    d["max_push_constants_size"] = limits.maxPushConstantsSize;
    d["subgroup_size"] = subgroup.subgroupSize;
    d["float16"] = static_cast<bool>(
      features.get<vk::PhysicalDeviceShaderFloat16Int8Features>().shaderFloat16);
    d["storage16"] = static_cast<bool>(
      features.get<vk::PhysicalDevice16BitStorageFeatures>().storageBuffer16BitAccess);
    d["float64"] =
      static_cast<bool>(features.get<vk::PhysicalDeviceFeatures2>().features.shaderFloat64);
    // Float controls (Vulkan 1.2): whether a shader may declare that NaN, Inf and the sign of
    // zero are preserved (SignedZeroInfNanPreserve) and how denormals are treated. Without
    // the declaration a compiler may assume no NaN (NVIDIA turns a compare-based clamp into a
    // NaN-dropping min/max).
    d["nan_preserve_float16"] = static_cast<bool>(floats.shaderSignedZeroInfNanPreserveFloat16);
    d["nan_preserve_float32"] = static_cast<bool>(floats.shaderSignedZeroInfNanPreserveFloat32);
    d["denorm_preserve_float32"] = static_cast<bool>(floats.shaderDenormPreserveFloat32);
    d["denorm_flush_float32"] = static_cast<bool>(floats.shaderDenormFlushToZeroFloat32);
    d["timestamp_period_ns"] = limits.timestampPeriod;
    d["timestamps"] = timestampBits > 0 && limits.timestampComputeAndGraphics;
    return d;
}

std::vector<py::dict>
enumerateDevices()
{
    std::vector<py::dict> out;
    vk::Instance instance;
    try {
        instance = createInstance(false, nullptr);
    } catch (const vk::SystemError&) {
        // No ICD at all (VK_ERROR_INCOMPATIBLE_DRIVER): report no devices, the Python side
        // says which package provides one.
        return out;
    }
    auto devices = instance.enumeratePhysicalDevices();
    for (uint32_t i = 0; i < devices.size(); i++) {
        if (computeQueueFamily(devices[i]) >= 0) {
            out.push_back(describe(devices[i], i));
        }
    }
    instance.destroy();
    return out;
}

// The device was lost (or a submission failed in a way that leaves it unusable). Raised as
// ortops._vk.DeviceLostError; every later submission on the same context raises it too, and a
// new context (a new session or layer, see ortops.device.context) starts afresh.
struct DeviceLostError : std::runtime_error
{
    using std::runtime_error::runtime_error;
};

// One VkQueue and the lock that makes its use externally synchronised, as Vulkan requires
// (vkQueueSubmit from two threads on one queue is undefined; on the H200 it lost the device).
struct Queue
{
    vk::Queue queue;
    std::mutex lock;
};

// Sequences are spread round robin over the context's queues (as many as the Python side asks
// for, ortops.device.max_queues, and the family offers: NVIDIA 16, lavapipe 1). On one queue
// every pipeline barrier of a run also waits for the work submitted before it, so concurrent
// runs execute one after another on the GPU; several queues let them overlap where the
// hardware runs queues at once. On the H200 they did not pay (ortops.device.DEFAULT_QUEUES).

// Owns the instance and device. Every Kompute object made from it holds a shared_ptr to
// this, so the VkDevice outlives the buffers, pipelines and command pools made on it.
struct Context
{
    vk::Instance instance;
    VkDebugUtilsMessengerEXT messenger = VK_NULL_HANDLE;
    std::shared_ptr<vk::PhysicalDevice> physical;
    std::shared_ptr<vk::Device> device;
    std::vector<std::unique_ptr<Queue>> queues;
    std::atomic<uint32_t> nextQueue{ 0 };
    std::atomic<bool> lost{ false };
    std::string lostReason;
    std::mutex lostLock;
    uint32_t family = 0;
    float timestampPeriod = 1.0f;
    vk::PhysicalDeviceLimits limits;
    // Whether a run's end is found by polling a host-visible word before the fence wait
    // (Sequence::wait). Not on a CPU implementation: there the spinning thread takes a core
    // from the threads that execute the shaders (lavapipe on 2 cores).
    bool pollCompletion = true;
    bool validation = false;

    Context(uint32_t index, bool withValidation, uint32_t maxQueues)
      : validation(withValidation)
    {
        VkDebugUtilsMessengerCreateInfoEXT messengerInfo{};
        messengerInfo.sType = VK_STRUCTURE_TYPE_DEBUG_UTILS_MESSENGER_CREATE_INFO_EXT;
        messengerInfo.messageSeverity = VK_DEBUG_UTILS_MESSAGE_SEVERITY_WARNING_BIT_EXT |
                                        VK_DEBUG_UTILS_MESSAGE_SEVERITY_ERROR_BIT_EXT;
        messengerInfo.messageType = VK_DEBUG_UTILS_MESSAGE_TYPE_GENERAL_BIT_EXT |
                                    VK_DEBUG_UTILS_MESSAGE_TYPE_VALIDATION_BIT_EXT |
                                    VK_DEBUG_UTILS_MESSAGE_TYPE_PERFORMANCE_BIT_EXT;
        messengerInfo.pfnUserCallback = onValidationMessage;
        instance = createInstance(validation, &messengerInfo);
        if (validation) {
            auto create = reinterpret_cast<PFN_vkCreateDebugUtilsMessengerEXT>(
              instance.getProcAddr("vkCreateDebugUtilsMessengerEXT"));
            if (create) {
                create(instance, &messengerInfo, nullptr, &messenger);
            }
        }
        auto devices = instance.enumeratePhysicalDevices();
        if (index >= devices.size()) {
            destroyInstance();
            throw std::out_of_range("ortops: no Vulkan device with index " +
                                    std::to_string(index));
        }
        physical = std::make_shared<vk::PhysicalDevice>(devices[index]);
        int f = computeQueueFamily(*physical);
        if (f < 0) {
            destroyInstance();
            throw std::runtime_error("ortops: Vulkan device has no compute queue");
        }
        family = static_cast<uint32_t>(f);
        auto properties = physical->getProperties();
        limits = properties.limits;
        pollCompletion = properties.deviceType != vk::PhysicalDeviceType::eCpu;
        timestampPeriod = limits.timestampPeriod;
        uint32_t count =
          std::max(1u, std::min(maxQueues, physical->getQueueFamilyProperties()[family].queueCount));
        std::vector<float> priorities(count, 1.0f);
        vk::DeviceQueueCreateInfo queueInfo({}, family, count, priorities.data());
        vk::DeviceCreateInfo deviceInfo({}, queueInfo);
        device = std::make_shared<vk::Device>(physical->createDevice(deviceInfo));
        for (uint32_t i = 0; i < count; i++) {
            queues.push_back(std::make_unique<Queue>());
            queues.back()->queue = device->getQueue(family, i);
        }
    }

    // The queue a new sequence submits to.
    Queue& pickQueue() { return *queues[nextQueue++ % queues.size()]; }

    // Record that the device is unusable and raise DeviceLostError for the caller's run.
    [[noreturn]] void fail(const std::string& what)
    {
        {
            std::lock_guard<std::mutex> guard(lostLock);
            if (!lost) {
                lostReason = what;
                lost = true;
            }
        }
        throw DeviceLostError("ortops: " + what + "; the Vulkan device is lost for this context: "
                              "create a new session or layer to continue");
    }

    void checkAlive()
    {
        if (lost) {
            std::lock_guard<std::mutex> guard(lostLock);
            throw DeviceLostError("ortops: the Vulkan device was lost earlier (" + lostReason +
                                  "); create a new session or layer to continue");
        }
    }

    void destroyInstance()
    {
        if (messenger != VK_NULL_HANDLE) {
            auto destroy = reinterpret_cast<PFN_vkDestroyDebugUtilsMessengerEXT>(
              instance.getProcAddr("vkDestroyDebugUtilsMessengerEXT"));
            if (destroy) {
                destroy(instance, messenger, nullptr);
            }
            messenger = VK_NULL_HANDLE;
        }
        instance.destroy();
    }

    ~Context()
    {
        if (device) {
            try {
                device->waitIdle();  // fails on a lost device; destroying is still allowed
            } catch (const std::exception&) {
            }
            device->destroy();
        }
        destroyInstance();
    }
};

// ---------------------------------------------------------------- buffers

// Anything a transfer command can name: Kompute tensors and our host-side readback buffers.
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

    char* range(uint64_t offset, uint64_t n, const char* what) const
    {
        if (!mapped()) {
            throw std::runtime_error(std::string("ortops: cannot ") + what +
                                     " a device-only (storage) buffer from the host");
        }
        if (offset > bytes || n > bytes - offset) {
            throw std::out_of_range(std::string("ortops: ") + what + " of " + std::to_string(n) +
                                    " bytes at offset " + std::to_string(offset) +
                                    " is outside a buffer of " + std::to_string(bytes) +
                                    " bytes");
        }
        return static_cast<char*>(mapped()) + offset;
    }

    void write(py::buffer data, uint64_t offset)
    {
        py::buffer_info info = data.request();
        uint64_t n = static_cast<uint64_t>(info.size) * info.itemsize;
        char* dst = range(offset, n, "write");
        if (!contiguousBuffer(info)) {
            throw std::invalid_argument("ortops: buffer write needs C-contiguous data");
        }
        {
            py::gil_scoped_release release;
            std::memcpy(dst, info.ptr, n);
        }
        flush();
    }

    void read(py::buffer out, uint64_t offset)
    {
        py::buffer_info info = out.request(true);
        uint64_t n = static_cast<uint64_t>(info.size) * info.itemsize;
        const char* src = range(offset, n, "read");
        if (!contiguousBuffer(info)) {
            throw std::invalid_argument("ortops: buffer read needs a C-contiguous target");
        }
        invalidate();
        py::gil_scoped_release release;
        std::memcpy(info.ptr, src, n);
    }
};


// A storage buffer of 32-bit words. "device" buffers are device-local with a host-visible
// staging twin (inputs and outputs: the host writes/reads the staging memory, the sequence
// copies); "storage" buffers are device-local only (weights, scratch); "host" buffers are
// host-visible memory used directly by shaders (small, rarely used).
struct Buffer : Memory
{
    std::shared_ptr<Context> ctx;
    std::shared_ptr<kp::Tensor> tensor;

    Buffer(std::shared_ptr<Context> c, uint64_t nbytes, const std::string& kind)
      : ctx(std::move(c))
    {
        bytes = nbytes;
        kp::Tensor::TensorTypes type;
        if (kind == "device") {
            type = kp::Tensor::TensorTypes::eDevice;
        } else if (kind == "storage") {
            type = kp::Tensor::TensorTypes::eStorage;
        } else if (kind == "host") {
            type = kp::Tensor::TensorTypes::eHost;
        } else {
            throw std::invalid_argument("ortops: buffer kind must be device, storage or host, got " +
                                        kind);
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

    void* mapped() const override
    {
        // Kompute maps the staging memory of device tensors and the memory of host tensors.
        return tensor->tensorType() == kp::Tensor::TensorTypes::eStorage ? nullptr
                                                                          : tensor->rawData();
    }

    vk::Buffer handle() const override { return tensor->constructDescriptorBufferInfo().buffer; }
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

    HostBuffer(std::shared_ptr<Context> c, uint64_t nbytes, bool needCoherent)
      : ctx(std::move(c))
    {
        bytes = nbytes;
        uint64_t size = std::max<uint64_t>(4, (nbytes + 3) / 4 * 4);
        vk::BufferCreateInfo info({},
                                  size,
                                  vk::BufferUsageFlagBits::eTransferSrc |
                                    vk::BufferUsageFlagBits::eTransferDst);
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
                    coherent = static_cast<bool>(props.memoryTypes[i].propertyFlags &
                                                 M::eHostCoherent);
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

    ~HostBuffer() override
    {
        ctx->device->unmapMemory(memory);
        ctx->device->destroyBuffer(buffer);
        ctx->device->freeMemory(memory);
    }

    vk::Buffer handle() const override { return buffer; }

    void* mapped() const override { return pointer; }

    void invalidate() override
    {
        if (!coherent) {
            ctx->device->invalidateMappedMemoryRanges(vk::MappedMemoryRange(memory, 0, VK_WHOLE_SIZE));
        }
    }

    void flush() override
    {
        if (!coherent) {
            ctx->device->flushMappedMemoryRanges(vk::MappedMemoryRange(memory, 0, VK_WHOLE_SIZE));
        }
    }

    uint32_t word() const { return __atomic_load_n(static_cast<uint32_t*>(pointer), __ATOMIC_ACQUIRE); }
    void setWord(uint32_t v) { __atomic_store_n(static_cast<uint32_t*>(pointer), v, __ATOMIC_RELEASE); }
};

// ---------------------------------------------------------------- programs

struct Program
{
    std::shared_ptr<Context> ctx;
    std::shared_ptr<kp::Algorithm> algorithm;
    uint32_t pushWords;
    // Keeps the buffers alive as long as the descriptor set that names them.
    std::vector<std::shared_ptr<Buffer>> buffers;
};

std::shared_ptr<Program>
makeProgram(std::shared_ptr<Context> ctx,
            py::bytes spirvBytes,
            const std::vector<std::shared_ptr<Buffer>>& buffers,
            const std::vector<uint32_t>& specialization,
            uint32_t pushWords)
{
    std::string code = spirvBytes;
    if (code.empty() || code.size() % 4 != 0) {
        throw std::invalid_argument("ortops: SPIR-V must be a non-empty multiple of 4 bytes");
    }
    std::vector<uint32_t> spirv(code.size() / 4);
    std::memcpy(spirv.data(), code.data(), code.size());
    std::vector<std::shared_ptr<kp::Tensor>> tensors;
    for (const auto& b : buffers) {
        if (b->ctx != ctx) {
            throw std::invalid_argument("ortops: a program's buffers must come from its context");
        }
        tensors.push_back(b->tensor);
    }
    auto program = std::make_shared<Program>();
    program->ctx = ctx;
    program->pushWords = pushWords;
    program->buffers = buffers;
    std::vector<uint32_t> push(pushWords, 0);
    program->algorithm = std::make_shared<kp::Algorithm>(
      ctx->device, tensors, spirv, kp::Workgroup({ 1, 1, 1 }), specialization, push);
    return program;
}

// ---------------------------------------------------------------- operations

// One dispatch with its own push constants and group counts. Kompute's OpAlgoDispatch also
// records a transfer->shader barrier per tensor on every dispatch; ordering is ours to record
// (OpBarrier), so this records the bind, the push and the dispatch only.
class OpDispatch : public kp::OpBase
{
  public:
    OpDispatch(std::shared_ptr<Program> program,
               std::vector<uint32_t> push,
               uint32_t x,
               uint32_t y,
               uint32_t z)
      : mProgram(std::move(program))
      , mPush(std::move(push))
      , mX(x)
      , mY(y)
      , mZ(z)
    {
    }
    void record(const vk::CommandBuffer& cb) override
    {
        auto& algo = *mProgram->algorithm;
        if (!mPush.empty()) {
            // Push constants are copied into the command buffer at record time, so a
            // sequence recorded once replays each dispatch with its own step values.
            algo.setPushConstants(mPush.data(), static_cast<uint32_t>(mPush.size()), 4);
        }
        algo.recordBindCore(cb);
        algo.recordBindPush(cb);
        cb.dispatch(mX, mY, mZ);
    }
    void preEval(const vk::CommandBuffer&) override {}
    void postEval(const vk::CommandBuffer&) override {}

  private:
    std::shared_ptr<Program> mProgram;
    std::vector<uint32_t> mPush;
    uint32_t mX, mY, mZ;
};

struct Scope
{
    vk::PipelineStageFlags stage;
    vk::AccessFlags writes;
    vk::AccessFlags access;
};

Scope
scopeOf(const std::string& name)
{
    using S = vk::PipelineStageFlagBits;
    using A = vk::AccessFlagBits;
    if (name == "compute") {
        return { S::eComputeShader, A::eShaderWrite, A::eShaderRead | A::eShaderWrite };
    }
    if (name == "transfer") {
        return { S::eTransfer, A::eTransferWrite, A::eTransferRead | A::eTransferWrite };
    }
    if (name == "host") {
        return { S::eHost, A::eHostWrite, A::eHostRead | A::eHostWrite };
    }
    throw std::invalid_argument("ortops: barrier scope must be compute, transfer or host, got " +
                                name);
}

// A global execution and memory dependency: every write of the source stage made available
// and visible to every read and write of the destination stage. Reads in the source stage
// are ordered too (execution dependency), which covers write-after-read.
class OpBarrier : public kp::OpBase
{
  public:
    OpBarrier(const std::string& src, const std::string& dst)
      : mSrc(scopeOf(src))
      , mDst(scopeOf(dst))
    {
    }
    void record(const vk::CommandBuffer& cb) override
    {
        vk::MemoryBarrier barrier(mSrc.writes, mDst.access);
        cb.pipelineBarrier(mSrc.stage, mDst.stage, {}, barrier, {}, {});
    }
    void preEval(const vk::CommandBuffer&) override {}
    void postEval(const vk::CommandBuffer&) override {}

  private:
    Scope mSrc, mDst;
};

// Byte-range copy between two buffers' device memory (Kompute's recordCopyFrom copies whole
// tensors only; a planner's regions are buffer-plus-offset).
class OpCopy : public kp::OpBase
{
  public:
    OpCopy(std::shared_ptr<Memory> src, std::shared_ptr<Memory> dst, vk::BufferCopy region)
      : mSrc(std::move(src))
      , mDst(std::move(dst))
      , mRegion(region)
    {
    }
    void record(const vk::CommandBuffer& cb) override
    {
        cb.copyBuffer(mSrc->handle(), mDst->handle(), mRegion);
    }
    void preEval(const vk::CommandBuffer&) override {}
    void postEval(const vk::CommandBuffer&) override {}

  private:
    std::shared_ptr<Memory> mSrc, mDst;
    vk::BufferCopy mRegion;
};

// The last command of a run: once everything before it has completed, write 1 into a
// host-coherent word the host polls. NVIDIA's vkWaitForFences sleeps and wakes about half a
// millisecond late (the measured round trip of an empty sequence was 0.56 ms on the H200);
// polling the word first, then waiting on the (by then signalled) fence, cuts that latency
// without changing what the fence guarantees.
class OpFinish : public kp::OpBase
{
  public:
    explicit OpFinish(std::shared_ptr<HostBuffer> flag)
      : mFlag(std::move(flag))
    {
    }
    void record(const vk::CommandBuffer& cb) override
    {
        vk::MemoryBarrier before(vk::AccessFlagBits::eMemoryWrite,
                                 vk::AccessFlagBits::eTransferWrite);
        cb.pipelineBarrier(vk::PipelineStageFlagBits::eAllCommands,
                           vk::PipelineStageFlagBits::eTransfer, {}, before, {}, {});
        cb.fillBuffer(mFlag->handle(), 0, 4, 1);
        vk::MemoryBarrier after(vk::AccessFlagBits::eTransferWrite, vk::AccessFlagBits::eHostRead);
        cb.pipelineBarrier(vk::PipelineStageFlagBits::eTransfer,
                           vk::PipelineStageFlagBits::eHost, {}, after, {}, {});
    }
    void preEval(const vk::CommandBuffer&) override {}
    void postEval(const vk::CommandBuffer&) override {}

  private:
    std::shared_ptr<HostBuffer> mFlag;
};

class OpTimestamp : public kp::OpBase
{
  public:
    OpTimestamp(vk::QueryPool pool, uint32_t index, uint32_t resetCount)
      : mPool(pool)
      , mIndex(index)
      , mReset(resetCount)
    {
    }
    void record(const vk::CommandBuffer& cb) override
    {
        if (mReset) {
            cb.resetQueryPool(mPool, 0, mReset);
        }
        cb.writeTimestamp(vk::PipelineStageFlagBits::eBottomOfPipe, mPool, mIndex);
    }
    void preEval(const vk::CommandBuffer&) override {}
    void postEval(const vk::CommandBuffer&) override {}

  private:
    vk::QueryPool mPool;
    uint32_t mIndex, mReset;
};

// ---------------------------------------------------------------- sequences

// A recorded run: Kompute operations (kp::OpBase: Kompute's own tensor syncs and ours above)
// recorded once into one command buffer, submitted as often as needed.
//
// Why not kp::Sequence: its eval() creates a fence before every submit and destroys it after
// the wait. Measured on the H200 machine (NVIDIA 580, Vulkan 1.4), an empty kp::Sequence
// spent 280 us in evalAsync and 276 us in evalAwait while the GPU had finished 9.5 us after
// the submit: more host time than the whole 80-step layer takes on the GPU. This class keeps
// one command buffer and one fence for its lifetime, and waits by polling a host-coherent
// word the last command writes (OpFinish) before checking the fence. Everything recorded is
// still a Kompute operation; only the submission is ours.
struct Sequence
{
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
    uint32_t timestampCount = 0;
    uint32_t timestampsWritten = 0;
    bool recording = false;
    bool recorded = false;
    bool pending = false;
    bool finishRecorded = false;

    Sequence(std::shared_ptr<Context> c, uint32_t timestamps)
      : ctx(std::move(c))
      , queue(&ctx->pickQueue())
      , timestampCount(timestamps)
    {
        auto& dev = *ctx->device;
        pool = dev.createCommandPool(vk::CommandPoolCreateInfo(
          vk::CommandPoolCreateFlagBits::eResetCommandBuffer, ctx->family));
        cb = dev.allocateCommandBuffers(
                  vk::CommandBufferAllocateInfo(pool, vk::CommandBufferLevel::ePrimary, 1))
               .front();
        fence = dev.createFence(vk::FenceCreateInfo());
        if (timestamps) {
            queries = dev.createQueryPool(
              vk::QueryPoolCreateInfo({}, vk::QueryType::eTimestamp, timestamps));
        }
    }

    ~Sequence()
    {
        auto& dev = *ctx->device;
        if (pending && !ctx->lost) {
            try {
                (void)dev.waitForFences(fence, VK_TRUE, UINT64_MAX);
            } catch (const std::exception&) {
                // A lost device: nothing to wait for; never throw from a destructor.
            }
        }
        ops.clear();
        dev.destroyFence(fence);
        dev.freeCommandBuffers(pool, cb);
        dev.destroyCommandPool(pool);
        if (queries) {
            dev.destroyQueryPool(queries);
        }
    }

    void record(std::shared_ptr<kp::OpBase> op)
    {
        if (pending) {
            wait();
        }
        if (!recording) {
            if (recorded) {
                throw std::runtime_error("ortops: sequence already recorded; clear() it first");
            }
            cb.begin(vk::CommandBufferBeginInfo());
            recording = true;
        }
        op->record(cb);
        ops.push_back(std::move(op));
    }

    void end()
    {
        if (recording) {
            cb.end();
            recording = false;
            recorded = true;
        }
    }

    void timestamp(uint32_t index)
    {
        if (index >= timestampCount) {
            throw std::out_of_range("ortops: timestamp index " + std::to_string(index) +
                                    " but the sequence has " + std::to_string(timestampCount));
        }
        // The first timestamp of a recording resets the whole pool, so a recorded sequence can
        // be replayed and read again.
        uint32_t reset = timestampsWritten == 0 ? timestampCount : 0;
        record(std::make_shared<OpTimestamp>(queries, index, reset));
        timestampsWritten++;
    }

    std::vector<double> timestamps()
    {
        if (!queries) {
            throw std::runtime_error("ortops: sequence was created without timestamps");
        }
        std::vector<uint64_t> ticks(timestampCount, 0);
        auto result = ctx->device->getQueryPoolResults(
          queries, 0, timestampCount, ticks.size() * sizeof(uint64_t), ticks.data(),
          sizeof(uint64_t), vk::QueryResultFlagBits::e64 | vk::QueryResultFlagBits::eWait);
        if (result != vk::Result::eSuccess) {
            throw std::runtime_error("ortops: timestamps not available");
        }
        std::vector<double> ns;
        for (auto t : ticks) {
            ns.push_back(static_cast<double>(t) * ctx->timestampPeriod);
        }
        return ns;
    }

    void finish()
    {
        if (!doneFlag) {
            doneFlag = std::make_shared<HostBuffer>(ctx, 4, true);
        }
        record(std::make_shared<OpFinish>(doneFlag));
        finishRecorded = true;
    }

    void submit()
    {
        if (pending) {
            throw std::runtime_error("ortops: sequence submitted again before its wait");
        }
        ctx->checkAlive();
        end();
        if (!recorded) {
            return;
        }
        for (auto& op : ops) {
            op->preEval(cb);
        }
        if (finishRecorded) {
            doneFlag->setWord(0);
        }
        try {
            ctx->device->resetFences(fence);
            vk::SubmitInfo info({}, {}, cb);
            std::lock_guard<std::mutex> guard(queue->lock);
            queue->queue.submit(info, fence);
        } catch (const vk::DeviceLostError& e) {
            ctx->fail(std::string("vkQueueSubmit: ") + e.what());
        }
        pending = true;
    }

    void wait()
    {
        if (!pending) {
            return;
        }
        if (finishRecorded && ctx->pollCompletion) {
            // Poll for at most a second, then fall back on the fence wait alone.
            auto start = std::chrono::steady_clock::now();
            uint64_t spins = 0;
            while (doneFlag->word() == 0) {
                if ((++spins & 1023u) == 0) {
                    if (std::chrono::steady_clock::now() - start > std::chrono::seconds(1)) {
                        break;
                    }
                    std::this_thread::yield();
                }
            }
        }
        // Whatever happens below, this submission is over: the next run may submit again.
        pending = false;
        vk::Result result;
        try {
            result = ctx->device->waitForFences(fence, VK_TRUE, UINT64_MAX);
        } catch (const vk::DeviceLostError& e) {
            ctx->fail(std::string("vkWaitForFences: ") + e.what());
        }
        if (result != vk::Result::eSuccess) {
            ctx->fail("waiting for the device returned " + vk::to_string(result));
        }
        for (auto& op : ops) {
            op->postEval(cb);
        }
    }

    void eval()
    {
        std::lock_guard<std::mutex> guard(runLock);
        submit();
        wait();
    }

    // Where a run's host time goes, in microseconds: fence reset and submit, until the
    // completion marker lands, and the fence wait after it.
    std::vector<double> profileEval()
    {
        using clock = std::chrono::steady_clock;
        auto us = [](clock::duration d) { return std::chrono::duration<double, std::micro>(d).count(); };
        if (!finishRecorded) {
            finish();
        }
        auto t0 = clock::now();
        submit();
        auto t1 = clock::now();
        while (doneFlag->word() == 0) {
            if (clock::now() - t1 > std::chrono::seconds(1)) {
                break;
            }
        }
        auto t2 = clock::now();
        wait();
        auto t3 = clock::now();
        return { us(t1 - t0), us(t2 - t1), us(t3 - t2) };
    }
};

std::vector<std::shared_ptr<kp::Tensor>>
tensorsOf(const std::vector<std::shared_ptr<Buffer>>& buffers)
{
    std::vector<std::shared_ptr<kp::Tensor>> tensors;
    for (const auto& b : buffers) {
        tensors.push_back(b->tensor);
    }
    return tensors;
}

} // namespace

PYBIND11_MODULE(_vk, m)
{
    m.doc() = "ortops' binding of Kompute's C++ API with full barriers and timestamps";

    m.def("enumerate_devices", &enumerateDevices, "Describe every Vulkan device with a compute queue.");
    py::register_exception<DeviceLostError>(m, "DeviceLostError", PyExc_RuntimeError);
    m.def("take_messages", &takeMessages, "Validation messages since the last call (and clear them).");

    py::class_<Context, std::shared_ptr<Context>>(m, "Context")
      .def(py::init<uint32_t, bool, uint32_t>(), py::arg("index"), py::arg("validation") = false,
           py::arg("max_queues") = 1)
      .def_readonly("validation", &Context::validation)
      .def_readonly("timestamp_period_ns", &Context::timestampPeriod)
      .def_property_readonly("queues", [](const Context& self) { return self.queues.size(); })
      .def_property_readonly("lost", [](const Context& self) { return self.lost.load(); })
      .def("simulate_loss",
           [](Context& self) {
               try {
                   self.fail("device loss simulated by a test");
               } catch (const DeviceLostError&) {
               }
           },
           "Test hook: mark the context lost, as a VK_ERROR_DEVICE_LOST would.")
      .def("buffer",
           [](std::shared_ptr<Context> self, uint64_t nbytes, const std::string& kind) {
               return std::make_shared<Buffer>(self, nbytes, kind);
           },
           py::arg("nbytes"),
           py::arg("kind") = "device")
      .def("program",
           &makeProgram,
           py::arg("spirv"),
           py::arg("buffers"),
           py::arg("specialization") = std::vector<uint32_t>{},
           py::arg("push_words") = 0)
      .def("host_buffer",
           [](std::shared_ptr<Context> self, uint64_t nbytes) {
               return std::make_shared<HostBuffer>(self, nbytes, false);
           },
           py::arg("nbytes"),
           "Host-cached memory for reading results back (a transfer target, not bindable).")
      .def("sequence",
           [](std::shared_ptr<Context> self, uint32_t timestamps) {
               return std::make_shared<Sequence>(self, timestamps);
           },
           py::arg("timestamps") = 0);

    py::class_<Memory, std::shared_ptr<Memory>>(m, "Memory")
      .def_readonly("nbytes", &Memory::bytes)
      .def_property_readonly("host_visible", [](const Memory& mem) { return mem.mapped() != nullptr; })
      .def("write", &Memory::write, py::arg("data"), py::arg("offset") = 0,
           "Copy C-contiguous data into the mapped memory at a byte offset.")
      .def("read", &Memory::read, py::arg("out"), py::arg("offset") = 0,
           "Copy the mapped memory at a byte offset into a C-contiguous array.");

    py::class_<HostBuffer, Memory, std::shared_ptr<HostBuffer>>(m, "HostBuffer")
      .def_readonly("coherent", &HostBuffer::coherent);

    py::class_<Buffer, Memory, std::shared_ptr<Buffer>>(m, "Buffer");

    py::class_<Program, std::shared_ptr<Program>>(m, "Program")
      .def_readonly("push_words", &Program::pushWords);

    py::class_<Sequence, std::shared_ptr<Sequence>>(m, "Sequence")
      .def("upload",
           [](Sequence& s, const std::vector<std::shared_ptr<Buffer>>& buffers) {
               s.record(std::make_shared<kp::OpTensorSyncDevice>(tensorsOf(buffers)));
           },
           "Copy each buffer's staging memory to its device memory.")
      .def("download",
           [](Sequence& s, const std::vector<std::shared_ptr<Buffer>>& buffers) {
               // Kompute's OpTensorSyncLocal orders shader writes before its copy and its
               // copy before host reads.
               s.record(std::make_shared<kp::OpTensorSyncLocal>(tensorsOf(buffers)));
           },
           "Copy each buffer's device memory to its staging memory.")
      .def("dispatch",
           [](Sequence& s,
              std::shared_ptr<Program> program,
              uint32_t x,
              uint32_t y,
              uint32_t z,
              std::vector<uint32_t> push) {
               if (push.size() != program->pushWords) {
                   throw std::invalid_argument("ortops: program takes " +
                                               std::to_string(program->pushWords) +
                                               " push-constant words, got " +
                                               std::to_string(push.size()));
               }
               if (program->ctx != s.ctx) {
                   throw std::invalid_argument("ortops: program and sequence contexts differ");
               }
               if (x == 0 || y == 0 || z == 0) {
                   return; // an empty dispatch records nothing
               }
               // A count above the limit is invalid Vulkan that some drivers run anyway
               // (lavapipe did): refuse it here so no caller records one.
               const auto& limit = s.ctx->limits.maxComputeWorkGroupCount;
               if (x > limit[0] || y > limit[1] || z > limit[2]) {
                   throw std::invalid_argument(
                     "ortops: dispatch of " + std::to_string(x) + " x " + std::to_string(y) +
                     " x " + std::to_string(z) + " workgroups exceeds the device's "
                     "maxComputeWorkGroupCount of " + std::to_string(limit[0]) + " x " +
                     std::to_string(limit[1]) + " x " + std::to_string(limit[2]));
               }
               s.record(std::make_shared<OpDispatch>(program, std::move(push), x, y, z));
           },
           py::arg("program"),
           py::arg("x"),
           py::arg("y") = 1,
           py::arg("z") = 1,
           py::arg("push") = std::vector<uint32_t>{})
      .def("barrier",
           [](Sequence& s, const std::string& src, const std::string& dst) {
               s.record(std::make_shared<OpBarrier>(src, dst));
           },
           py::arg("src"),
           py::arg("dst"))
      .def("copy",
           [](Sequence& s,
              std::shared_ptr<Memory> src,
              std::shared_ptr<Memory> dst,
              uint64_t srcOffset,
              uint64_t dstOffset,
              uint64_t size) {
               if (srcOffset + size > src->bytes || dstOffset + size > dst->bytes) {
                   throw std::out_of_range("ortops: copy range outside its buffers");
               }
               if (size) {
                   s.record(std::make_shared<OpCopy>(src, dst, vk::BufferCopy(srcOffset, dstOffset, size)));
               }
           },
           py::arg("src"),
           py::arg("dst"),
           py::arg("src_offset") = 0,
           py::arg("dst_offset") = 0,
           py::arg("size"))
      .def("profile_eval",
           [](Sequence& s) {
               py::gil_scoped_release release;
               return s.profileEval();
           },
           "Run once; return microseconds in submit, until the marker lands, and in the fence wait.")
      .def("finish", &Sequence::finish,
           "Record the end-of-run marker eval() polls for (lower completion latency).")
      .def("timestamp", &Sequence::timestamp, py::arg("index"))
      .def("timestamps", &Sequence::timestamps, "Timestamps of the last run, in nanoseconds.")
      .def("eval",
           [](Sequence& s) {
               py::gil_scoped_release release;
               s.eval();
           },
           "Submit the recorded commands and wait for them.");
}
