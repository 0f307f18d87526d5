// VK_KHR_cooperative_matrix queries and enabling (see cooperative_matrix.hpp).

#include "cooperative_matrix.hpp"

#include <cstring>
#include <string>

namespace py = pybind11;

namespace ortops {

const char* kCooperativeMatrix = "VK_KHR_cooperative_matrix";

namespace {

// Registry values (vk.xml, VK_KHR_cooperative_matrix, extension 507).
const VkStructureType kFeaturesType = static_cast<VkStructureType>(1000506000);
const VkStructureType kPropertiesType = static_cast<VkStructureType>(1000506001);
const VkStructureType kDevicePropertiesType = static_cast<VkStructureType>(1000506002);

// VkCooperativeMatrixPropertiesKHR
struct CoopMatPropertiesKHR
{
    VkStructureType sType;
    void* pNext;
    uint32_t MSize;
    uint32_t NSize;
    uint32_t KSize;
    uint32_t AType;   // VkComponentTypeKHR
    uint32_t BType;
    uint32_t CType;
    uint32_t ResultType;
    VkBool32 saturatingAccumulation;
    uint32_t scope;   // VkScopeKHR
};

// VkPhysicalDeviceCooperativeMatrixPropertiesKHR
struct CoopMatDevicePropertiesKHR
{
    VkStructureType sType;
    void* pNext;
    VkShaderStageFlags cooperativeMatrixSupportedStages;
};

typedef VkResult(VKAPI_PTR* PFN_GetCoopMatProperties)(VkPhysicalDevice, uint32_t*,
                                                      CoopMatPropertiesKHR*);

std::string
componentName(uint32_t type)
{
    // VkComponentTypeKHR 0-10 (the values VK_NV_cooperative_matrix had too).
    static const char* names[] = { "float16", "float32", "float64", "int8",   "int16", "int32",
                                   "int64",   "uint8",   "uint16",  "uint32", "uint64" };
    return type < 11 ? names[type] : "type" + std::to_string(type);
}

std::string
scopeName(uint32_t scope)
{
    switch (scope) {
        case 1:
            return "device";
        case 2:
            return "workgroup";
        case 3:
            return "subgroup";
        case 5:
            return "queue_family";
        default:
            return "scope" + std::to_string(scope);
    }
}

bool
offered(const vk::PhysicalDevice& device)
{
    for (const auto& ext : device.enumerateDeviceExtensionProperties()) {
        if (std::strcmp(ext.extensionName, kCooperativeMatrix) == 0) {
            return true;
        }
    }
    return false;
}

// The extension is there, its feature is on, and compute shaders may use it. (Structures of
// the extension are chained only when the device offers it: the validation layer reports a
// structure of an absent extension.)
bool
usableInCompute(const vk::PhysicalDevice& device)
{
    if (!offered(device)) {
        return false;
    }
    CoopMatFeaturesKHR features{};
    features.sType = kFeaturesType;
    VkPhysicalDeviceFeatures2 f2{};
    f2.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2;
    f2.pNext = &features;
    vkGetPhysicalDeviceFeatures2(static_cast<VkPhysicalDevice>(device), &f2);
    CoopMatDevicePropertiesKHR props{};
    props.sType = kDevicePropertiesType;
    VkPhysicalDeviceProperties2 p2{};
    p2.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PROPERTIES_2;
    p2.pNext = &props;
    vkGetPhysicalDeviceProperties2(static_cast<VkPhysicalDevice>(device), &p2);
    return features.cooperativeMatrix &&
           (props.cooperativeMatrixSupportedStages & VK_SHADER_STAGE_COMPUTE_BIT);
}

} // namespace

CooperativeMatrixEnable::CooperativeMatrixEnable(const vk::PhysicalDevice& device)
{
    coopmat.sType = kFeaturesType;
    float16.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SHADER_FLOAT16_INT8_FEATURES;
    memoryModel.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_MEMORY_MODEL_FEATURES;
    // Both structures are core in Vulkan 1.2, the version the instance asks for.
    if (device.getProperties().apiVersion < VK_API_VERSION_1_2 || !usableInCompute(device)) {
        return;
    }
    float16.pNext = &memoryModel;
    VkPhysicalDeviceFeatures2 f2{};
    f2.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2;
    f2.pNext = &float16;
    vkGetPhysicalDeviceFeatures2(static_cast<VkPhysicalDevice>(device), &f2);
    usable = float16.shaderFloat16 && memoryModel.vulkanMemoryModel;
    // Enable only what the kernels use.
    coopmat = CoopMatFeaturesKHR{ kFeaturesType, nullptr, VK_TRUE, VK_FALSE };
    float16 = VkPhysicalDeviceShaderFloat16Int8Features{};
    float16.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SHADER_FLOAT16_INT8_FEATURES;
    float16.shaderFloat16 = VK_TRUE;
    memoryModel = VkPhysicalDeviceVulkanMemoryModelFeatures{};
    memoryModel.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_MEMORY_MODEL_FEATURES;
    memoryModel.vulkanMemoryModel = VK_TRUE;
}

void*
CooperativeMatrixEnable::chain(void* next)
{
    memoryModel.pNext = next;
    float16.pNext = &memoryModel;
    coopmat.pNext = &float16;
    return &coopmat;
}

py::list
describeCooperativeMatrix(const vk::Instance& instance, const vk::PhysicalDevice& device)
{
    py::list out;
    if (!usableInCompute(device)) {
        return out;
    }
    auto get = reinterpret_cast<PFN_GetCoopMatProperties>(
      instance.getProcAddr("vkGetPhysicalDeviceCooperativeMatrixPropertiesKHR"));
    if (!get) {
        return out;
    }
    VkPhysicalDevice raw = static_cast<VkPhysicalDevice>(device);
    uint32_t count = 0;
    if (get(raw, &count, nullptr) != VK_SUCCESS || count == 0) {
        return out;
    }
    CoopMatPropertiesKHR blank{};
    blank.sType = kPropertiesType;
    std::vector<CoopMatPropertiesKHR> props(count, blank);
    VkResult result = get(raw, &count, props.data());
    if (result != VK_SUCCESS && result != VK_INCOMPLETE) {
        return out;
    }
    for (uint32_t i = 0; i < count; i++) {
        const auto& p = props[i];
        py::dict d;
        d["m"] = p.MSize;
        d["n"] = p.NSize;
        d["k"] = p.KSize;
        d["a"] = componentName(p.AType);
        d["b"] = componentName(p.BType);
        d["c"] = componentName(p.CType);
        d["result"] = componentName(p.ResultType);
        d["saturating"] = static_cast<bool>(p.saturatingAccumulation);
        d["scope"] = scopeName(p.scope);
        out.append(d);
    }
    return out;
}

} // namespace ortops
