// The devices' descriptions, the choice of one and the shared contexts (see devices.hpp).

#include "vk/devices.hpp"
#include "vk/grid_support.hpp"

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <mutex>
#include <stdexcept>

#include "base/text.hpp"
#include "vk/instance.hpp"

namespace ortops {

namespace {

using text::lower;
using text::trim;

// ---------------------------------------------------------------- descriptions

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

// 8-4-4-4-12 lowercase hex, as nvidia-smi prints a GPU UUID (after its "GPU-").
std::string
uuidText(const uint8_t* bytes)
{
    static const char* hex = "0123456789abcdef";
    std::string out;
    for (int i = 0; i < VK_UUID_SIZE; i++) {
        if (i == 4 || i == 6 || i == 8 || i == 10) {
            out += '-';
        }
        out += hex[bytes[i] >> 4];
        out += hex[bytes[i] & 15];
    }
    return out;
}

// Identity: the device UUID (VkPhysicalDeviceIDProperties, core in Vulkan 1.1; on NVIDIA the
// same bytes as the CUDA/NVML GPU UUID), the LUID where valid (Windows), and the PCI address
// from VK_EXT_pci_bus_info where offered (not chained otherwise: the validation layer
// reports a structure of an extension the device lacks). ortops.visible maps scheduler
// variables (CUDA_VISIBLE_DEVICES) to Vulkan devices through these.
void
describeIdentity(const vk::PhysicalDevice& device, DeviceDescription& d)
{
    auto chain = device.getProperties2<vk::PhysicalDeviceProperties2,
                                       vk::PhysicalDeviceIDProperties>();
    const auto& id = chain.get<vk::PhysicalDeviceIDProperties>();
    d.uuid = uuidText(id.deviceUUID.data());
    if (id.deviceLUIDValid) {
        std::string luid;
        static const char* hex = "0123456789abcdef";
        for (int i = 0; i < VK_LUID_SIZE; i++) {
            luid += hex[id.deviceLUID[i] >> 4];
            luid += hex[id.deviceLUID[i] & 15];
        }
        d.luid = luid;
    }
    if (deviceExtensionAvailable(device, VK_EXT_PCI_BUS_INFO_EXTENSION_NAME)) {
        auto pci = device.getProperties2<vk::PhysicalDeviceProperties2,
                                         vk::PhysicalDevicePCIBusInfoPropertiesEXT>()
                     .get<vk::PhysicalDevicePCIBusInfoPropertiesEXT>();
        // nvidia-smi's form (domain 8 hex digits there; 4 here, as lspci and CUDA print it).
        char text[32];
        std::snprintf(text, sizeof text, "%04x:%02x:%02x.%x", pci.pciDomain, pci.pciBus,
                      pci.pciDevice, pci.pciFunction);
        d.pciBusId = std::string(text);
    }
}

// The fields of ortops.device.Device.
DeviceDescription
describe(const vk::Instance& instance, const vk::PhysicalDevice& device, uint32_t index)
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
                                        vk::PhysicalDeviceShaderFloat16Int8Features>();
    int family = computeQueueFamily(device);
    uint32_t timestampBits = 0;
    if (family >= 0) {
        timestampBits = device.getQueueFamilyProperties()[family].timestampValidBits;
    }
    const auto& limits = props.limits;
    DeviceDescription d;
    d.index = index;
    d.name = std::string(props.deviceName.data());
    d.type = deviceTypeName(props.deviceType);
    d.vendorId = props.vendorID;
    d.deviceId = props.deviceID;
    d.apiVersion = std::to_string(VK_VERSION_MAJOR(props.apiVersion)) + "." +
                   std::to_string(VK_VERSION_MINOR(props.apiVersion)) + "." +
                   std::to_string(VK_VERSION_PATCH(props.apiVersion));
    d.driver = std::string(driver.driverName.data());
    d.driverInfo = std::string(driver.driverInfo.data());
    d.maxStorageBufferRange = limits.maxStorageBufferRange;
    for (int i = 0; i < 3; i++) {
        d.maxWorkgroupSize[i] = limits.maxComputeWorkGroupSize[i];
        d.maxWorkgroupCount[i] = limits.maxComputeWorkGroupCount[i];
    }
    d.maxWorkgroupInvocations = limits.maxComputeWorkGroupInvocations;
    d.maxSharedMemory = limits.maxComputeSharedMemorySize;
    d.maxPushConstantsSize = limits.maxPushConstantsSize;
    d.subgroupSize = subgroup.subgroupSize;
    d.float16 = features.get<vk::PhysicalDeviceShaderFloat16Int8Features>().shaderFloat16;
    d.float64 = features.get<vk::PhysicalDeviceFeatures2>().features.shaderFloat64;
    // Float controls (Vulkan 1.2): whether a shader may declare that NaN, Inf and the sign of
    // zero are preserved (SignedZeroInfNanPreserve) and how denormals are treated. Without
    // the declaration a compiler may assume no NaN (NVIDIA turns a compare-based clamp into a
    // NaN-dropping min/max).
    d.nanPreserveFloat16 = floats.shaderSignedZeroInfNanPreserveFloat16;
    d.nanPreserveFloat32 = floats.shaderSignedZeroInfNanPreserveFloat32;
    d.denormPreserveFloat32 = floats.shaderDenormPreserveFloat32;
    d.denormFlushFloat32 = floats.shaderDenormFlushToZeroFloat32;
    d.timestampPeriodNs = limits.timestampPeriod;
    d.timestamps = timestampBits > 0 && limits.timestampComputeAndGraphics;
    d.portability = deviceExtensionAvailable(device, kPortabilitySubset);
    describeIdentity(device, d);
    // VK_KHR_cooperative_matrix's combinations (mode "fast", cooperative_matrix.hpp).
    d.cooperativeMatrix = describeCooperativeMatrix(instance, device);
    d.subgroupSizeRange = describeSubgroupSizes(device);
    describeGridSupport(device, d);   // the persistent step kernel's needs
    return d;
}

// ---------------------------------------------------------------- choice

const char* NO_DEVICE = "no Vulkan device with a compute queue was found. Install a Vulkan driver for your GPU, or "
                        "lavapipe (Vulkan on the CPU) from Debian's package mesa-vulkan-drivers (apt-get install "
                        "mesa-vulkan-drivers libvulkan1)";

// The devices there are, for a message: index, name, type and UUID of each.
std::string
listing(const std::vector<DeviceDescription>& found)
{
    if (found.empty()) {
        return std::string("none (") + NO_DEVICE + ")";
    }
    std::string out;
    for (const auto& d : found) {
        if (!out.empty()) {
            out += "; ";
        }
        out += "[" + std::to_string(d.index) + "] " + d.name + " (" + d.type + ") uuid " + d.uuid;
    }
    return out;
}

[[noreturn]] void
refuse(const std::string& what, const std::string& from, const std::vector<DeviceDescription>& found)
{
    throw std::invalid_argument("ortops: " + what + from + "; devices: " + listing(found));
}

bool
allDigits(const std::string& s)
{
    return !s.empty() && std::all_of(s.begin(), s.end(), [](char c) { return std::isdigit(static_cast<unsigned char>(c)); });
}

std::string
withoutDashes(const std::string& s)
{
    std::string out;
    for (char ch : s) {
        if (ch != '-') {
            out += ch;
        }
    }
    return out;
}

// The UUID digits `text` stands for, or nothing when it does not look like a UUID (at
// least 8 hex digits; any number after "GPU-"), so that a name fragment such as "cafe" is
// still matched against names.
std::optional<std::string>
uuidPrefix(const std::string& text)
{
    std::string t = lower(trim(text));
    bool explicitPrefix = t.rfind("gpu-", 0) == 0;
    std::string digits = withoutDashes(explicitPrefix ? t.substr(4) : t);
    bool hex = std::all_of(digits.begin(), digits.end(), [](char c) { return std::isxdigit(static_cast<unsigned char>(c)); });
    if (!hex || digits.empty() || digits.size() > 32 || (!explicitPrefix && digits.size() < 8)) {
        return std::nullopt;
    }
    return digits;
}

int
preference(const std::string& type)
{
    static const char* order[] = { "discrete", "integrated", "virtual", "cpu", "other" };
    for (int i = 0; i < 5; i++) {
        if (type == order[i]) {
            return i;
        }
    }
    return 5;
}

std::optional<size_t>
byUuid(const std::vector<DeviceDescription>& found, const std::string& text, const std::string& from)
{
    std::optional<std::string> digits = uuidPrefix(text);
    if (!digits) {
        return std::nullopt;
    }
    std::vector<size_t> hits;
    for (size_t i = 0; i < found.size(); i++) {
        if (withoutDashes(found[i].uuid).rfind(*digits, 0) == 0) {
            hits.push_back(i);
        }
    }
    if (hits.size() == 1) {
        return hits[0];
    }
    if (hits.empty()) {
        refuse("no Vulkan device has a UUID starting with '" + text + "'", from, found);
    }
    refuse("the UUID prefix '" + text + "' matches " + std::to_string(hits.size()) +
             " Vulkan devices (give more digits)", from, found);
}

// The device `spec` names (devices.hpp, chooseAmong's first rule); `from` says where it came from.
size_t
match(const std::vector<DeviceDescription>& found, const std::string& spec, const std::string& from)
{
    std::string text = trim(spec);
    if (allDigits(text)) {
        for (size_t i = 0; i < found.size(); i++) {
            if (text.size() <= 9 && found[i].index == std::stoul(text)) {
                return i;
            }
        }
        refuse("no Vulkan device with index " + text, from, found);
    }
    if (std::optional<size_t> hit = byUuid(found, text, from)) {
        return *hit;
    }
    std::string l = lower(text);
    for (size_t i = 0; i < found.size(); i++) {
        if (found[i].type == l) {
            return i;
        }
    }
    for (size_t i = 0; i < found.size(); i++) {
        if (lower(found[i].name).find(l) != std::string::npos) {
            return i;
        }
    }
    refuse("no Vulkan device matches '" + text + "' (an index, a type such as 'discrete' or 'cpu', a UUID or its "
             "prefix, or part of a name)", from, found);
}

// The first device the scheduler assigns, where an NVIDIA device is there to assign.
std::optional<size_t>
assigned(const std::vector<DeviceDescription>& found, const VisibilityEnv& visibility)
{
    if (std::none_of(found.begin(), found.end(), [](const auto& d) { return d.vendorId == NVIDIA_VENDOR_ID; })) {
        return std::nullopt;
    }
    std::vector<VisibleDevice> seen;
    for (const DeviceDescription& d : found) {
        seen.push_back(visibleDevice(d));
    }
    std::optional<std::vector<size_t>> chosen = assignedDevices(visibility, seen);
    if (!chosen || chosen->empty()) {
        return std::nullopt;
    }
    return chosen->front();
}

std::optional<std::string>
given(const std::optional<std::string>& text)
{
    return text && !trim(*text).empty() ? text : std::nullopt;
}

std::mutex g_contextsLock;
// Never destroyed: a context may still be in use while static destructors run at exit (a
// custom-op library unloaded after the Vulkan loader), and the process's end frees it.
auto* g_contexts = new std::map<uint32_t, std::shared_ptr<Context>>();

} // namespace

std::vector<DeviceDescription>
enumerateDevices()
{
    std::vector<DeviceDescription> out;
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
            out.push_back(describe(instance, devices[i], i));
        }
    }
    instance.destroy();
    return out;
}

const std::vector<DeviceDescription>&
devices()
{
    static const std::vector<DeviceDescription> found = enumerateDevices();
    return found;
}

std::string
deviceLabel(const DeviceDescription& d)
{
    std::string kind = d.portability ? d.type + ", portability implementation" : d.type;
    return "[" + std::to_string(d.index) + "] " + d.name + " (" + kind + ", " + d.driver + " " + d.driverInfo +
           ", Vulkan " + d.apiVersion + ")";
}

DeviceRequest
DeviceRequest::fromProcess(const std::optional<std::string>& spec)
{
    const char* env = std::getenv("ORTOPS_DEVICE");
    return DeviceRequest{ spec, env ? std::optional<std::string>(env) : std::nullopt, VisibilityEnv::fromProcess() };
}

size_t
chooseAmong(const std::vector<DeviceDescription>& found, const DeviceRequest& request)
{
    if (std::optional<std::string> spec = given(request.spec)) {
        return match(found, *spec, "");
    }
    if (std::optional<std::string> env = given(request.environment)) {
        return match(found, *env, " (from ORTOPS_DEVICE)");
    }
    if (found.empty()) {
        throw NoDeviceError(std::string("ortops: ") + NO_DEVICE);
    }
    if (std::optional<size_t> position = assigned(found, request.visibility)) {
        return *position;
    }
    return static_cast<size_t>(std::min_element(found.begin(), found.end(), [](const auto& a, const auto& b) {
                                   return std::make_pair(preference(a.type), a.index) <
                                          std::make_pair(preference(b.type), b.index);
                               }) - found.begin());
}

const DeviceDescription&
chooseDevice(const std::optional<std::string>& spec)
{
    const std::vector<DeviceDescription>& found = devices();
    return found[chooseAmong(found, DeviceRequest::fromProcess(spec))];
}

bool
validationRequested()
{
    const char* env = std::getenv("ORTOPS_VALIDATION");
    if (!env) {
        return false;
    }
    std::string v = lower(trim(env));
    return !(v.empty() || v == "0" || v == "false" || v == "no");
}

uint32_t
requestedQueues()
{
    const char* env = std::getenv("ORTOPS_QUEUES");
    if (!env || trim(env).empty()) {
        return 1;
    }
    std::string v = trim(env);
    if (!std::all_of(v.begin(), v.end(), [](char c) { return std::isdigit(static_cast<unsigned char>(c)); }) ||
        v.size() > 4 || std::stoul(v) < 1) {
        throw std::invalid_argument("ortops: ORTOPS_QUEUES must be a positive integer, got '" + v + "'");
    }
    return static_cast<uint32_t>(std::stoul(v));
}

std::shared_ptr<Context>
sharedContext(uint32_t index, bool validation, uint32_t maxQueues)
{
    std::lock_guard<std::mutex> lock(g_contextsLock);
    auto& ctx = (*g_contexts)[index];
    if (!ctx || ctx->lost.load()) {
        ctx = std::make_shared<Context>(index, validation, maxQueues);
    }
    return ctx;
}

} // namespace ortops
