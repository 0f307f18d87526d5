// The OrtEp: GetCapability claims the recurrent nodes the core takes, Compile makes one
// ComputeInfo per node (ep.hpp). Every callback is noexcept and answers errors with an
// OrtStatus naming the node.
#include <algorithm>
#include <memory>
#include <string>
#include <vector>

#include "ep/ep_impl.hpp"
#include "ort/status.hpp"

namespace ortops::ep {

using ort::check;
using ort::NodeError;

namespace {

Ep*
self(OrtEp* ep)
{
    return static_cast<Ep*>(ep);
}

const char* ORT_API_CALL
getName(const OrtEp*) noexcept
{
    return EP_NAME;
}

std::vector<const OrtNode*>
graphNodes(const OrtApi* api, const OrtGraph* graph)
{
    size_t count = 0;
    check(api, api->Graph_GetNumNodes(graph, &count), "Graph_GetNumNodes");
    std::vector<const OrtNode*> nodes(count);
    if (count > 0) {
        check(api, api->Graph_GetNodes(graph, nodes.data(), count), "Graph_GetNodes");
    }
    return nodes;
}

// Whether the EP takes the node: the core can run it and, under placement "auto", the cost
// model gives it to the device; why not in `why` (the cost model logs its own reason).
bool
takes(Ep& ep, const OrtNode* node, std::string& why)
{
    std::string prefix = "ortops: recurrent node: ";
    NodeSpec spec;
    NodeConfig config;
    try {
        const char* name = nullptr;
        const char* op = nullptr;
        check(ep.api, ep.api->Node_GetName(node, &name), "Node_GetName");
        check(ep.api, ep.api->Node_GetOperatorType(node, &op), "Node_GetOperatorType");
        prefix = prefixFor(op ? op : "?", name ? name : "");
        spec = readNode(ep.api, node);
        std::vector<std::string> outputs = namedOutputs(spec);
        if (outputs.empty()) {
            throw NodeError("the node names no output");
        }
        config = nodeConfig(spec, outputs, ep.options, ep.device);
    } catch (const std::exception& e) {
        why = prefix + "left to the next execution provider: " + e.what();
        return false;
    }
    return ep.options.placement != Placement::Auto || autoKeeps(ep, spec, config);
}

OrtStatus* ORT_API_CALL
getCapability(OrtEp* thisEp, const OrtGraph* graph, OrtEpGraphSupportInfo* info) noexcept
{
    Ep* ep = self(thisEp);
    return ort::guarded(ep->api, "ortops: GetCapability: ", [&] {
        for (const OrtNode* node : graphNodes(ep->api, graph)) {
            if (!isRecurrent(ep->api, node)) {
                continue;
            }
            std::string why;
            if (!takes(*ep, node, why)) {
                if (!why.empty()) {
                    ep->verbose(why);
                }
                continue;
            }
            // One node per fused node; the constant initializers stay inputs (the compute
            // ignores them: Compile uploads them once).
            OrtNodeFusionOptions fusion{};
            fusion.ort_version_supported = EP_API_VERSION;
            fusion.drop_constant_initializers = false;
            check(ep->api, ep->epApi->EpGraphSupportInfo_AddNodesToFuse(info, &node, 1, &fusion),
                  "EpGraphSupportInfo_AddNodesToFuse");
        }
    });
}

// The index of each name among a fused node's inputs or outputs (-1: not there).
std::vector<std::string>
valueNames(const OrtApi* api, const OrtNode* node, bool inputs)
{
    size_t count = 0;
    check(api, inputs ? api->Node_GetNumInputs(node, &count) : api->Node_GetNumOutputs(node, &count),
          "Node_GetNum(In|Out)puts");
    std::vector<const OrtValueInfo*> infos(count);
    if (count > 0) {
        check(api, inputs ? api->Node_GetInputs(node, infos.data(), count) : api->Node_GetOutputs(node, infos.data(), count),
              "Node_Get(In|Out)puts");
    }
    std::vector<std::string> names;
    for (const OrtValueInfo* v : infos) {
        const char* name = nullptr;
        if (v != nullptr) {
            check(api, api->GetValueInfoName(v, &name), "GetValueInfoName");
        }
        names.emplace_back(name ? name : "");
    }
    return names;
}

int
indexOf(const std::vector<std::string>& names, const std::string& name)
{
    auto it = std::find(names.begin(), names.end(), name);
    return (name.empty() || it == names.end()) ? -1 : static_cast<int>(it - names.begin());
}

// The compute of one claimed node: its inputs and outputs mapped by name onto the fused
// node's (ORT may order them otherwise, e.g. Y_h before Y), its layer built now from
// constant weights.
void
compileNode(const Ep& ep, const OrtGraph* graph, const OrtNode* fused, ComputeInfo& info)
{
    std::vector<const OrtNode*> nodes = graphNodes(ep.api, graph);
    if (nodes.size() != 1 || !isRecurrent(ep.api, nodes[0])) {
        throw NodeError("Compile was given " + std::to_string(nodes.size()) + " nodes; the EP fuses one recurrent node");
    }
    NodeSpec spec = readNode(ep.api, nodes[0]);
    info.prefix = prefixFor(spec.opType, spec.name);
    const Cell& cell = *spec.cell;
    std::vector<std::string> fusedInputs = valueNames(ep.api, fused, true);
    std::vector<std::string> fusedOutputs = valueNames(ep.api, fused, false);
    ort::NodeRunner& r = info.runner;
    std::vector<std::string> computed;
    for (uint32_t i = 0; i < cell.outputCount; ++i) {
        r.outputAt[i] = indexOf(fusedOutputs, spec.outputs[i]);
        if (r.outputAt[i] >= 0) {
            computed.emplace_back(cell.outputs[i]);
        }
    }
    if (computed.empty()) {    // nothing read: still compute the first named output, dropped
        computed = namedOutputs(spec);
        computed.resize(std::min<size_t>(computed.size(), 1));
    }
    for (uint32_t i = 0; i < cell.inputCount; ++i) {
        r.inputAt[i] = indexOf(fusedInputs, spec.inputs[i]);
        if (!spec.inputs[i].empty() && r.inputAt[i] < 0 && spec.constants[i] == nullptr) {
            throw NodeError("input " + std::string(cell.inputs[i]) + " ('" + spec.inputs[i] +
                            "') is not among the fused node's inputs");
        }
    }
    r.api = ep.api;
    r.cell = &cell;
    r.dtype = spec.dtype;
    r.config = nodeConfig(spec, computed, ep.options, ep.device);

    std::array<std::optional<HostTensor>, 4> weights;
    std::array<std::vector<float>, 2> dequantized;    // DynamicQuantizeLSTM's W and R, until uploaded
    bool constant = true;
    for (size_t w = 0; w < ort::WEIGHT_INPUTS.size(); ++w) {
        size_t i = ort::WEIGHT_INPUTS[w];
        if (i >= cell.inputCount || spec.inputs[i].empty()) {
            continue;
        }
        if (spec.quantized && w < 2) {
            HostTensor t;
            dequantized[w] = dequantize(ep.api, spec, w, t.shape);
            t.data = dequantized[w].data();
            t.type = ElementType::Float32;
            weights[w] = t;
            continue;
        }
        if (spec.constants[i] == nullptr) {
            constant = false;
            break;
        }
        weights[w] = ort::hostTensor(ep.api, spec.constants[i], cell.inputs[i], spec.dtype);
    }
    if (constant) {
        r.layer = std::make_shared<Layer>(r.config, ort::weightsOf(weights));
    }
    r.constantWeights = constant;
}

OrtStatus* ORT_API_CALL
createState(OrtNodeComputeInfo* info, OrtNodeComputeContext*, void** state) noexcept
{
    *state = info;    // one state for every run, which may be concurrent (the runner is)
    return nullptr;
}

OrtStatus* ORT_API_CALL
compute(OrtNodeComputeInfo* thisInfo, void*, OrtKernelContext* context) noexcept
{
    auto* info = static_cast<ComputeInfo*>(thisInfo);
    return ort::guarded(info->api, info->prefix, [&] { info->runner.run(context); });
}

void ORT_API_CALL
releaseState(OrtNodeComputeInfo*, void*) noexcept
{
}

OrtStatus* ORT_API_CALL
compile(OrtEp* thisEp, const OrtGraph** graphs, const OrtNode** fused, size_t count, OrtNodeComputeInfo** infos,
        OrtNode** contextNodes) noexcept
{
    Ep* ep = self(thisEp);
    for (size_t i = 0; i < count; ++i) {
        infos[i] = nullptr;
        if (contextNodes != nullptr) {
            contextNodes[i] = nullptr;
        }
    }
    for (size_t i = 0; i < count; ++i) {
        std::unique_ptr<ComputeInfo> info;
        try {
            info = std::make_unique<ComputeInfo>(ep->api);
        } catch (...) {
            return ep->api->CreateStatus(ORT_FAIL, "ortops: Compile: out of host memory");
        }
        ComputeInfo* raw = info.get();
        if (OrtStatus* s = ort::guarded(ep->api, "", [&] {
                raw->prefix = "ortops: Compile: ";
                compileNode(*ep, graphs[i], fused[i], *raw);
            })) {
            // The message names the node when it was read (guarded's prefix is empty: add it).
            std::string m = raw->prefix + ep->api->GetErrorMessage(s);
            OrtErrorCode code = ep->api->GetErrorCode(s);
            ep->api->ReleaseStatus(s);
            for (size_t k = 0; k < i; ++k) {
                delete static_cast<ComputeInfo*>(infos[k]);
                infos[k] = nullptr;
            }
            return ep->api->CreateStatus(code, m.c_str());
        }
        infos[i] = info.release();
    }
    return nullptr;
}

void ORT_API_CALL
releaseNodeComputeInfos(OrtEp*, OrtNodeComputeInfo** infos, size_t count) noexcept
{
    for (size_t i = 0; i < count; ++i) {
        delete static_cast<ComputeInfo*>(infos[i]);
    }
}

} // namespace

ComputeInfo::ComputeInfo(const OrtApi* api_) : OrtNodeComputeInfo{}, api(api_)
{
    ort_version_supported = EP_API_VERSION;
    CreateState = createState;
    Compute = compute;
    ReleaseState = releaseState;
}

Ep::Ep(Factory* f, const OrtLogger* l, EpOptions o, const DeviceDescription& d)
  : OrtEp{}, factory(f), api(f->api), epApi(f->epApi), logger(l), options(std::move(o)), device(d)
{
    ort_version_supported = EP_API_VERSION;
    GetName = getName;
    GetCapability = getCapability;
    Compile = compile;
    ReleaseNodeComputeInfos = releaseNodeComputeInfos;
}

namespace {

void
logAt(const Ep& ep, OrtLoggingLevel level, const std::string& message) noexcept
{
    if (ep.logger == nullptr) {
        return;
    }
    if (OrtStatus* s = ep.api->Logger_LogMessage(ep.logger, level, message.c_str(), ORT_FILE, __LINE__,
                                                 "ortops::ep::GetCapability")) {
        ep.api->ReleaseStatus(s);
    }
}

} // namespace

void
Ep::verbose(const std::string& message) const noexcept
{
    logAt(*this, ORT_LOGGING_LEVEL_VERBOSE, message);
}

void
Ep::warning(const std::string& message) const noexcept
{
    logAt(*this, ORT_LOGGING_LEVEL_WARNING, message);
}

} // namespace ortops::ep
