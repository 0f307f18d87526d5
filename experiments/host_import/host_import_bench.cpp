// host_import_bench: the one copy each way between a caller's buffer (ONNX Runtime's tensor) and
// the GPU, measured three ways (issue 21, item 4). A measurement, not a production path: built
// by its own small CMake project (experiments/host_import/: CMakeLists.txt, host_import_bench.sh),
// never by the package's build, never in the wheel.
//
// Today a run copies each input on the host (src/core/vk/hostcopy.cpp's copy threads) into
// Kompute's mapped staging memory and the GPU copies staging -> device-local; each output goes
// device-local -> a host-cached readback buffer (src/core/vk/memory.hpp, HostBuffer), then a host
// copy into ORT's output tensor. VK_EXT_external_memory_host could take the host copy away: the
// caller's pointer is imported as device memory and the GPU copies straight from / to it.
// For each size and direction this measures, over --repeats runs after --warmup:
//
//   a  today: host copy into the staging memory (Kompute's type: the first host-visible,
//      host-coherent one, write-combined on a discrete GPU) + the GPU copy to device-local,
//      submit, fence wait; out: GPU copy device-local -> readback (HostBuffer's type, host
//      cached where offered), wait, invalidate if not coherent, host copy out of it;
//   b  import per run: vkGetMemoryHostPointerPropertiesEXT, a buffer, vkAllocateMemory with
//      VkImportMemoryHostPointerInfoEXT over the caller's enclosing page range, bind, record the
//      copy at the caller's offset within it, submit, wait, destroy, free;
//   c  import cached: b's import done once, only the submit and wait per run (the lower bound;
//      unsafe with ORT's allocator, docs/perf.md says why).
//
// The caller's buffer is deliberately 64-byte aligned and not page aligned (--offset): ONNX
// Runtime's CPU allocator guarantees 64 bytes, and minImportedHostPointerAlignment is larger (4 KiB,
// a page, on lavapipe; the report prints the device's), so the import covers the enclosing range
// of alignment units and the copy starts at the pointer's offset into it.
//
// Every run, the warm-up ones too, is checked bit for bit (in: the device buffer is cleared first, then read
// back and compared with the caller's buffer; out: the caller's buffer is cleared first and
// compared with the device buffer's known contents; the first and last words are stamped with
// the run number, so stale data from an earlier run fails too). Any difference ends the program
// with "ROUND TRIP FAILED" and exit status 1. Without the extension variant a still runs and the
// program says "VK_EXT_external_memory_host: not offered by <device>". ORTOPS_VALIDATION=1 runs
// under the Khronos validation layer with synchronization validation; any warning or error is
// printed and gives exit status 3.
//
// Measured (docs/perf.md, "One copy each way, or none"): on lavapipe (2-core development
// machine, loaded) the import costs 0.2-13 us, since lavapipe only wraps the pointer, so b is
// within a few % of c and half of a from 1 MiB up (52 MiB in: a 21.6 ms, b 11.3, c 12.0; 80 KiB:
// a 11.3 us, b 10.4, c 9.8: the submit and wait dominate). lavapipe's GPU copy is a CPU memcpy
// too, so that says the path is right, not what a discrete GPU gains: the H200 figures, where
// the driver typically pins the pages at import, decide (STAGE=import bash scripts/gpu_machine.sh).
//
//   host_import_bench [--sizes 80K,1M,8M,26M,52M] [--repeats 30] [--warmup 5] [--offset 64]
//                     [--device INDEX|NAME] [--out DIR] [--check]
//
// --check: sizes 12340 B (not a page multiple), 80 KiB and 1 MiB, 2 repeats after 1 warm-up
// (the test, tests/test_host_import.py). --out DIR writes host_import.json and host_import.md.
// --fault-offset (the test's): b and c copy at the start of the imported page range rather than
// at the caller's offset in it, which the check must report.

#include <vulkan/vulkan.hpp>

#include "vk/hostcopy.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <functional>
#include <memory>
#include <mutex>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include <unistd.h>

namespace {

using M = vk::MemoryPropertyFlagBits;
constexpr auto HOST_PTR = vk::ExternalMemoryHandleTypeFlagBits::eHostAllocationEXT;
const char* const EXT = VK_EXT_EXTERNAL_MEMORY_HOST_EXTENSION_NAME;

// ---------------------------------------------------------------- options

struct Options
{
    std::vector<uint64_t> sizes;
    int repeats = 30;
    int warmup = 5;
    uint64_t offset = 64;
    std::string device;
    std::string out;
    bool check = false;
    // Test hook: copy at the start of the imported range instead of at the caller's offset in
    // it (the mistake the page-range import invites); the check must catch it.
    bool faultOffset = false;
};

uint64_t
parseSize(const std::string& text)
{
    size_t used = 0;
    double v = std::stod(text, &used);
    std::string unit = text.substr(used);
    double scale = 1;
    if (unit == "K" || unit == "KiB") {
        scale = 1024;
    } else if (unit == "M" || unit == "MiB") {
        scale = 1024.0 * 1024;
    } else if (!unit.empty() && unit != "B") {
        throw std::invalid_argument("size '" + text + "': use bytes, K (KiB) or M (MiB)");
    }
    auto n = static_cast<uint64_t>(v * scale);
    if (n == 0 || n % 4) {
        throw std::invalid_argument("size '" + text + "': must be a positive multiple of 4 bytes");
    }
    return n;
}

Options
parse(int argc, char** argv)
{
    Options o;
    std::string sizes = "80K,1M,8M,26M,52M";
    bool sizesGiven = false;
    for (int i = 1; i < argc; i++) {
        std::string a = argv[i];
        auto value = [&]() -> std::string {
            if (i + 1 >= argc) {
                throw std::invalid_argument(a + " needs a value");
            }
            return argv[++i];
        };
        if (a == "--sizes") {
            sizes = value();
            sizesGiven = true;
        } else if (a == "--repeats") {
            o.repeats = std::stoi(value());
        } else if (a == "--warmup") {
            o.warmup = std::stoi(value());
        } else if (a == "--offset") {
            o.offset = std::stoull(value());
        } else if (a == "--device") {
            o.device = value();
        } else if (a == "--out") {
            o.out = value();
        } else if (a == "--check") {
            o.check = true;
        } else if (a == "--fault-offset") {
            o.faultOffset = true;
        } else if (a == "-h" || a == "--help") {
            std::printf("host_import_bench [--sizes 80K,1M,8M,26M,52M] [--repeats 30] [--warmup 5] "
                        "[--offset 64] [--device INDEX|NAME] [--out DIR] [--check]\n");
            std::exit(0);
        } else {
            throw std::invalid_argument("unknown argument " + a);
        }
    }
    if (o.check) {
        if (!sizesGiven) {
            sizes = "12340,80K,1M";
        }
        o.repeats = 2;
        o.warmup = 1;
    }
    std::stringstream ss(sizes);
    for (std::string item; std::getline(ss, item, ',');) {
        o.sizes.push_back(parseSize(item));
    }
    if (o.repeats < 1 || o.warmup < 0) {
        throw std::invalid_argument("--repeats must be at least 1, --warmup at least 0");
    }
    return o;
}

std::string
sizeText(uint64_t n)
{
    char buf[32];
    if (n % (1024 * 1024) == 0) {
        std::snprintf(buf, sizeof buf, "%" PRIu64 " MiB", n >> 20);
    } else if (n % 1024 == 0) {
        std::snprintf(buf, sizeof buf, "%" PRIu64 " KiB", n >> 10);
    } else {
        std::snprintf(buf, sizeof buf, "%" PRIu64 " B", n);
    }
    return buf;
}

// ---------------------------------------------------------------- validation messages

std::mutex g_messagesLock;
std::vector<std::string> g_messages;

VKAPI_ATTR VkBool32 VKAPI_CALL
onMessage(VkDebugUtilsMessageSeverityFlagBitsEXT severity, VkDebugUtilsMessageTypeFlagsEXT,
          const VkDebugUtilsMessengerCallbackDataEXT* data, void*)
{
    if (severity >= VK_DEBUG_UTILS_MESSAGE_SEVERITY_WARNING_BIT_EXT) {
        std::lock_guard<std::mutex> lock(g_messagesLock);
        g_messages.push_back(std::string(data->pMessageIdName ? data->pMessageIdName : "") + ": " +
                             (data->pMessage ? data->pMessage : ""));
    }
    return VK_FALSE;
}

bool
validationRequested()
{
    const char* v = std::getenv("ORTOPS_VALIDATION");
    if (!v) {
        return false;
    }
    std::string s(v);
    return !(s.empty() || s == "0" || s == "false" || s == "no");
}

// ---------------------------------------------------------------- timing

double
nowMs()
{
    return std::chrono::duration<double, std::milli>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

double
quantile(std::vector<double> v, double q)
{
    if (v.empty()) {
        return 0;
    }
    // Linear between the nearest ranks, as numpy.quantile: the median of an even count is the
    // mean of the middle two.
    std::sort(v.begin(), v.end());
    double pos = q * static_cast<double>(v.size() - 1);
    size_t lo = static_cast<size_t>(std::floor(pos));
    size_t hi = std::min(v.size() - 1, lo + 1);
    return v[lo] + (v[hi] - v[lo]) * (pos - static_cast<double>(lo));
}

// ---------------------------------------------------------------- the device

std::string
flagsText(vk::MemoryPropertyFlags f)
{
    std::string s;
    auto add = [&](M bit, const char* name) {
        if (f & bit) {
            s += s.empty() ? "" : "|";
            s += name;
        }
    };
    add(M::eDeviceLocal, "device-local");
    add(M::eHostVisible, "host-visible");
    add(M::eHostCoherent, "host-coherent");
    add(M::eHostCached, "host-cached");
    add(M::eLazilyAllocated, "lazily-allocated");
    add(M::eProtected, "protected");
    return s.empty() ? "none" : s;
}

std::string
jsonString(const std::string& s)
{
    std::string out = "\"";
    for (char c : s) {
        if (c == '"' || c == '\\') {
            out += '\\';
            out += c;
        } else if (static_cast<unsigned char>(c) < 0x20) {
            char buf[8];
            std::snprintf(buf, sizeof buf, "\\u%04x", c);
            out += buf;
        } else {
            out += c;
        }
    }
    return out + "\"";
}

struct Buffer
{
    vk::Buffer buffer;
    vk::DeviceMemory memory;
    void* mapped = nullptr;
    uint32_t type = 0;
    bool coherent = true;
};

struct Gpu
{
    vk::Instance instance;
    VkDebugUtilsMessengerEXT messenger = VK_NULL_HANDLE;
    vk::PhysicalDevice physical;
    vk::Device device;
    vk::Queue queue;
    vk::CommandPool pool;
    vk::Fence fence;
    vk::DispatchLoaderDynamic dld;
    vk::PhysicalDeviceMemoryProperties memory;
    std::string name, driver;
    bool validation = false;
    bool extension = false;
    uint64_t importAlignment = 0;
    uint32_t importableTypes = 0;   // for a page-aligned probe pointer
    uint64_t rangeExtended = 0;     // the most an import had to reach past the caller's pages
    vk::ExternalMemoryProperties externalBuffer{};

    int find(uint32_t bits, const std::vector<vk::MemoryPropertyFlags>& wanted, bool* coherent) const
    {
        for (const auto& flags : wanted) {
            for (uint32_t i = 0; i < memory.memoryTypeCount; i++) {
                if ((bits & (1u << i)) && (memory.memoryTypes[i].propertyFlags & flags) == flags) {
                    if (coherent) {
                        *coherent = static_cast<bool>(memory.memoryTypes[i].propertyFlags & M::eHostCoherent);
                    }
                    return static_cast<int>(i);
                }
            }
        }
        return -1;
    }

    Buffer make(uint64_t n, const std::vector<vk::MemoryPropertyFlags>& wanted, const char* what)
    {
        Buffer b;
        b.buffer = device.createBuffer(vk::BufferCreateInfo(
          {}, n, vk::BufferUsageFlagBits::eTransferSrc | vk::BufferUsageFlagBits::eTransferDst));
        auto req = device.getBufferMemoryRequirements(b.buffer);
        int type = find(req.memoryTypeBits, wanted, &b.coherent);
        if (type < 0) {
            throw std::runtime_error(std::string("no memory type for the ") + what);
        }
        b.type = static_cast<uint32_t>(type);
        b.memory = device.allocateMemory(vk::MemoryAllocateInfo(req.size, b.type));
        device.bindBufferMemory(b.buffer, b.memory, 0);
        if (memory.memoryTypes[b.type].propertyFlags & M::eHostVisible) {
            b.mapped = device.mapMemory(b.memory, 0, VK_WHOLE_SIZE);
        }
        return b;
    }

    void destroy(Buffer& b)
    {
        if (b.mapped) {
            device.unmapMemory(b.memory);
        }
        device.destroyBuffer(b.buffer);
        device.freeMemory(b.memory);
        b = Buffer{};
    }

    // Kompute's staging memory (kp::Tensor: the first host-visible, host-coherent type).
    Buffer staging(uint64_t n) { return make(n, { M::eHostVisible | M::eHostCoherent }, "staging buffer"); }
    // src/core/vk/memory.cpp's HostBuffer (readback, needCoherent = false).
    Buffer readback(uint64_t n)
    {
        return make(n,
                    { M::eHostVisible | M::eHostCached | M::eHostCoherent, M::eHostVisible | M::eHostCached,
                      M::eHostVisible | M::eHostCoherent },
                    "readback buffer");
    }
    // Kompute's device tensor (device-local).
    Buffer local(uint64_t n) { return make(n, { M::eDeviceLocal }, "device-local buffer"); }

    void invalidate(const Buffer& b)
    {
        if (!b.coherent) {
            device.invalidateMappedMemoryRanges(vk::MappedMemoryRange(b.memory, 0, VK_WHOLE_SIZE));
        }
    }

    void submitWait(vk::CommandBuffer cb)
    {
        queue.submit(vk::SubmitInfo({}, {}, cb), fence);
        if (device.waitForFences(fence, VK_TRUE, UINT64_MAX) != vk::Result::eSuccess) {
            throw std::runtime_error("fence wait failed");
        }
        device.resetFences(fence);
    }

    vk::CommandBuffer allocate()
    {
        return device.allocateCommandBuffers(vk::CommandBufferAllocateInfo(pool, vk::CommandBufferLevel::ePrimary, 1))[0];
    }

    // One recorded run: order against earlier submissions, the work, make transfer writes
    // visible to the host (what the fence wait alone does not do).
    void record(vk::CommandBuffer cb, const std::function<void(vk::CommandBuffer)>& body)
    {
        cb.reset();
        cb.begin(vk::CommandBufferBeginInfo{});
        vk::MemoryBarrier before(vk::AccessFlagBits::eMemoryWrite,
                                 vk::AccessFlagBits::eTransferRead | vk::AccessFlagBits::eTransferWrite);
        cb.pipelineBarrier(vk::PipelineStageFlagBits::eAllCommands, vk::PipelineStageFlagBits::eTransfer, {}, before,
                           {}, {});
        body(cb);
        vk::MemoryBarrier after(vk::AccessFlagBits::eTransferWrite, vk::AccessFlagBits::eHostRead);
        cb.pipelineBarrier(vk::PipelineStageFlagBits::eTransfer, vk::PipelineStageFlagBits::eHost, {}, after, {}, {});
        cb.end();
    }
    void recordCopy(vk::CommandBuffer cb, vk::Buffer src, uint64_t srcOff, vk::Buffer dst, uint64_t dstOff, uint64_t n)
    {
        record(cb, [&](vk::CommandBuffer c) { c.copyBuffer(src, dst, vk::BufferCopy(srcOff, dstOff, n)); });
    }
};

int
preference(vk::PhysicalDeviceType t)
{
    switch (t) {
        case vk::PhysicalDeviceType::eDiscreteGpu:
            return 0;
        case vk::PhysicalDeviceType::eIntegratedGpu:
            return 1;
        case vk::PhysicalDeviceType::eVirtualGpu:
            return 2;
        case vk::PhysicalDeviceType::eCpu:
            return 3;
        default:
            return 4;
    }
}

bool
hasExtension(const std::vector<vk::ExtensionProperties>& list, const char* name)
{
    for (const auto& e : list) {
        if (std::strcmp(e.extensionName, name) == 0) {
            return true;
        }
    }
    return false;
}

std::string
lower(std::string s)
{
    for (auto& c : s) {
        c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    }
    return s;
}

void
open(Gpu& g, const Options& o)
{
    g.validation = validationRequested();
    vk::ApplicationInfo app("ortops host_import_bench", 1, "ortops", 1, VK_API_VERSION_1_2);
    vk::InstanceCreateInfo info({}, &app);
    std::vector<const char*> layers, extensions;
    VkDebugUtilsMessengerCreateInfoEXT messengerInfo{};
    messengerInfo.sType = VK_STRUCTURE_TYPE_DEBUG_UTILS_MESSENGER_CREATE_INFO_EXT;
    messengerInfo.messageSeverity =
      VK_DEBUG_UTILS_MESSAGE_SEVERITY_WARNING_BIT_EXT | VK_DEBUG_UTILS_MESSAGE_SEVERITY_ERROR_BIT_EXT;
    messengerInfo.messageType = VK_DEBUG_UTILS_MESSAGE_TYPE_GENERAL_BIT_EXT |
                                VK_DEBUG_UTILS_MESSAGE_TYPE_VALIDATION_BIT_EXT |
                                VK_DEBUG_UTILS_MESSAGE_TYPE_PERFORMANCE_BIT_EXT;
    messengerInfo.pfnUserCallback = onMessage;
    vk::ValidationFeatureEnableEXT sync = vk::ValidationFeatureEnableEXT::eSynchronizationValidation;
    vk::ValidationFeaturesEXT features(sync, {});
    if (g.validation) {
        // As src/core/vk/context.cpp does: the layer, sync validation asked for here too.
        bool present = false;
        for (const auto& l : vk::enumerateInstanceLayerProperties()) {
            present = present || std::strcmp(l.layerName, "VK_LAYER_KHRONOS_validation") == 0;
        }
        if (!present) {
            throw std::runtime_error("ORTOPS_VALIDATION asks for VK_LAYER_KHRONOS_validation, which is not "
                                     "installed (Debian package vulkan-validationlayers; VK_LAYER_PATH)");
        }
        layers.push_back("VK_LAYER_KHRONOS_validation");
        extensions.push_back(VK_EXT_DEBUG_UTILS_EXTENSION_NAME);
        features.pNext = &messengerInfo;
        info.pNext = &features;
    }
    info.setPEnabledLayerNames(layers);
    info.setPEnabledExtensionNames(extensions);
    g.instance = vk::createInstance(info);
    if (g.validation) {
        auto create = reinterpret_cast<PFN_vkCreateDebugUtilsMessengerEXT>(
          g.instance.getProcAddr("vkCreateDebugUtilsMessengerEXT"));
        if (create) {
            create(g.instance, &messengerInfo, nullptr, &g.messenger);
        }
    }
    auto all = g.instance.enumeratePhysicalDevices();
    if (all.empty()) {
        throw std::runtime_error("no Vulkan device");
    }
    std::string want = o.device.empty() && std::getenv("ORTOPS_DEVICE") ? std::getenv("ORTOPS_DEVICE") : o.device;
    int chosen = -1;
    if (!want.empty() && std::all_of(want.begin(), want.end(), ::isdigit)) {
        chosen = std::stoi(want);
        if (chosen >= static_cast<int>(all.size())) {
            throw std::runtime_error("no Vulkan device " + want);
        }
    } else if (!want.empty()) {
        for (size_t i = 0; i < all.size() && chosen < 0; i++) {
            if (lower(all[i].getProperties().deviceName.data()).find(lower(want)) != std::string::npos) {
                chosen = static_cast<int>(i);
            }
        }
        if (chosen < 0) {
            throw std::runtime_error("no Vulkan device named like '" + want + "'");
        }
    } else {
        chosen = 0;
        for (size_t i = 1; i < all.size(); i++) {
            if (preference(all[i].getProperties().deviceType) < preference(all[chosen].getProperties().deviceType)) {
                chosen = static_cast<int>(i);
            }
        }
    }
    g.physical = all[chosen];
    auto props = g.physical.getProperties2<vk::PhysicalDeviceProperties2, vk::PhysicalDeviceDriverProperties>();
    g.name = props.get<vk::PhysicalDeviceProperties2>().properties.deviceName.data();
    const auto& drv = props.get<vk::PhysicalDeviceDriverProperties>();
    g.driver = std::string(drv.driverName.data()) + " " + drv.driverInfo.data();
    g.memory = g.physical.getMemoryProperties();
    auto offered = g.physical.enumerateDeviceExtensionProperties();
    g.extension = hasExtension(offered, EXT);
    if (g.extension) {
        auto chain = g.physical.getProperties2<vk::PhysicalDeviceProperties2,
                                               vk::PhysicalDeviceExternalMemoryHostPropertiesEXT>();
        g.importAlignment = chain.get<vk::PhysicalDeviceExternalMemoryHostPropertiesEXT>().minImportedHostPointerAlignment;
        vk::PhysicalDeviceExternalBufferInfo bufferInfo(
          {}, vk::BufferUsageFlagBits::eTransferSrc | vk::BufferUsageFlagBits::eTransferDst, HOST_PTR);
        g.externalBuffer = g.physical.getExternalBufferProperties(bufferInfo).externalMemoryProperties;
    }
    // The compute family, where ortops's sequences (and so their copies) run.
    uint32_t family = UINT32_MAX;
    auto families = g.physical.getQueueFamilyProperties();
    for (uint32_t i = 0; i < families.size() && family == UINT32_MAX; i++) {
        if (families[i].queueFlags & vk::QueueFlagBits::eCompute) {
            family = i;
        }
    }
    if (family == UINT32_MAX) {
        throw std::runtime_error("the device has no compute queue");
    }
    float priority = 1.0f;
    vk::DeviceQueueCreateInfo queueInfo({}, family, 1, &priority);
    std::vector<const char*> deviceExtensions;
    if (g.extension) {
        deviceExtensions.push_back(EXT);
    }
    if (hasExtension(offered, "VK_KHR_portability_subset")) {
        deviceExtensions.push_back("VK_KHR_portability_subset");
    }
    g.device = g.physical.createDevice(vk::DeviceCreateInfo({}, queueInfo, {}, deviceExtensions));
    g.queue = g.device.getQueue(family, 0);
    g.pool = g.device.createCommandPool(
      vk::CommandPoolCreateInfo(vk::CommandPoolCreateFlagBits::eResetCommandBuffer, family));
    g.fence = g.device.createFence({});
    g.dld.init(static_cast<VkInstance>(g.instance), vkGetInstanceProcAddr, static_cast<VkDevice>(g.device),
               vkGetDeviceProcAddr);
    if (g.extension) {
        // Which types a host allocation may be imported as (for a page-aligned probe).
        long page = sysconf(_SC_PAGESIZE);
        size_t align = std::max<size_t>(g.importAlignment, static_cast<size_t>(page));
        void* probe = std::aligned_alloc(align, align);
        std::memset(probe, 0, align);
        g.importableTypes = g.device.getMemoryHostPointerPropertiesEXT(HOST_PTR, probe, g.dld).memoryTypeBits;
        std::free(probe);
    }
}

void
close(Gpu& g)
{
    g.device.waitIdle();
    g.device.destroyFence(g.fence);
    g.device.destroyCommandPool(g.pool);
    g.device.destroy();
    if (g.messenger != VK_NULL_HANDLE) {
        auto destroy = reinterpret_cast<PFN_vkDestroyDebugUtilsMessengerEXT>(
          g.instance.getProcAddr("vkDestroyDebugUtilsMessengerEXT"));
        if (destroy) {
            destroy(g.instance, g.messenger, nullptr);
        }
    }
    g.instance.destroy();
}

// ---------------------------------------------------------------- import

// The caller's pointer imported: the enclosing range of whole alignment units (pointer and
// size must both be multiples of minImportedHostPointerAlignment), a buffer over it, and the
// caller's bytes at `offset` within it. The range may hold bytes of neighbouring allocations;
// the copies touch only [offset, offset + n).
struct Imported
{
    vk::Buffer buffer;
    vk::DeviceMemory memory;
    uint64_t offset = 0;
    uint64_t range = 0;
    uint32_t type = 0;
};

Imported
importPointer(Gpu& g, void* ptr, uint64_t n)
{
    Imported im;
    auto address = reinterpret_cast<uintptr_t>(ptr);
    uintptr_t base = address & ~static_cast<uintptr_t>(g.importAlignment - 1);
    uintptr_t end = (address + n + g.importAlignment - 1) & ~static_cast<uintptr_t>(g.importAlignment - 1);
    im.offset = address - base;
    im.range = end - base;
    auto* basePtr = reinterpret_cast<void*>(base);
    uint32_t bits = g.device.getMemoryHostPointerPropertiesEXT(HOST_PTR, basePtr, g.dld).memoryTypeBits;
    vk::ExternalMemoryBufferCreateInfo external(HOST_PTR);
    vk::BufferCreateInfo info({}, im.offset + n,
                              vk::BufferUsageFlagBits::eTransferSrc | vk::BufferUsageFlagBits::eTransferDst);
    info.pNext = &external;
    im.buffer = g.device.createBuffer(info);
    auto req = g.device.getBufferMemoryRequirements(im.buffer);
    // Coherent memory only: the host reads the caller's buffer straight after the fence wait,
    // and an imported allocation is not mapped, so it could not be invalidated.
    int type = g.find(bits & req.memoryTypeBits, { M::eHostVisible | M::eHostCoherent, M::eHostCoherent }, nullptr);
    // A driver that rounds the buffer's size past the last page would need the next page
    // imported too (the bench's buffers have a spare page after them; ORT's would not).
    uint64_t needed = (req.size + g.importAlignment - 1) & ~(g.importAlignment - 1);
    if (needed > im.range) {
        g.rangeExtended = std::max(g.rangeExtended, needed - im.range);
        im.range = needed;
    }
    if (type < 0 || im.range - (end - base) > g.importAlignment) {
        g.device.destroyBuffer(im.buffer);
        char text[200];
        std::snprintf(text, sizeof text,
                      "cannot import %" PRIu64 " bytes: importable types 0x%x, buffer types 0x%x, "
                      "buffer needs %" PRIu64 " bytes",
                      static_cast<uint64_t>(end - base), bits, req.memoryTypeBits, static_cast<uint64_t>(req.size));
        throw std::runtime_error(text);
    }
    im.type = static_cast<uint32_t>(type);
    vk::ImportMemoryHostPointerInfoEXT import(HOST_PTR, basePtr);
    vk::MemoryAllocateInfo allocate(im.range, im.type);
    allocate.pNext = &import;
    im.memory = g.device.allocateMemory(allocate);
    g.device.bindBufferMemory(im.buffer, im.memory, 0);
    return im;
}

void
release(Gpu& g, Imported& im)
{
    g.device.destroyBuffer(im.buffer);
    g.device.freeMemory(im.memory);
    im = Imported{};
}

// ---------------------------------------------------------------- one size

struct Result
{
    uint64_t size = 0;
    std::string direction;   // "in" (host -> device) or "out" (device -> host)
    std::string variant;     // "a_today", "b_import_per_run", "c_import_cached"
    std::vector<double> total;
    std::vector<std::pair<std::string, std::vector<double>>> parts;
    int verified = 0;
};

[[noreturn]] void
roundTripFailed(const Result& r, const void* got, const void* want, uint64_t n, int run)
{
    const auto* a = static_cast<const uint32_t*>(got);
    const auto* b = static_cast<const uint32_t*>(want);
    uint64_t i = 0;
    while (i < n / 4 && a[i] == b[i]) {
        i++;
    }
    std::fprintf(stderr,
                 "ROUND TRIP FAILED: %s, %s, %s, run %d: word %" PRIu64 " of %" PRIu64
                 " is 0x%08x, expected 0x%08x\n",
                 r.variant.c_str(), r.direction.c_str(), sizeText(r.size).c_str(), run, i, n / 4,
                 i < n / 4 ? a[i] : 0u, i < n / 4 ? b[i] : 0u);
    std::fflush(stderr);
    std::_Exit(1);
}

void
fillPattern(uint32_t* words, uint64_t count, uint64_t seed)
{
    uint64_t x = seed * 0x9E3779B97F4A7C15ull + 1;
    for (uint64_t i = 0; i < count; i++) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        words[i] = static_cast<uint32_t>(x >> 16);
    }
}

// The caller's buffer: 64-byte aligned and not page aligned (--offset into a page), as ORT's
// CPU allocator may give; zeros around it, which no variant may change.
struct CallerBuffer
{
    char* raw = nullptr;
    char* data = nullptr;
    uint64_t span = 0;

    CallerBuffer(uint64_t n, uint64_t offset)
    {
        const auto page = static_cast<uint64_t>(sysconf(_SC_PAGESIZE));
        span = (offset + n + 2 * page + page - 1) / page * page;
        raw = static_cast<char*>(std::aligned_alloc(page, span));
        if (!raw) {
            throw std::bad_alloc();
        }
        std::memset(raw, 0, span);   // touched: ORT's arena hands out memory it has used before
        data = raw + offset;
    }
    ~CallerBuffer() { std::free(raw); }
    CallerBuffer(const CallerBuffer&) = delete;
    CallerBuffer& operator=(const CallerBuffer&) = delete;

    bool outsideTouched(uint64_t n) const
    {
        auto nonzero = [](char c) { return c != 0; };
        return std::any_of(raw, data, nonzero) || std::any_of(data + n, raw + span, nonzero);
    }
};

// One variant's state over a size and direction: its own caller buffer (so that the cached
// import of c is never a second import of b's pages), command buffer and samples.
struct Variant
{
    Result r;
    bool today = false, perRun = false;
    std::unique_ptr<CallerBuffer> caller;
    Imported cached;
    vk::CommandBuffer cb;
    std::vector<double> p1, p2, p3;
};

// The runs of the three variants are interleaved, one of each per round in a rotating order, so
// that a burst of load from elsewhere (the development machine's 2 cores are shared) or a change
// of clocks falls on all three alike rather than on one variant's block.
std::vector<Result>
measureSize(Gpu& g, const Options& o, uint64_t n)
{
    std::vector<Result> results;
    const uint64_t words = n / 4;
    std::vector<uint32_t> expected(words);
    fillPattern(expected.data(), words, n);

    Buffer local = g.local(n);
    Buffer staging = g.staging(n);
    Buffer readback = g.readback(n);
    vk::CommandBuffer cbIn = g.allocate(), cbOut = g.allocate(), cbAux = g.allocate();
    g.recordCopy(cbIn, staging.buffer, 0, local.buffer, 0, n);
    g.recordCopy(cbOut, local.buffer, 0, readback.buffer, 0, n);

    const int total = o.warmup + o.repeats;
    for (const char* direction : { "in", "out" }) {
        const bool in = std::strcmp(direction, "in") == 0;
        std::vector<Variant> variants;
        for (const char* name : { "a_today", "b_import_per_run", "c_import_cached" }) {
            if (name[0] != 'a' && !g.extension) {
                continue;
            }
            Variant v;
            v.r.size = n;
            v.r.direction = direction;
            v.r.variant = name;
            v.today = name[0] == 'a';
            v.perRun = name[0] == 'b';
            v.caller = std::make_unique<CallerBuffer>(n, o.offset);
            v.cb = g.allocate();
            variants.push_back(std::move(v));
        }
        for (auto& v : variants) {
            if (!v.today && !v.perRun) {
                v.cached = importPointer(g, v.caller->data, n);
                v.cached.offset = o.faultOffset ? 0 : v.cached.offset;
                if (in) {
                    g.recordCopy(v.cb, v.cached.buffer, v.cached.offset, local.buffer, 0, n);
                } else {
                    g.recordCopy(v.cb, local.buffer, 0, v.cached.buffer, v.cached.offset, n);
                }
            }
        }
        if (!in) {
            // The device buffer's contents for the outputs: the pattern, uploaded once.
            std::memcpy(staging.mapped, expected.data(), n);
            g.submitWait(cbIn);
        }
        for (int run = 0; run < total; run++) {
            // The first and last words stamped with the run: stale data from an earlier run fails.
            uint32_t stamp = static_cast<uint32_t>(run + 1) * 0x01000193u ^ static_cast<uint32_t>(n);
            expected[0] = stamp;
            expected[words - 1] = ~stamp;
            if (!in) {
                g.record(cbAux, [&](vk::CommandBuffer c) {
                    c.fillBuffer(local.buffer, 0, 4, expected[0]);
                    c.fillBuffer(local.buffer, n - 4, 4, expected[words - 1]);
                });
                g.submitWait(cbAux);
            }
            for (size_t k = 0; k < variants.size(); k++) {
                Variant& v = variants[(static_cast<size_t>(run) + k) % variants.size()];
                char* caller = v.caller->data;
                // Untimed set-up: in, the caller's buffer holds the pattern and the device buffer
                // zeros; out, the caller's buffer zeros.
                if (in) {
                    std::memcpy(caller, expected.data(), n);
                    g.record(cbAux, [&](vk::CommandBuffer c) { c.fillBuffer(local.buffer, 0, VK_WHOLE_SIZE, 0); });
                    g.submitWait(cbAux);
                } else {
                    std::memset(caller, 0, n);
                }

                double t0 = nowMs(), t1 = t0, t2 = t0, t3 = t0;
                if (v.today && in) {
                    ortops::hostcopy::copy(staging.mapped, caller, n);   // coherent: no flush
                    t1 = nowMs();
                    g.submitWait(cbIn);
                    t2 = t3 = nowMs();
                } else if (v.today) {
                    g.submitWait(cbOut);
                    t1 = nowMs();
                    g.invalidate(readback);
                    ortops::hostcopy::copy(caller, readback.mapped, n);
                    t2 = t3 = nowMs();
                } else if (v.perRun) {
                    Imported im = importPointer(g, caller, n);
                    im.offset = o.faultOffset ? 0 : im.offset;
                    t1 = nowMs();
                    if (in) {
                        g.recordCopy(v.cb, im.buffer, im.offset, local.buffer, 0, n);
                    } else {
                        g.recordCopy(v.cb, local.buffer, 0, im.buffer, im.offset, n);
                    }
                    g.submitWait(v.cb);
                    t2 = nowMs();
                    release(g, im);
                    t3 = nowMs();
                } else {
                    g.submitWait(v.cb);
                    t1 = t2 = t3 = nowMs();
                }

                // Untimed check, every run, the warm-up runs too.
                if (in) {
                    g.submitWait(cbOut);
                    g.invalidate(readback);
                    if (std::memcmp(readback.mapped, expected.data(), n) != 0) {
                        roundTripFailed(v.r, readback.mapped, expected.data(), n, run);
                    }
                } else if (std::memcmp(caller, expected.data(), n) != 0) {
                    roundTripFailed(v.r, caller, expected.data(), n, run);
                }
                if (v.caller->outsideTouched(n)) {
                    std::fprintf(stderr, "ROUND TRIP FAILED: %s, %s, %s, run %d: bytes outside the caller's buffer "
                                 "changed\n", v.r.variant.c_str(), direction, sizeText(n).c_str(), run);
                    std::fflush(stderr);
                    std::_Exit(1);
                }
                v.r.verified++;
                if (run >= o.warmup) {
                    v.r.total.push_back(t3 - t0);
                    v.p1.push_back(t1 - t0);
                    v.p2.push_back(t2 - t1);
                    v.p3.push_back(t3 - t2);
                }
            }
        }
        for (auto& v : variants) {
            if (!v.today && !v.perRun) {
                release(g, v.cached);
            }
            if (v.today && in) {
                v.r.parts = { { "host_copy", v.p1 }, { "gpu_copy", v.p2 } };
            } else if (v.today) {
                v.r.parts = { { "gpu_copy", v.p1 }, { "host_copy", v.p2 } };
            } else if (v.perRun) {
                v.r.parts = { { "import", v.p1 }, { "gpu_copy", v.p2 }, { "release", v.p3 } };
            } else {
                v.r.parts = { { "gpu_copy", v.p1 } };
            }
            g.device.freeCommandBuffers(g.pool, v.cb);
            results.push_back(std::move(v.r));
        }
    }
    g.device.freeCommandBuffers(g.pool, { cbIn, cbOut, cbAux });
    g.destroy(local);
    g.destroy(staging);
    g.destroy(readback);
    return results;
}

// ---------------------------------------------------------------- report

std::string
ms(double v)
{
    char buf[32];
    // Four significant digits down to the microsecond: an import on lavapipe takes a few.
    std::snprintf(buf, sizeof buf, v < 0.1 ? "%.4f" : (v < 1 ? "%.3f" : (v < 10 ? "%.2f" : "%.1f")), v);
    return buf;
}

const Result*
findResult(const std::vector<Result>& all, uint64_t size, const std::string& dir, const std::string& variant)
{
    for (const auto& r : all) {
        if (r.size == size && r.direction == dir && r.variant == variant) {
            return &r;
        }
    }
    return nullptr;
}

double
part(const Result& r, const std::string& name)
{
    for (const auto& p : r.parts) {
        if (p.first == name) {
            return quantile(p.second, 0.5);
        }
    }
    return 0;
}

std::string
table(const Gpu& g, const Options& o, const std::vector<Result>& all)
{
    std::ostringstream t;
    for (const char* dir : { "in", "out" }) {
        bool in = std::strcmp(dir, "in") == 0;
        t << "\n" << (in ? "host -> device (an input: ORT's tensor to a device-local buffer)"
                         : "device -> host (an output: a device-local buffer to ORT's tensor)")
          << ", ms, median / p90 of " << o.repeats << "\n\n";
        t << "| size | a: today (host copy + GPU copy) | b: import per run (import + GPU copy + release) | "
             "c: import cached (GPU copy) | b / a |\n|---|---|---|---|---|\n";
        for (uint64_t n : o.sizes) {
            const Result* a = findResult(all, n, dir, "a_today");
            const Result* b = findResult(all, n, dir, "b_import_per_run");
            const Result* c = findResult(all, n, dir, "c_import_cached");
            t << "| " << sizeText(n) << " | " << ms(quantile(a->total, 0.5)) << " / " << ms(quantile(a->total, 0.9))
              << " (" << ms(part(*a, "host_copy")) << " + " << ms(part(*a, "gpu_copy")) << ") | ";
            if (b && c) {
                t << ms(quantile(b->total, 0.5)) << " / " << ms(quantile(b->total, 0.9)) << " ("
                  << ms(part(*b, "import")) << " + " << ms(part(*b, "gpu_copy")) << " + " << ms(part(*b, "release"))
                  << ") | " << ms(quantile(c->total, 0.5)) << " / " << ms(quantile(c->total, 0.9)) << " | ";
                char ratio[16];
                std::snprintf(ratio, sizeof ratio, "%.2f", quantile(b->total, 0.5) / quantile(a->total, 0.5));
                t << ratio << " |\n";
            } else {
                t << "— | — | — |\n";
            }
        }
    }
    (void)g;
    return t.str();
}

std::string
json(const Gpu& g, const Options& o, const std::vector<Result>& all, const std::string& when)
{
    std::ostringstream j;
    auto settings = ortops::hostcopy::settings();
    j << "{\n  \"tool\": \"host_import_bench\",\n  \"when\": " << jsonString(when) << ",\n";
    j << "  \"device\": " << jsonString(g.name) << ",\n  \"driver\": " << jsonString(g.driver) << ",\n";
    j << "  \"validation\": " << (g.validation ? "true" : "false") << ",\n";
    j << "  \"external_memory_host\": {\"offered\": " << (g.extension ? "true" : "false")
      << ", \"min_imported_host_pointer_alignment\": " << g.importAlignment
      << ", \"importable_memory_types\": [";
    bool first = true;
    for (uint32_t i = 0; i < g.memory.memoryTypeCount; i++) {
        if (g.importableTypes & (1u << i)) {
            j << (first ? "" : ", ") << i;
            first = false;
        }
    }
    j << "], \"buffer_importable\": "
      << ((g.externalBuffer.externalMemoryFeatures & vk::ExternalMemoryFeatureFlagBits::eImportable) ? "true" : "false")
      << ", \"range_extended_bytes\": " << g.rangeExtended << ", \"buffer_dedicated_only\": "
      << ((g.externalBuffer.externalMemoryFeatures & vk::ExternalMemoryFeatureFlagBits::eDedicatedOnly) ? "true"
                                                                                                          : "false")
      << "},\n";
    j << "  \"memory_types\": [";
    for (uint32_t i = 0; i < g.memory.memoryTypeCount; i++) {
        const auto& mt = g.memory.memoryTypes[i];
        j << (i ? ", " : "") << "{\"index\": " << i << ", \"flags\": " << jsonString(flagsText(mt.propertyFlags))
          << ", \"heap\": " << mt.heapIndex << ", \"heap_bytes\": " << g.memory.memoryHeaps[mt.heapIndex].size << "}";
    }
    j << "],\n";
    j << "  \"settings\": {\"repeats\": " << o.repeats << ", \"warmup\": " << o.warmup
      << ", \"caller_offset\": " << o.offset << ", \"copy_threads\": " << settings.threads
      << ", \"copy_chunk\": " << settings.chunk << ", \"check\": " << (o.check ? "true" : "false") << "},\n";
    j << "  \"results\": [\n";
    for (size_t k = 0; k < all.size(); k++) {
        const auto& r = all[k];
        j << "    {\"bytes\": " << r.size << ", \"direction\": \"" << r.direction << "\", \"variant\": \"" << r.variant
          << "\", \"median_ms\": " << quantile(r.total, 0.5) << ", \"p90_ms\": " << quantile(r.total, 0.9)
          << ", \"min_ms\": " << quantile(r.total, 0.0) << ", \"verified_runs\": " << r.verified << ", \"parts_median_ms\": {";
        for (size_t i = 0; i < r.parts.size(); i++) {
            j << (i ? ", " : "") << "\"" << r.parts[i].first << "\": " << quantile(r.parts[i].second, 0.5);
        }
        j << "}, \"runs_ms\": [";
        for (size_t i = 0; i < r.total.size(); i++) {
            j << (i ? ", " : "") << r.total[i];
        }
        j << "]}" << (k + 1 < all.size() ? "," : "") << "\n";
    }
    j << "  ]\n}\n";
    return j.str();
}

} // namespace

int
main(int argc, char** argv)
{
    Options o;
    try {
        o = parse(argc, argv);
    } catch (const std::exception& e) {
        std::fprintf(stderr, "host_import_bench: %s\n", e.what());
        return 2;
    }
    Gpu g;
    std::vector<Result> all;
    std::string header;
    char when[32];
    std::time_t now = std::time(nullptr);
    std::strftime(when, sizeof when, "%Y-%m-%d %H:%M UTC", std::gmtime(&now));
    try {
        open(g, o);
        std::ostringstream h;
        auto settings = ortops::hostcopy::settings();
        h << "device: " << g.name << " (" << g.driver << "), " << when << "\n";
        h << "validation: " << (g.validation ? "on (synchronization validation)" : "off") << "\n";
        if (g.extension) {
            h << "VK_EXT_external_memory_host: offered; minImportedHostPointerAlignment " << g.importAlignment
              << " bytes; host allocations importable as memory types {";
            bool first = true;
            for (uint32_t i = 0; i < g.memory.memoryTypeCount; i++) {
                if (g.importableTypes & (1u << i)) {
                    h << (first ? "" : ", ") << i;
                    first = false;
                }
            }
            h << "}; transfer buffers importable: "
              << ((g.externalBuffer.externalMemoryFeatures & vk::ExternalMemoryFeatureFlagBits::eImportable) ? "yes"
                                                                                                             : "no")
              << "\n";
        } else {
            h << "VK_EXT_external_memory_host: not offered by " << g.name
              << "; variants b and c (import) cannot run, only a (today's path) is measured\n";
        }
        bool c1 = false, c2 = false;
        int stagingType = g.find(~0u, { M::eHostVisible | M::eHostCoherent }, &c1);
        int readbackType = g.find(~0u,
                                  { M::eHostVisible | M::eHostCached | M::eHostCoherent,
                                    M::eHostVisible | M::eHostCached, M::eHostVisible | M::eHostCoherent },
                                  &c2);
        for (uint32_t i = 0; i < g.memory.memoryTypeCount; i++) {
            const auto& mt = g.memory.memoryTypes[i];
            h << "  memory type " << i << ": " << flagsText(mt.propertyFlags) << ", heap " << mt.heapIndex << " ("
              << (g.memory.memoryHeaps[mt.heapIndex].size >> 20) << " MiB)"
              << (static_cast<int>(i) == stagingType ? "  [Kompute staging]" : "")
              << (static_cast<int>(i) == readbackType ? "  [readback]" : "")
              << ((g.importableTypes >> i) & 1 ? "  [importable host pointer]" : "") << "\n";
        }
        h << "caller's buffer at a " << o.offset << "-byte offset into a page; host copies on " << settings.threads
          << " thread(s) in " << (settings.chunk >> 20) << " MiB chunks (src/core/vk/hostcopy.cpp); " << o.warmup
          << " warm-up run(s), " << o.repeats << " timed\n";
        header = h.str();
        std::fputs(header.c_str(), stdout);
        std::fflush(stdout);
        if (g.extension && (o.offset % 4 || o.offset >= g.importAlignment)) {
            throw std::invalid_argument("--offset must be a multiple of 4 below the import alignment");
        }
        for (uint64_t n : o.sizes) {
            auto r = measureSize(g, o, n);
            all.insert(all.end(), r.begin(), r.end());
            std::printf("  %s done\n", sizeText(n).c_str());
            std::fflush(stdout);
        }
    } catch (const std::exception& e) {
        std::fprintf(stderr, "host_import_bench: %s\n", e.what());
        return 2;
    }
    std::string text = table(g, o, all);
    int checks = 0;
    for (const auto& r : all) {
        checks += r.verified;
    }
    std::string verdict = "round trip: bit-exact in every variant (" + std::to_string(checks) + " runs checked)\n";
    if (g.rangeExtended) {
        text += "\nnote: the driver's buffer requirements made an import reach " +
                std::to_string(g.rangeExtended) + " bytes past the caller's last page\n";
    }
    std::fputs(text.c_str(), stdout);
    std::fputs(("\n" + verdict).c_str(), stdout);
    if (!o.out.empty()) {
        std::error_code made;
        std::filesystem::create_directories(o.out, made);
        std::ofstream j(o.out + "/host_import.json"), m(o.out + "/host_import.md");
        j << json(g, o, all, when);
        m << "```\n" << header << "```\n" << text << "\n" << verdict;
        if (!j.flush() || !m.flush()) {
            std::fprintf(stderr, "host_import_bench: cannot write %s/host_import.json or .md\n", o.out.c_str());
            return 2;
        }
    }
    close(g);
    std::vector<std::string> messages;
    {
        std::lock_guard<std::mutex> lock(g_messagesLock);
        messages = g_messages;
    }
    if (g.validation) {
        std::printf("validation messages: %zu\n", messages.size());
        for (size_t i = 0; i < messages.size() && i < 10; i++) {
            std::printf("  %s\n", messages[i].substr(0, 600).c_str());
        }
    }
    std::fflush(stdout);
    return messages.empty() ? 0 : 3;
}
