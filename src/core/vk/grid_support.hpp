// What a persistent grid (glsl/step_persistent.comp, rnn/persistent.hpp) needs of a device: the
// Vulkan memory model at device scope, enabled at device creation where offered, and how many
// compute units run its workgroups, where the device says (VK_NV_shader_sm_builtins).
#pragma once

#include <kompute/Kompute.hpp>

#include <cstdint>

namespace ortops {

struct DeviceDescription;

// VkPhysicalDeviceVulkanMemoryModelFeatures to chain into device creation: vulkanMemoryModel
// (and vulkanMemoryModelDeviceScope where offered) on a Vulkan 1.2 device that offers it. The
// cooperative-matrix kernels (cooperative_matrix.hpp) need vulkanMemoryModel too: this is the
// one structure of its type in the chain.
struct MemoryModelEnable
{
    VkPhysicalDeviceVulkanMemoryModelFeatures features{};
    bool enabled = false;       // vulkanMemoryModel
    bool deviceScope = false;   // and vulkanMemoryModelDeviceScope

    explicit MemoryModelEnable(const vk::PhysicalDevice& device);
    // The structure ending in `next`, or `next` itself where nothing is enabled.
    void* chain(void* next);
};

// ORTOPS_PERSISTENT_STEPS=0: the persistent kernel switched off (rnn/persistent.hpp); the
// device is then created without what only it needs (vulkanMemoryModelDeviceScope).
bool
persistentSwitchedOff();

// 64-bit integer atomics on storage buffers (shaderInt64 and shaderBufferInt64Atomics, core in
// Vulkan 1.2), enabled at device creation where offered: the persistent kernel's exchange
// (glsl/step_persistent.comp, DESIGN) keeps a value and its step in one 64-bit word, and its
// module declares the capabilities whatever its design.
struct Int64AtomicsEnable
{
    VkPhysicalDeviceShaderAtomicInt64Features features{};
    VkPhysicalDeviceFeatures core{};   // shaderInt64 alone, for pEnabledFeatures
    bool enabled = false;

    explicit Int64AtomicsEnable(const vk::PhysicalDevice& device);
    void* chain(void* next);
};

// Fills DeviceDescription::computeUnits (VK_NV_shader_sm_builtins' shaderSMCount where the
// device offers the extension, else 0: unknown) and memoryModelDeviceScope.
void
describeGridSupport(const vk::PhysicalDevice& device, DeviceDescription& d);

} // namespace ortops
