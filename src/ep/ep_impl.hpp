// The EP's objects (ep.hpp says what the EP does): the factory, the OrtEp and one compute
// info per claimed node.
#pragma once

#include <memory>
#include <string>

#include "ep/ep.hpp"
#include "ort/noderun.hpp"

namespace ortops::ep {

struct Factory : OrtEpFactory
{
    const OrtApi* api;
    const OrtEpApi* epApi;
    const OrtLogger* logger;
    std::string registeredName;

    Factory(const OrtApi* api, const OrtLogger* logger, std::string registeredName);
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
};

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
