// The Vulkan instance ortops creates (for a Context and for describing the devices) and what
// both ask of a physical device: its compute queue family and its extensions.
#pragma once

#include <kompute/Kompute.hpp>

#include <string>
#include <vector>

namespace ortops {

// A Vulkan 1.2 (1.3 where the loader offers it) instance; with `validation`, the Khronos
// validation layer with synchronization validation and VK_EXT_debug_utils, `messengerInfo`
// chained for the instance's own messages. VK_KHR_portability_enumeration where the loader
// offers it.
vk::Instance
createInstance(bool validation, VkDebugUtilsMessengerCreateInfoEXT* messengerInfo);

// The first queue family with compute, or -1.
int
computeQueueFamily(const vk::PhysicalDevice& device);

// Whether the device offers the extension `name`.
bool
deviceExtensionAvailable(const vk::PhysicalDevice& device, const char* name);

// A device that is a portability implementation (not fully conformant) exposes this one; the
// spec requires enabling it on such a device.
extern const char* kPortabilitySubset;   // "VK_KHR_portability_subset"

// The instance extensions the last instance was created with (VK_KHR_portability_enumeration
// where the loader offers it; VK_EXT_debug_utils under validation), and those the loader offers.
std::vector<std::string>
enabledInstanceExtensions();
std::vector<std::string>
availableInstanceExtensions();

} // namespace ortops
