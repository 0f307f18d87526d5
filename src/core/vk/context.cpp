// Validation messages, the context's device and queues, and device loss (see context.hpp).

#include "vk/context.hpp"
#include "vk/cooperative_matrix.hpp"
#include "vk/grid_support.hpp"
#include "vk/instance.hpp"

#include <algorithm>

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

} // namespace

std::vector<std::string>
takeMessages()
{
    std::lock_guard<std::mutex> lock(g_messages_mutex);
    std::vector<std::string> out;
    out.swap(g_messages);
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
    // The Vulkan memory model where offered (the persistent step kernel; the cooperative-matrix
    // kernels need it too, and its structure is chained once, here), then matrix hardware for
    // mode "fast" (ortops/fast.py), where the device offers it.
    MemoryModelEnable memoryModel(*physical);
    memoryModelDeviceScope = memoryModel.deviceScope;
    void* features = memoryModel.chain(nullptr);
    Int64AtomicsEnable int64(*physical);
    int64Atomics = int64.enabled;
    features = int64.chain(features);
    if (int64.enabled) {
        deviceInfo.setPEnabledFeatures(reinterpret_cast<const vk::PhysicalDeviceFeatures*>(&int64.core));
    }
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
