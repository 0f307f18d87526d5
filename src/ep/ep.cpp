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

// GetCapability's and Compile's reads of a node, counted for the tests (read.cpp's tally).
void
countReads([[maybe_unused]] const char* call, [[maybe_unused]] const std::string& node)
{
#ifdef ORTOPS_TESTING
    countEvent(std::string("ep.") + call + ":" + node);
#endif
}

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

// Whether the EP takes the node: the node read once, the core's verdict (under placement
// "auto" the cost model's too) recorded under the session's report_id; why not logged at
// verbose level.
bool
takes(Ep& ep, const OrtNode* node, const std::string& path)
{
    NodeDescription d;
    std::string prefix = "ortops: recurrent node: ";
    try {
        d = readNode(ep.api, node).description;
        prefix = nodePrefix(d.opType, d.name);
        countReads("capability", d.name);
        if (ep.options.placement == Placement::Auto && !d.inputs.empty()) {
            d.inputs[0].unsqueezed = unsqueezedX(ep.api, node);
        }
    } catch (const std::exception& e) {
        ep.verbose(prefix + "left to the next execution provider: " + e.what());
        return false;
    }
    NodeVerdict v = checkNode(d, questionOf(ep.options, ep.device));
    if (!v.taken) {
        ep.verbose(prefix + "left to the next execution provider: " + v.reason);
    } else if (ep.options.placement == Placement::Auto) {
        placeAuto(ep, d, v);
    }
    recordDecision(ep.options.reportId, decisionOf(path, d, v));
    return v.taken;
}

OrtStatus* ORT_API_CALL
getCapability(OrtEp* thisEp, const OrtGraph* graph, OrtEpGraphSupportInfo* info) noexcept
{
    Ep* ep = self(thisEp);
    return ort::guarded(ep->api, "ortops: GetCapability: ", [&] {
        std::string path = ep->options.reportId.empty() ? "" : graphPath(ep->api, graph);
        for (const OrtNode* node : graphNodes(ep->api, graph)) {
            if (!isRecurrent(ep->api, node) || !takes(*ep, node, path)) {
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

// The names of a fused node's inputs or outputs, in its order.
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

// The index of a name among a fused node's inputs or outputs (-1: not there).
int
indexOf(const std::vector<std::string>& names, const std::string& name)
{
    auto it = std::find(names.begin(), names.end(), name);
    return (name.empty() || it == names.end()) ? -1 : static_cast<int>(it - names.begin());
}

// The outputs the fused node has (ORT may order them otherwise, e.g. Y_h before Y), mapped
// into the runner; the cell's names of those computed (when the graph reads none, the first
// named one, computed and dropped).
std::vector<std::string>
mapOutputs(const NodeDescription& d, const Cell& cell, const std::vector<std::string>& fused, ort::NodeRunner& r)
{
    std::vector<std::string> computed, named;
    for (uint32_t i = 0; i < cell.outputCount && i < d.outputs.size(); ++i) {
        r.outputAt[i] = indexOf(fused, d.outputs[i]);
        if (r.outputAt[i] >= 0) {
            computed.emplace_back(cell.outputs[i]);
        }
        if (!d.outputs[i].empty()) {
            named.emplace_back(cell.outputs[i]);
        }
    }
    if (computed.empty() && !named.empty()) {
        computed.push_back(named.front());
    }
    return computed;
}

// A DynamicQuantizeLSTM's W (which 0) or R (1) dequantized from the constants read.
HostTensor
dequantized(const NodeDescription& d, size_t which, std::vector<float>& storage)
{
    auto tensor = [&](size_t i) {
        const NodeInput& in = d.inputs[i];
        return QuantTensor{ in.element, in.shape().value_or(std::vector<int64_t>{}), in.data };
    };
    size_t q = which == 0 ? ort::IN_W : ort::IN_R, params = which == 0 ? 8 : 10;
    HostTensor t;
    storage = dequantizeWeight(which == 0 ? "W" : "R", tensor(q), tensor(params), tensor(params + 1), t.shape);
    t.data = storage.data();
    t.type = ElementType::Float32;
    return t;
}

// The compute of one claimed node: its inputs and outputs mapped by name onto the fused
// node's, its layer built now from constant weights (a DynamicQuantizeLSTM's dequantized here,
// once).
void
compileNode(Ep& ep, const OrtGraph* graph, const OrtNode* fused, ComputeInfo& info)
{
    std::vector<const OrtNode*> nodes = graphNodes(ep.api, graph);
    if (nodes.size() != 1 || !isRecurrent(ep.api, nodes[0])) {    // (recurrentCell below is then not null)
        throw NodeError("Compile was given " + std::to_string(nodes.size()) + " nodes; the EP fuses one recurrent node");
    }
    ReadNode read = readNode(ep.api, nodes[0]);
    const NodeDescription& d = read.description;
    countReads("compile", d.name);
    info.prefix = nodePrefix(d.opType, d.name);
    std::vector<std::string> fusedInputs = valueNames(ep.api, fused, true);
    ort::NodeRunner& r = info.runner;
    const Cell* op = recurrentCell(d.domain, d.opType);
    NodeVerdict v = checkNode(d, questionOf(ep.options, ep.device, mapOutputs(d, *op, valueNames(ep.api, fused, false), r)));
    if (!v.taken) {    // GetCapability took it: the node changed since
        throw NodeError(v.reason);
    }
    const Cell& cell = *v.cell;
    std::array<ort::WeightSource, 4> weights;
    std::array<std::vector<float>, 2> storage;    // a DynamicQuantizeLSTM's W and R, until uploaded
    for (uint32_t i = 0; i < cell.inputCount; ++i) {
        bool present = i < d.inputs.size() && d.inputs[i].present();
        r.inputAt[i] = present ? indexOf(fusedInputs, d.inputs[i].name) : -1;
        if (present && r.inputAt[i] < 0 && read.constants[i] == nullptr) {
            throw NodeError("input " + std::string(cell.inputs[i]) + " ('" + d.inputs[i].name +
                            "') is not among the fused node's inputs");
        }
        auto w = std::find(ort::WEIGHT_INPUTS.begin(), ort::WEIGHT_INPUTS.end(), i) - ort::WEIGHT_INPUTS.begin();
        if (present && w < 4) {
            weights[w] = v.quantized && w < 2 ? ort::WeightSource{ true, dequantized(d, w, storage[w]) }
                                              : ort::weightSource(ep.api, read.constants[i], cell.inputs[i], v.config.dtype);
        }
    }
    r.api = ep.api;
    r.cell = &cell;
    r.dtype = v.config.dtype;
    r.config = v.config;
    r.useWeights(weights);
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
