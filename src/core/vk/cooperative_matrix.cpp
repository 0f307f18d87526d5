// VK_KHR_cooperative_matrix queries and enabling (see cooperative_matrix.hpp).

#include "vk/cooperative_matrix.hpp"

#include <cstdint>
#include <cstring>
#include <string>

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

// VkComponentTypeKHR 0-10 (the values VK_NV_cooperative_matrix had too).
const char* COMPONENT_NAMES[] = { "float16", "float32", "float64", "int8",   "int16", "int32",
                                  "int64",   "uint8",   "uint16",  "uint32", "uint64" };

std::string
componentName(uint32_t type)
{
    return type < 11 ? COMPONENT_NAMES[type] : "type" + std::to_string(type);
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

// The value componentName / scopeName name (one no Vulkan value has where none does).
uint32_t
componentType(const std::string& name)
{
    for (uint32_t t = 0; t < 11; t++) {
        if (name == COMPONENT_NAMES[t]) {
            return t;
        }
    }
    return UINT32_MAX;
}

uint32_t
scopeType(const std::string& name)
{
    for (uint32_t s : { 1u, 2u, 3u, 5u }) {
        if (name == scopeName(s)) {
            return s;
        }
    }
    return UINT32_MAX;
}

// The first validation layer that knows the extension (SDK 1.3.261, July 2023). An older one
// (Debian 12's is 1.3.239) reports its structures at device creation as unknown, and its
// SPIR-V validator does not know SPV_KHR_cooperative_matrix: under such a layer the extension
// is left off, so that every context it validates is clean, and fast mode falls back.
const uint32_t kValidationKnowsIt = VK_MAKE_API_VERSION(0, 1, 3, 261);

uint32_t
validationLayerVersion()
{
    for (const auto& layer : vk::enumerateInstanceLayerProperties()) {
        if (std::strcmp(layer.layerName, "VK_LAYER_KHRONOS_validation") == 0) {
            return layer.specVersion;
        }
    }
    return 0;
}

std::string
versionText(uint32_t v)
{
    return std::to_string(VK_API_VERSION_MAJOR(v)) + "." + std::to_string(VK_API_VERSION_MINOR(v)) +
           "." + std::to_string(VK_API_VERSION_PATCH(v));
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

CooperativeMatrixEnable::CooperativeMatrixEnable(const vk::PhysicalDevice& device,
                                                 bool validation,
                                                 std::string& off)
{
    coopmat.sType = kFeaturesType;
    float16.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SHADER_FLOAT16_INT8_FEATURES;
    memoryModel.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_MEMORY_MODEL_FEATURES;
    if (!offered(device)) {
        return;
    }
    // Before any query that chains the extension's structures (an old layer reports those).
    if (validation && validationLayerVersion() < kValidationKnowsIt) {
        off = "the validation layer (" + versionText(validationLayerVersion()) +
              ") predates VK_KHR_cooperative_matrix (1.3.261)";
        return;
    }
    if (!usableInCompute(device)) {
        off = "its feature or compute-stage support is missing";
        return;
    }
    // The kernel is SPIR-V 1.6: a cooperative matrix needs full subgroups, which SPIR-V 1.6
    // gives a workgroup whose size is a multiple of the subgroup size (before it, only
    // VK_PIPELINE_SHADER_STAGE_CREATE_REQUIRE_FULL_SUBGROUPS_BIT, which Kompute does not set).
    if (device.getProperties().apiVersion < VK_API_VERSION_1_3 ||
        instanceApiVersion() < VK_API_VERSION_1_3) {
        off = "the device or the Vulkan loader is below Vulkan 1.3";
        return;
    }
    float16.pNext = &memoryModel;
    VkPhysicalDeviceFeatures2 f2{};
    f2.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2;
    f2.pNext = &float16;
    vkGetPhysicalDeviceFeatures2(static_cast<VkPhysicalDevice>(device), &f2);
    usable = float16.shaderFloat16 && memoryModel.vulkanMemoryModel;
    if (!usable) {
        off = "the device lacks shaderFloat16 or vulkanMemoryModel";
    }
    // Enable only what the kernels use (vulkanMemoryModel: grid_support.hpp's MemoryModelEnable,
    // which the context chains wherever the device offers it).
    coopmat = CoopMatFeaturesKHR{ kFeaturesType, nullptr, VK_TRUE, VK_FALSE };
    float16 = VkPhysicalDeviceShaderFloat16Int8Features{};
    float16.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SHADER_FLOAT16_INT8_FEATURES;
    float16.shaderFloat16 = VK_TRUE;
}

void*
CooperativeMatrixEnable::chain(void* next)
{
    float16.pNext = next;
    coopmat.pNext = &float16;
    return &coopmat;
}

std::vector<CooperativeMatrixShape>
describeCooperativeMatrix(const vk::Instance& instance, const vk::PhysicalDevice& device)
{
    std::vector<CooperativeMatrixShape> out;
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
        CooperativeMatrixShape d;
        d.m = p.MSize;
        d.n = p.NSize;
        d.k = p.KSize;
        d.a = componentName(p.AType);
        d.b = componentName(p.BType);
        d.c = componentName(p.CType);
        d.result = componentName(p.ResultType);
        d.saturating = static_cast<bool>(p.saturatingAccumulation);
        d.scope = scopeName(p.scope);
        d.aType = p.AType;
        d.bType = p.BType;
        d.cType = p.CType;
        d.resultType = p.ResultType;
        d.scopeType = p.scope;
        out.push_back(std::move(d));
    }
    return out;
}

bool
CooperativeMatrixShape::isHalfIntoFloatSubgroup16() const
{
    CooperativeMatrixShape r = coopmatRequired();
    return m == r.m && n == r.n && k == r.k && aType == r.aType && bType == r.bType && cType == r.cType &&
           resultType == r.resultType && saturating == r.saturating && scopeType == r.scopeType;
}

std::string
CooperativeMatrixShape::describe() const
{
    return std::to_string(m) + "x" + std::to_string(n) + "x" + std::to_string(k) + " " + a + " x " + b + " + " + c +
           " -> " + result + " (" + scope + (saturating ? ", saturating" : "") + ")";
}

CooperativeMatrixShape
cooperativeMatrixShape(uint32_t m, uint32_t n, uint32_t k, const std::string& a, const std::string& b,
                       const std::string& c, const std::string& result, bool saturating, const std::string& scope)
{
    CooperativeMatrixShape s;
    s.m = m;
    s.n = n;
    s.k = k;
    s.a = a;
    s.b = b;
    s.c = c;
    s.result = result;
    s.saturating = saturating;
    s.scope = scope;
    s.aType = componentType(a);
    s.bType = componentType(b);
    s.cType = componentType(c);
    s.resultType = componentType(result);
    s.scopeType = scopeType(scope);
    return s;
}

CooperativeMatrixShape
coopmatRequired()
{
    return cooperativeMatrixShape(16, 16, 16, "float16", "float16", "float32", "float32", false, "subgroup");
}

std::optional<std::pair<uint32_t, uint32_t>>
describeSubgroupSizes(const vk::PhysicalDevice& device)
{
    if (device.getProperties().apiVersion < VK_API_VERSION_1_3 ||
        instanceApiVersion() < VK_API_VERSION_1_3) {
        return std::nullopt;
    }
    auto chain = device.getProperties2<vk::PhysicalDeviceProperties2,
                                       vk::PhysicalDeviceSubgroupSizeControlProperties>();
    const auto& sizes = chain.get<vk::PhysicalDeviceSubgroupSizeControlProperties>();
    return std::make_pair(sizes.minSubgroupSize, sizes.maxSubgroupSize);
}

uint32_t
instanceApiVersion()
{
    return vk::enumerateInstanceVersion() >= VK_API_VERSION_1_3 ? VK_API_VERSION_1_3
                                                                : VK_API_VERSION_1_2;
}

} // namespace ortops
