// What the EP decided for each recurrent node of a session, kept where that session's placement
// report can read it in the same process (ortops.InferenceSession, through ortops._vk): ONNX
// Runtime's own graph-assignment report says where a node went, not why. The EP records under
// the key a session gives it (the EP option report_id) one decision per node: taken, or refused
// with the reason the checker gave (node_check.hpp; under placement "auto" the cost model's).
// A node is keyed by where it is (the If/Loop/Scan node and body graph holding it, the
// innermost: ORT asks GetCapability per body) with its name and op type, which ONNX Runtime
// keeps; its output
// names are kept beside (ORT's optimizers may rename them, e.g. an Identity eliminated in a Scan
// body) for the nodes whose key is not unique. A later decision on a node replaces an earlier one
// (ORT may ask GetCapability several times).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "placement/node_check.hpp"

namespace ortops {

struct NodeDecision
{
    std::string key;          // nodeKey(path, name, op type)
    std::string outputsKey;   // outputsKey(outputs)
    std::string name;
    std::string opType;
    bool taken = false;
    std::string reason;
    // What the report shows of the node (NodeVerdict's).
    std::string dtype;
    std::string direction;
    int64_t layout = 0;
    std::optional<int64_t> hiddenSize;
    std::string weights;
    std::vector<std::string> outputs;    // taken: the outputs computed
    std::string config;                  // taken: the config (encodeNodeConfig)
};

// One step of a node's path: the If/Loop/Scan node holding the body, and the body graph's name.
std::string
pathStep(const std::string& opType, const std::string& name, const std::string& graph);

// The key of a node: its path (the pathStep of the body holding it; "" in the main graph), its
// name and its op type.
std::string
nodeKey(const std::string& path, const std::string& name, const std::string& opType);

// The key of a node's output names ("" where not named; trailing unnamed ones left out).
std::string
outputsKey(const std::vector<std::string>& outputs);

NodeDecision
decisionOf(const std::string& path, const NodeDescription& node, const NodeVerdict& verdict);

// Record `decision` under `reportId` (nothing for an empty one). At most 256 report keys are
// kept: a process that never reads its reports does not grow without bound.
void
recordDecision(const std::string& reportId, const NodeDecision& decision);

// The decisions recorded under `reportId`, in the order their nodes were first recorded.
std::vector<NodeDecision>
decisionsFor(const std::string& reportId);

// Forget what `reportId` holds.
void
forgetDecisions(const std::string& reportId);

} // namespace ortops
