// The EP's objects (ep.hpp says what the EP does): the factory, the OrtEp and one compute
// info per claimed node.
#pragma once

#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "ep/ep.hpp"
#include "ort/noderun.hpp"

namespace ortops::ep {

struct Factory : OrtEpFactory
{
    const OrtApi* api;
    const OrtEpApi* epApi;
    const OrtLogger* logger;
    std::string registeredName;
    std::string ortVersion;    // the onnxruntime that loaded us (the cost model's cache key)
    // Whether that onnxruntime's OrtEpApi has CreateHardwareDevice (1.24 and later), and the
    // GPU hardware devices the factory made with it, by Vulkan UUID (released with the factory).
    bool createsHardwareDevices = false;
    std::vector<std::pair<std::string, OrtHardwareDevice*>> ownHardwareDevices;

    Factory(const OrtApi* api, const OrtLogger* logger, std::string registeredName, std::string ortVersion);
    ~Factory();
    Factory(const Factory&) = delete;
    Factory& operator=(const Factory&) = delete;
};

struct Ep : OrtEp
{
    Factory* factory;
    const OrtApi* api;
    const OrtEpApi* epApi;
    const OrtLogger* logger;    // the session's
    EpOptions options;
    DeviceDescription device;

    Ep(Factory* factory, const OrtLogger* logger, EpOptions options, const DeviceDescription& device);
    // A message at ORT's verbose level (why a node is left to the next provider).
    void verbose(const std::string& message) const noexcept;
    void warning(const std::string& message) const noexcept;

    // Placement "auto": the calibration of this EP's device (auto_placement.cpp), read from
    // the cache or measured on the first node that needs it; nullptr when it could not be
    // had, `why` saying why ("no cost model (...)").
    const Calibration* costModel(std::string& why);

  private:
    std::mutex costLock_;
    bool costTried_ = false;
    std::optional<Calibration> cost_;
    std::string costProblem_;
};

// Placement "auto" on a node the checker took: the cost model's choice (core's placeAuto),
// logged at verbose level naming the node either way. Without a cost model the device keeps
// the node and the reason says why.
void
placeAuto(Ep& ep, const NodeDescription& node, NodeVerdict& verdict);

// One claimed node: its run, called by ORT from any number of threads at once with the one
// state CreateState gave (the info itself).
struct ComputeInfo : OrtNodeComputeInfo
{
    const OrtApi* api;
    std::string prefix;                    // "ortops: LSTM node 'name': "
    ort::NodeRunner runner;

    explicit ComputeInfo(const OrtApi* api);
};

} // namespace ortops::ep
