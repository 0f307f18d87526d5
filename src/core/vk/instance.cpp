// Instance creation and the extension queries (see instance.hpp).

#include "vk/instance.hpp"
#include "vk/cooperative_matrix.hpp"

#include <cstring>
#include <mutex>
#include <stdexcept>

namespace ortops {

const char* kPortabilitySubset = "VK_KHR_portability_subset";

namespace {

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

// VK_KHR_portability_enumeration: since loader 1.3.216 a portability implementation (MoltenVK
// on Apple GPUs, other layered drivers) is listed only when the instance enables this extension
// and sets VK_INSTANCE_CREATE_ENUMERATE_PORTABILITY_BIT_KHR. Both are requested only when the
// loader offers the extension: an older loader would refuse an unknown extension
// (VK_ERROR_EXTENSION_NOT_PRESENT) and lists such devices anyway.
const char* kPortabilityEnumeration = "VK_KHR_portability_enumeration";

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

} // namespace

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
deviceExtensionAvailable(const vk::PhysicalDevice& device, const char* name)
{
    for (const auto& ext : device.enumerateDeviceExtensionProperties()) {
        if (std::strcmp(ext.extensionName, name) == 0) {
            return true;
        }
    }
    return false;
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

} // namespace ortops
