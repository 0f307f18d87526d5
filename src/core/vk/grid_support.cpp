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

// A feature structure of Vulkan 1.2's core as the device fills it (all false on an older device:
// not asked, as its validation layer would report the structure).
template<typename Features>
Features
offeredFeatures(const vk::PhysicalDevice& device, VkStructureType type)
{
    Features f{};
    f.sType = type;
    if (device.getProperties().apiVersion < VK_API_VERSION_1_2) {
        return f;
    }
    VkPhysicalDeviceFeatures2 f2{};
    f2.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2;
    f2.pNext = &f;
    vkGetPhysicalDeviceFeatures2(static_cast<VkPhysicalDevice>(device), &f2);
    return f;
}

VkPhysicalDeviceVulkanMemoryModelFeatures
memoryModelFeatures(const vk::PhysicalDevice& device)
{
    return offeredFeatures<VkPhysicalDeviceVulkanMemoryModelFeatures>(
      device, VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_MEMORY_MODEL_FEATURES);
}

// `features` ahead of `next` in a device's feature chain where enabled, else `next` alone.
template<typename Features>
void*
chainIf(bool enabled, Features& features, void* next)
{
    if (!enabled) {
        return next;
    }
    features.pNext = next;
    return &features;
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
    return chainIf(enabled, features, next);
}

Int64AtomicsEnable::Int64AtomicsEnable(const vk::PhysicalDevice& device)
{
    features.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SHADER_ATOMIC_INT64_FEATURES;
    if (persistentSwitchedOff() || !device.getFeatures().shaderInt64) {
        return;
    }
    enabled = offeredFeatures<VkPhysicalDeviceShaderAtomicInt64Features>(device, features.sType).shaderBufferInt64Atomics;
    features.shaderBufferInt64Atomics = enabled;
    core.shaderInt64 = enabled;
}

void*
Int64AtomicsEnable::chain(void* next)
{
    return chainIf(enabled, features, next);
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
