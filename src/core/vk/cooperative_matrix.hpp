// VK_KHR_cooperative_matrix: what a device offers (for ortops.device.Device and the "fast"
// mode's choice of kernel, ortops/fast.py) and the features device creation enables for it.
//
// The Vulkan headers ortops builds against (Debian 12: 1.3.239) predate the extension, so its
// few structures, enum values and the one query function's type are declared here under
// ortops' own names, with the values of the Vulkan registry (extension number 507), and the
// function is fetched through vkGetInstanceProcAddr. Nothing here needs a newer header.
#pragma once

#include <kompute/Kompute.hpp>

#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace ortops {

// VkPhysicalDeviceCooperativeMatrixFeaturesKHR
struct CoopMatFeaturesKHR
{
    VkStructureType sType;
    void* pNext;
    VkBool32 cooperativeMatrix;
    VkBool32 cooperativeMatrixRobustBufferAccess;
};

// What device creation chains when the device can run the cooperative-matrix kernels: the
// extension's feature and shaderFloat16 (the operands are float16 values). They also need
// vulkanMemoryModel (glslang writes every GL_KHR_cooperative_matrix shader against the Vulkan
// memory model), which ``usable`` requires and the context enables wherever it is offered
// (grid_support.hpp: one structure of that type in the chain). ``usable`` is false, and
// nothing is chained, on a device lacking any of them.
struct CooperativeMatrixEnable
{
    CoopMatFeaturesKHR coopmat{};
    VkPhysicalDeviceShaderFloat16Int8Features float16{};
    VkPhysicalDeviceVulkanMemoryModelFeatures memoryModel{};
    bool usable = false;

    // ``off``: why it is not enabled although the device offers it (else left empty).
    CooperativeMatrixEnable(const vk::PhysicalDevice& device, bool validation, std::string& off);
    // The head of the chain of the two structures, ending in ``next`` (which holds the
    // memory model's).
    void* chain(void* next);
};

extern const char* kCooperativeMatrix;   // "VK_KHR_cooperative_matrix"

// One combination a device lists for VK_KHR_cooperative_matrix (DeviceDescription, devices.hpp).
struct CooperativeMatrixShape
{
    uint32_t m = 0, n = 0, k = 0;
    std::string a, b, c, result;   // the component types' names, for descriptions
    bool saturating = false;
    std::string scope;
    // The same as the device gave them: VkComponentTypeKHR and VkScopeKHR values (decisions
    // read these, not the names).
    uint32_t aType = 0, bType = 0, cType = 0, resultType = 0, scopeType = 0;

    // 16 x 16 x 16, float16 x float16 + float32 -> float32, not saturating, subgroup scope:
    // the combination mode "fast"'s matrix kernels are written for (coopmatRequired).
    bool isHalfIntoFloatSubgroup16() const;
    // "16x16x16 float16 x float16 + float32 -> float32 (subgroup)", as ortops.fast.CoopMatShape
    // prints one.
    std::string describe() const;
};

// A combination given by its types' and scope's names (the Python door's ortops.fast.CoopMatShape,
// a made-up device's in tests): the VkComponentTypeKHR and VkScopeKHR values from the names.
CooperativeMatrixShape
cooperativeMatrixShape(uint32_t m, uint32_t n, uint32_t k, const std::string& a, const std::string& b,
                       const std::string& c, const std::string& result, bool saturating, const std::string& scope);

// The combination mode "fast"'s matrix kernels are written for (ortops.fast.REQUIRED reads it).
CooperativeMatrixShape
coopmatRequired();

// The combinations (M, N, K, component types, scope) the device lists; empty where the device
// lacks the extension, its feature, or support in compute shaders.
std::vector<CooperativeMatrixShape>
describeCooperativeMatrix(const vk::Instance& instance, const vk::PhysicalDevice& device);

// (smallest, largest) subgroup size a compute shader may get (Vulkan 1.3's subgroup size
// control); nothing on a device below Vulkan 1.3.
std::optional<std::pair<uint32_t, uint32_t>>
describeSubgroupSizes(const vk::PhysicalDevice& device);

// The instance's Vulkan version: 1.3 where the loader offers it (a SPIR-V 1.6 module, which
// the cooperative-matrix kernel is, needs it), else 1.2.
uint32_t
instanceApiVersion();

} // namespace ortops
