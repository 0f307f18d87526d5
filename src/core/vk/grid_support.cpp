// The device support of a persistent grid (see grid_support.hpp).

#include "vk/grid_support.hpp"

#include <cstdlib>
#include <cstring>
#include <string>

#include "vk/devices.hpp"

namespace ortops {

namespace {

bool
offers(const vk::PhysicalDevice& device, const char* extension)
{
    for (const auto& ext : device.enumerateDeviceExtensionProperties()) {
        if (std::strcmp(ext.extensionName, extension) == 0) {
            return true;
        }
    }
    return false;
}

// The device's memory-model features (core in Vulkan 1.2: not asked of an older device, whose
// validation layer would report the structure).
VkPhysicalDeviceVulkanMemoryModelFeatures
memoryModelFeatures(const vk::PhysicalDevice& device)
{
    VkPhysicalDeviceVulkanMemoryModelFeatures mm{};
    mm.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_MEMORY_MODEL_FEATURES;
    if (device.getProperties().apiVersion < VK_API_VERSION_1_2) {
        return mm;
    }
    VkPhysicalDeviceFeatures2 f2{};
    f2.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2;
    f2.pNext = &mm;
    vkGetPhysicalDeviceFeatures2(static_cast<VkPhysicalDevice>(device), &f2);
    return mm;
}

} // namespace

bool
persistentSwitchedOff()
{
    const char* env = std::getenv("ORTOPS_PERSISTENT_STEPS");
    return env && std::string(env) == "0";
}

MemoryModelEnable::MemoryModelEnable(const vk::PhysicalDevice& device)
{
    VkPhysicalDeviceVulkanMemoryModelFeatures offered = memoryModelFeatures(device);
    features.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_MEMORY_MODEL_FEATURES;
    enabled = offered.vulkanMemoryModel;
    deviceScope = enabled && offered.vulkanMemoryModelDeviceScope && !persistentSwitchedOff();
    features.vulkanMemoryModel = enabled;
    features.vulkanMemoryModelDeviceScope = deviceScope;
}

void*
MemoryModelEnable::chain(void* next)
{
    if (!enabled) {
        return next;
    }
    features.pNext = next;
    return &features;
}

Int64AtomicsEnable::Int64AtomicsEnable(const vk::PhysicalDevice& device)
{
    features.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SHADER_ATOMIC_INT64_FEATURES;
    if (persistentSwitchedOff() || device.getProperties().apiVersion < VK_API_VERSION_1_2
        || !device.getFeatures().shaderInt64) {
        return;
    }
    VkPhysicalDeviceShaderAtomicInt64Features offered{};
    offered.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SHADER_ATOMIC_INT64_FEATURES;
    VkPhysicalDeviceFeatures2 f2{};
    f2.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2;
    f2.pNext = &offered;
    vkGetPhysicalDeviceFeatures2(static_cast<VkPhysicalDevice>(device), &f2);
    enabled = offered.shaderBufferInt64Atomics;
    features.shaderBufferInt64Atomics = enabled;
    core.shaderInt64 = enabled;
}

void*
Int64AtomicsEnable::chain(void* next)
{
    if (!enabled) {
        return next;
    }
    features.pNext = next;
    return &features;
}

void
describeGridSupport(const vk::PhysicalDevice& device, DeviceDescription& d)
{
    VkPhysicalDeviceVulkanMemoryModelFeatures mm = memoryModelFeatures(device);
    d.memoryModelDeviceScope = mm.vulkanMemoryModel && mm.vulkanMemoryModelDeviceScope;
    d.computeUnits = 0;
    // Chained only where offered: the validation layer reports a structure of an absent extension.
    if (offers(device, VK_NV_SHADER_SM_BUILTINS_EXTENSION_NAME)) {
        using SmBuiltins = vk::PhysicalDeviceShaderSMBuiltinsPropertiesNV;
        auto chain = device.getProperties2<vk::PhysicalDeviceProperties2, SmBuiltins>();
        d.computeUnits = chain.get<SmBuiltins>().shaderSMCount;
    }
}

} // namespace ortops
