// Choosing a Vulkan device and the one Context per device a process shares: both doors (the
// custom-op library and the Python API, whose ortops.device.context asks for it here) run on
// the same instance, device and queues, so threads of one process submit under one set of
// queue locks and validation messages come from one place.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "vk/context.hpp"

namespace ortops {

// Every Vulkan device with a compute queue (enumerated once per process).
const std::vector<DeviceDescription>&
devices();

// The device `spec` names — its UUID (36 characters, or a prefix of at least 8 hex digits,
// or any after nvidia-smi's "GPU-"), its index, its type ("discrete", "cpu", ...) or part of
// its name — else the one ORTOPS_DEVICE names, else the preferred one (discrete, integrated,
// virtual, cpu, other; then by index). std::invalid_argument naming the devices when nothing
// matches; std::runtime_error when there is no Vulkan device.
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
