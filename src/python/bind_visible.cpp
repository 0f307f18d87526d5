// The scheduler's GPUs (visible.hpp) for ortops.visible: the Python door maps
// CUDA_VISIBLE_DEVICES / NVIDIA_VISIBLE_DEVICES with the rules the plugin EP uses. Devices
// come as (label, name, vendor_id, device_id, uuid, pci_bus_id or None) tuples, so the
// tests' made-up lists work as the enumerated ones; positions in that list come back. The
// rules' std::invalid_argument arrives as ValueError.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include "vk/visible.hpp"

namespace py = pybind11;

namespace ortops {

namespace {

using DeviceTuple = std::tuple<std::string, std::string, uint32_t, uint32_t, std::string, std::optional<std::string>>;

std::vector<VisibleDevice>
visibleDevices(const std::vector<DeviceTuple>& found)
{
    std::vector<VisibleDevice> out;
    for (const auto& [label, name, vendor, device, uuid, pci] : found) {
        out.push_back(VisibleDevice{ label, name, vendor, device, uuid, pci });
    }
    return out;
}

} // namespace

void
bindVisible(py::module_& m)
{
    m.attr("NVIDIA_VENDOR_ID") = NVIDIA_VENDOR_ID;
    m.def(
      "cuda_order",
      [](const std::vector<DeviceTuple>& found, const std::optional<std::string>& order) {
          return cudaOrder(visibleDevices(found), order);
      },
      py::arg("devices"), py::arg("order") = py::none(),
      "Positions of the NVIDIA devices in CUDA's ordinal order under CUDA_DEVICE_ORDER `order`.");
    m.def(
      "assigned_devices",
      [](const std::vector<DeviceTuple>& found, const std::optional<std::string>& cuda,
         const std::optional<std::string>& nvidia, const std::optional<std::string>& order) {
          return assignedDevices(VisibilityEnv{ cuda, nvidia, order }, visibleDevices(found));
      },
      py::arg("devices"), py::arg("cuda_visible_devices"), py::arg("nvidia_visible_devices"),
      py::arg("cuda_device_order"),
      "Positions of the devices the variables assign, in the order listed; None when neither is set.");
}

} // namespace ortops
