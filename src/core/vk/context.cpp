// Instance and device creation, validation messages, device descriptions and device loss
// (see context.hpp).

#include "vk/context.hpp"
#include "vk/cooperative_matrix.hpp"
#include "vk/grid_support.hpp"

#include <algorithm>
#include <cstdio>
#include <cstring>

namespace ortops {

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

// ---------------------------------------------------------------- portability

// VK_KHR_portability_enumeration: since loader 1.3.216 a portability implementation (MoltenVK
// on Apple GPUs, other layered drivers) is listed only when the instance enables this extension
// and sets VK_INSTANCE_CREATE_ENUMERATE_PORTABILITY_BIT_KHR. Both are requested only when the
// loader offers the extension: an older loader would refuse an unknown extension
// (VK_ERROR_EXTENSION_NOT_PRESENT) and lists such devices anyway.
const char* kPortabilityEnumeration = "VK_KHR_portability_enumeration";
// A device that is a portability implementation (not fully conformant) exposes this one; the
// spec requires enabling it on such a device.
const char* kPortabilitySubset = "VK_KHR_portability_subset";

std::mutex g_extensions_mutex;
std::vector<std::string> g_enabled_extensions;  // the last instance's, for the tests

bool
instanceExtensionAvailable(const char* name)
{
    for (const auto& ext : vk::enumerateInstanceExtensionProperties()) {
        if (std::strcmp(ext.extensionName, name) == 0) {
            return true;
        }
    }
    return false;
}

bool
deviceExtensionAvailable(const vk::PhysicalDevice& device, const char* name)
{
    for (const auto& ext : device.enumerateDeviceExtensionProperties()) {
        if (std::strcmp(ext.extensionName, name) == 0) {
            return true;
        }
    }
    return false;
}

// ---------------------------------------------------------------- instance and device

vk::Instance
createInstance(bool validation, VkDebugUtilsMessengerCreateInfoEXT* messengerInfo)
{
    // Vulkan 1.2 for VkPhysicalDeviceDriverProperties and Vulkan 1.1 subgroup properties;
    // lavapipe (Debian 12) and every current GPU driver offer it. 1.3 where the loader offers
    // it, for the SPIR-V 1.6 cooperative-matrix kernel (instanceApiVersion); a device below it
    // still runs at its own version.
    vk::ApplicationInfo app("ortops", 1, "ortops", 1, instanceApiVersion());
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
    if (instanceExtensionAvailable(kPortabilityEnumeration)) {
        extensions.push_back(kPortabilityEnumeration);
        info.flags |= vk::InstanceCreateFlagBits::eEnumeratePortabilityKHR;
    }
    info.setPEnabledLayerNames(layers);
    info.setPEnabledExtensionNames(extensions);
    vk::Instance instance = vk::createInstance(info);
    std::lock_guard<std::mutex> lock(g_extensions_mutex);
    g_enabled_extensions.assign(extensions.begin(), extensions.end());
    return instance;
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

bool
hasDeviceExtension(const vk::PhysicalDevice& device, const char* name)
{
    for (const auto& ext : device.enumerateDeviceExtensionProperties()) {
        if (std::strcmp(ext.extensionName, name) == 0) {
            return true;
        }
    }
    return false;
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
    if (hasDeviceExtension(device, VK_EXT_PCI_BUS_INFO_EXTENSION_NAME)) {
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

} // namespace

std::vector<std::string>
takeMessages()
{
    std::lock_guard<std::mutex> lock(g_messages_mutex);
    std::vector<std::string> out;
    out.swap(g_messages);
    return out;
}

std::vector<std::string>
enabledInstanceExtensions()
{
    std::lock_guard<std::mutex> lock(g_extensions_mutex);
    return g_enabled_extensions;
}

std::vector<std::string>
availableInstanceExtensions()
{
    std::vector<std::string> out;
    for (const auto& ext : vk::enumerateInstanceExtensionProperties()) {
        out.emplace_back(ext.extensionName.data());
    }
    return out;
}

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

// ---------------------------------------------------------------- Context

Context::Context(uint32_t index, bool validation, uint32_t maxQueues)
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
        throw std::out_of_range("ortops: no Vulkan device with index " + std::to_string(index));
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
    std::vector<const char*> deviceExtensions;
    if (deviceExtensionAvailable(*physical, kPortabilitySubset)) {
        deviceExtensions.push_back(kPortabilitySubset);  // required on such a device
    }
    // Matrix hardware for mode "fast" (ortops/fast.py), where the device offers it.
    // The Vulkan memory model where offered (the persistent step kernel; the cooperative-matrix
    // kernels need it too, and its structure is chained once, here).
    MemoryModelEnable memoryModel(*physical);
    memoryModelDeviceScope = memoryModel.deviceScope;
    void* features = memoryModel.chain(nullptr);
    CooperativeMatrixEnable coopmat(*physical, validation, cooperativeMatrixOff);
    if (coopmat.usable) {
        deviceExtensions.push_back(kCooperativeMatrix);
        features = coopmat.chain(features);
    }
    deviceInfo.pNext = features;
    cooperativeMatrix = coopmat.usable;
    deviceInfo.setPEnabledExtensionNames(deviceExtensions);
    device = std::make_shared<vk::Device>(physical->createDevice(deviceInfo));
    for (uint32_t i = 0; i < count; i++) {
        queues.push_back(std::make_unique<Queue>());
        queues.back()->queue = device->getQueue(family, i);
    }
}

Context::~Context()
{
    pipelines.clear();   // every program is gone (each holds the context): only idle ones are left
    if (device) {
        try {
            device->waitIdle();  // fails on a lost device; destroying is still allowed
        } catch (const std::exception&) {
        }
        device->destroy();
    }
    destroyInstance();
}

Queue&
Context::pickQueue()
{
    return *queues[nextQueue++ % queues.size()];
}

void
Context::markLost(const std::string& what)
{
    std::lock_guard<std::mutex> guard(lostLock);
    if (!lost) {
        lostReason = what;
        lost = true;
    }
}

void
Context::fail(const std::string& what)
{
    markLost(what);
    throw DeviceLostError("ortops: " + what + "; the Vulkan device is lost for this context: "
                          "create a new session or layer to continue");
}

void
Context::checkAlive()
{
    if (lost) {
        std::lock_guard<std::mutex> guard(lostLock);
        throw DeviceLostError("ortops: the Vulkan device was lost earlier (" + lostReason +
                              "); create a new session or layer to continue");
    }
}

void
Context::simulateLoss()
{
    markLost("device loss simulated by a test");
}

void
Context::destroyInstance()
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

} // namespace ortops
