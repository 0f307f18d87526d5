// Which Vulkan devices a scheduler assigned to this process: CUDA_VISIBLE_DEVICES and
// NVIDIA_VISIBLE_DEVICES mapped to Vulkan devices. Schedulers (Ray, Slurm, Kubernetes' NVIDIA
// device plugin) hand a process its GPUs through them, but the Vulkan loader and NVIDIA's
// Vulkan driver ignore both: every GPU the process can open is enumerated. The rules live here,
// once, for every door: the plugin EP's default device (src/ep/factory.cpp) and the Python
// door's ortops.visible (through _vk.assigned_devices).
//
// What is relied on, exactly:
//  - only NVIDIA Vulkan devices (vendor 0x10de) count: lavapipe and other vendors' GPUs are
//    never assigned (CUDA does not see them either);
//  - a UUID entry ("GPU-8c1b...", a unique prefix as CUDA allows, dashes optional, any case) is
//    matched against the Vulkan deviceUUID, which on NVIDIA holds the CUDA/NVML GPU UUID;
//  - an index entry is a CUDA ordinal: CUDA_DEVICE_ORDER=PCI_BUS_ID numbers GPUs by PCI bus id
//    (VK_EXT_pci_bus_info); CUDA's default FASTEST_FIRST is PCI order too for GPUs of one model
//    (same Vulkan device id), and for mixed models it is CUDA's own rule: an index is then
//    refused, asking for UUIDs or CUDA_DEVICE_ORDER=PCI_BUS_ID;
//  - "MIG-..." entries (MIG instances) have no Vulkan device of their own: refused clearly;
//  - NVIDIA_VISIBLE_DEVICES (all / none / void / host indices or UUIDs, nvidia-smi's PCI order)
//    applies first, CUDA_VISIBLE_DEVICES then numbers what is left, as CUDA does inside such a
//    container; when exactly as many NVIDIA devices are enumerated as host indices are listed,
//    the runtime has already hidden the others: all of them are the assigned ones;
//  - an empty CUDA_VISIBLE_DEVICES assigns no GPU (an empty list); neither variable set means
//    no assignment at all (nullopt): choose as usual.
// Errors are std::invalid_argument naming the variable, what it names and the NVIDIA devices.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace ortops {

struct DeviceDescription;

inline constexpr uint32_t NVIDIA_VENDOR_ID = 0x10de;

// What the rules read of a device (a DeviceDescription, or a made-up one in tests).
struct VisibleDevice
{
    std::string label;                    // how messages name it ("[0] NVIDIA H200 (...)")
    std::string name;
    uint32_t vendorId = 0;
    uint32_t deviceId = 0;
    std::string uuid;                     // 8-4-4-4-12 lower-case hex
    std::optional<std::string> pciBusId;  // "dddd:bb:dd.f"
};

// CUDA_DEVICE_ORDER's two values (FastestFirst: CUDA's default).
enum class CudaOrder
{
    FastestFirst,
    PciBusId,
};

// The three variables (nullopt: not set).
struct VisibilityEnv
{
    std::optional<std::string> cudaVisible;      // CUDA_VISIBLE_DEVICES
    std::optional<std::string> nvidiaVisible;    // NVIDIA_VISIBLE_DEVICES
    std::optional<std::string> cudaOrder;        // CUDA_DEVICE_ORDER

    // This process's environment.
    static VisibilityEnv fromProcess();
};

// CUDA_DEVICE_ORDER's value (nullopt: FASTEST_FIRST, CUDA's default); any case, blanks
// around it ignored. std::invalid_argument naming the variable otherwise.
CudaOrder
parseCudaOrder(const std::optional<std::string>& text);

// The positions in `found` of its NVIDIA devices in CUDA's ordinal order under
// CUDA_DEVICE_ORDER's value `orderText` (read only where there are two GPUs or more, as CUDA
// needs no order for one).
std::vector<size_t>
cudaOrder(const std::vector<VisibleDevice>& found, const std::optional<std::string>& orderText);

// The positions in `found` of the devices the variables assign, in the order listed; nullopt
// when neither CUDA_VISIBLE_DEVICES nor NVIDIA_VISIBLE_DEVICES is set.
std::optional<std::vector<size_t>>
assignedDevices(const VisibilityEnv& env, const std::vector<VisibleDevice>& found);

// A device as the rules see it; label as the Python door's str(Device).
VisibleDevice
visibleDevice(const DeviceDescription& d);

// The enumerated device the environment assigns first (nullopt: nothing assigned, choose as
// usual). Throws the rules' std::invalid_argument.
std::optional<uint32_t>
assignedDeviceIndex(const VisibilityEnv& env, const std::vector<DeviceDescription>& found);

} // namespace ortops
