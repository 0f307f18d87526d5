// The Vulkan devices of this machine and the choice of one, and the one Context per device a
// process shares. Every door chooses here (chooseDevice: the custom-op library's and the plugin
// EP's nodes; the Python door through _vk.choose_device), so a device=, --device, ORTOPS_DEVICE
// or CUDA_VISIBLE_DEVICES means the same device in each. Both doors run on the same instance,
// device and queues (sharedContext), so threads of one process submit under one set of queue
// locks and validation messages come from one place.
#pragma once

#include <array>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "vk/context.hpp"
#include "vk/cooperative_matrix.hpp"
#include "vk/visible.hpp"

namespace ortops {

// What ortops.device.Device carries about one Vulkan device (the Python door turns it into
// the dict Device takes; the custom-op library chooses its device by uuid and type).
struct DeviceDescription
{
    uint32_t index = 0;
    std::string name;
    std::string type;            // discrete, integrated, virtual, cpu, other
    uint32_t vendorId = 0;
    uint32_t deviceId = 0;
    std::string apiVersion;
    std::string driver;
    std::string driverInfo;
    uint32_t maxStorageBufferRange = 0;
    std::array<uint32_t, 3> maxWorkgroupSize{};
    uint32_t maxWorkgroupInvocations = 0;
    std::array<uint32_t, 3> maxWorkgroupCount{};
    uint32_t maxSharedMemory = 0;
    uint32_t maxPushConstantsSize = 0;
    uint32_t subgroupSize = 0;
    bool float16 = false;
    bool float64 = false;
    bool nanPreserveFloat16 = false;
    bool nanPreserveFloat32 = false;
    bool denormPreserveFloat32 = false;
    bool denormFlushFloat32 = false;
    float timestampPeriodNs = 1.0f;
    bool timestamps = false;
    bool portability = false;
    std::string uuid;                     // 8-4-4-4-12 lower-case hex
    std::optional<std::string> luid;
    std::optional<std::string> pciBusId;
    std::vector<CooperativeMatrixShape> cooperativeMatrix;
    std::optional<std::pair<uint32_t, uint32_t>> subgroupSizeRange;
    // What a persistent grid needs (grid_support.hpp): the compute units that run workgroups
    // (VK_NV_shader_sm_builtins' shaderSMCount; 0: the device does not say) and whether the
    // Vulkan memory model at device scope is offered.
    uint32_t computeUnits = 0;
    bool memoryModelDeviceScope = false;
};

// Every Vulkan device with a compute queue, described with a short-lived instance of its own.
std::vector<DeviceDescription>
enumerateDevices();

// The same, enumerated once per process.
const std::vector<DeviceDescription>&
devices();

// How messages name a device: "[0] NVIDIA H200 (discrete, NVIDIA 570.86, Vulkan 1.4.303)", as
// ortops.device.Device's str() does.
std::string
deviceLabel(const DeviceDescription& d);

// No Vulkan device at all (no driver, or none with a compute queue) and none asked for by
// name: the Python door runs a session's nodes on ONNX Runtime CPU then, saying so.
struct NoDeviceError : std::runtime_error
{
    using std::runtime_error::runtime_error;
};

// What a choice of device reads: the caller's spec (device=, --device, a node config's device,
// the EP's device option), ORTOPS_DEVICE, and the scheduler's variables (visible.hpp).
struct DeviceRequest
{
    std::optional<std::string> spec;
    std::optional<std::string> environment;   // ORTOPS_DEVICE
    VisibilityEnv visibility;

    // `spec` with this process's ORTOPS_DEVICE and scheduler variables.
    static DeviceRequest fromProcess(const std::optional<std::string>& spec);
};

// The position in `found` of the device the request names, in this order:
//  1. the spec, else ORTOPS_DEVICE (a blank one is not given), each matched as: all digits, a
//     device index; a UUID (36 characters, or a prefix of at least 8 hex digits, or any after
//     nvidia-smi's "GPU-", dashes optional, any case), which must name exactly one device; a
//     type ("discrete", "integrated", "virtual", "cpu", "other"); else part of a name (any
//     case). Nothing matching is std::invalid_argument naming what was asked (and whether
//     ORTOPS_DEVICE asked it) and listing the devices there are (index, name, type, UUID);
//  2. else, where an NVIDIA device is among them, the first one CUDA_VISIBLE_DEVICES /
//     NVIDIA_VISIBLE_DEVICES assign (their rules' std::invalid_argument for a wrong one);
//     elsewhere CUDA's variables cannot name a Vulkan device and are not read;
//  3. else the preferred: discrete, integrated, virtual, cpu, other; then by index.
// NoDeviceError where `found` is empty and nothing was asked for.
size_t
chooseAmong(const std::vector<DeviceDescription>& found, const DeviceRequest& request);

// The device of devices() that DeviceRequest::fromProcess(spec) names (chooseAmong).
const DeviceDescription&
chooseDevice(const std::optional<std::string>& spec);

// Whether the validation layer is asked for (ORTOPS_VALIDATION=1) and how many queues a new
// context creates (ORTOPS_QUEUES, default 1: on the H200 more queues did not pay).
bool
validationRequested();
uint32_t
requestedQueues();

// The process's context on device `index`: created on first need, replaced when lost (a
// context whose device was lost keeps raising DeviceLostError for the objects made on it).
std::shared_ptr<Context>
sharedContext(uint32_t index, bool validation, uint32_t maxQueues);

} // namespace ortops
