// The ortops custom ops' kernels, through ONNX Runtime's C API (kernel.hpp says what a node
// is and how its kernel behaves). The C entry points that call them (op.cpp) catch everything.
#include "ort/kernel.hpp"

#include <algorithm>
#include <cstring>
#include <stdexcept>
#include <utility>

#include "ort/status.hpp"
#include "ort/values.hpp"

namespace ortops::ort {

namespace {

// Input positions in ONNX's order (cells.hpp): X W R B sequence_lens initial_h initial_c P.
constexpr size_t IN_X = 0, IN_W = 1, IN_R = 2, IN_B = 3, IN_LENS = 4, IN_H = 5, IN_C = 6, IN_P = 7;
// The weights in Kernel::held's order, as input positions.
constexpr std::array<size_t, 4> WEIGHT_INPUTS = { IN_W, IN_R, IN_B, IN_P };

bool
sameBits(const HeldWeight& held, const std::optional<HostTensor>& fed)
{
    if (held.present != fed.has_value()) {
        return false;
    }
    if (!fed) {
        return true;
    }
    if (held.type != fed->type || held.shape != fed->shape) {
        return false;
    }
    size_t n = byteSize(*fed);
    return n == held.bytes.size() && (n == 0 || std::memcmp(held.bytes.data(), fed->data, n) == 0);
}

void
hold(HeldWeight& held, const std::optional<HostTensor>& fed)
{
    held.present = fed.has_value();
    held.shape.clear();
    held.bytes.clear();
    if (fed) {
        held.type = fed->type;
        held.shape = fed->shape;
        size_t n = byteSize(*fed);
        held.bytes.resize(n);
        if (n) {
            std::memcpy(held.bytes.data(), fed->data, n);
        }
    }
}

Weights
weightsOf(const std::array<std::optional<HostTensor>, 4>& w)
{
    Weights weights;
    weights.W = *w[0];
    weights.R = *w[1];
    weights.B = w[2];
    weights.P = w[3];
    return weights;
}

} // namespace

std::string
Kernel::prefix() const
{
    return prefixFor(op, nodeName);
}

Kernel::Kernel(const OrtApi* api_, const OpDef* op_, const OrtKernelInfo* info) : api(api_), op(op_)
{
    readConfig(info);
    readNodeIO(info);
    checkNodeIO();
    buildConstantLayer(info);
}

void
Kernel::readConfig(const OrtKernelInfo* info)
{
    nodeName = twoCallString(
      api, [&](char* out, size_t* size) { return api->KernelInfo_GetNodeName(info, out, size); },
      "KernelInfo_GetNodeName");
    // The config: untrusted bytes, passed to the decoder exactly as stored.
    std::string text;
    try {
        text = twoCallString(
          api, [&](char* out, size_t* size) { return api->KernelInfoGetAttribute_string(info, "config", out, size); },
          "KernelInfoGetAttribute_string");
    } catch (const OrtCallError& e) {
        throw NodeError(std::string("the node has no string attribute 'config' (") + e.what() + ")");
    }
    config = decodeNodeConfig(std::string_view(text.data(), text.size()));
    if (config.cell == nullptr || config.cell->op != op->cell->op) {
        throw NodeError("its config is for op '" + std::string(config.cell ? config.cell->name : "?") +
                        "', the node is " + op->name);
    }
    if (config.dtype != op->dtype) {
        throw NodeError("its config says dtype '" + std::string(elementTypeName(config.dtype)) + "', the node is " +
                        op->name + " (" + elementTypeName(op->dtype) + ")");
    }
}

void
Kernel::readNodeIO(const OrtKernelInfo* info)
{
    const Cell& cell = *op->cell;
    check(api, api->KernelInfo_GetInputCount(info, &nodeInputs), "KernelInfo_GetInputCount");
    check(api, api->KernelInfo_GetOutputCount(info, &nodeOutputs), "KernelInfo_GetOutputCount");
    if (nodeInputs < IN_B || nodeInputs > cell.inputCount) {
        throw NodeError("the node has " + std::to_string(nodeInputs) + " inputs; " + op->name + " takes " +
                        std::to_string(IN_B) + " to " + std::to_string(cell.inputCount));
    }
    if (nodeOutputs > cell.outputCount) {
        throw NodeError("the node has " + std::to_string(nodeOutputs) + " outputs; " + op->name +
                        " has at most " + std::to_string(cell.outputCount));
    }
    for (size_t i = 0; i < nodeInputs; ++i) {
        std::string name = twoCallString(
          api, [&](char* out, size_t* size) { return api->KernelInfo_GetInputName(info, i, out, size); },
          "KernelInfo_GetInputName");
        hasInput[i] = !name.empty();
    }
    for (size_t i = 0; i < nodeOutputs; ++i) {
        std::string name = twoCallString(
          api, [&](char* out, size_t* size) { return api->KernelInfo_GetOutputName(info, i, out, size); },
          "KernelInfo_GetOutputName");
        hasOutput[i] = !name.empty();
    }
}

// The node's inputs and outputs against the cell and the config.
void
Kernel::checkNodeIO() const
{
    const Cell& cell = *op->cell;
    for (size_t i = 0; i < IN_B; ++i) {
        if (!hasInput[i]) {
            throw NodeError("input " + std::string(cell.inputs[i]) + " is required and the node has none");
        }
    }
    for (size_t i = IN_B; i < cell.inputCount; ++i) {
        std::string_view name = cell.inputs[i];
        bool listed = config.isAbsent(name);
        if (hasInput[i] && listed) {
            throw NodeError("the node feeds input " + std::string(name) + " but its config lists it as absent");
        }
        if (!hasInput[i] && !listed) {
            throw NodeError("the node has no input " + std::string(name) +
                            " but its config does not list it as absent");
        }
    }
    for (size_t i = 0; i < cell.outputCount; ++i) {
        std::string_view name = cell.outputs[i];
        bool wanted = config.wants(name);
        if (hasOutput[i] && !wanted) {
            throw NodeError("the node has output " + std::string(name) + " but its config does not compute it");
        }
        if (!hasOutput[i] && wanted) {
            throw NodeError("its config computes output " + std::string(name) + " but the node has no such output");
        }
    }
}

// Weights: constant initializers are uploaded now, once; otherwise they are run inputs.
void
Kernel::buildConstantLayer(const OrtKernelInfo* info)
{
    const Cell& cell = *op->cell;
    std::array<std::optional<HostTensor>, 4> weights;
    constantWeights = true;
    for (size_t w = 0; w < WEIGHT_INPUTS.size(); ++w) {
        size_t i = WEIGHT_INPUTS[w];
        if (i >= cell.inputCount || !hasInput[i]) {
            continue;
        }
        int isConstant = 0;
        const OrtValue* value = nullptr;
        check(api, api->KernelInfoGetConstantInput_tensor(info, i, &isConstant, &value),
              "KernelInfoGetConstantInput_tensor");
        if (!isConstant || value == nullptr) {
            constantWeights = false;
            break;
        }
        weights[w] = hostTensor(api, value, cell.inputs[i], op->dtype);
    }
    if (constantWeights) {
        layer = std::make_shared<Layer>(config, weightsOf(weights));
    }
}

std::array<const OrtValue*, 8>
Kernel::inputValues(OrtKernelContext* context) const
{
    const Cell& cell = *op->cell;
    size_t count = 0;
    check(api, api->KernelContext_GetInputCount(context, &count), "KernelContext_GetInputCount");
    std::array<const OrtValue*, 8> values{};
    for (size_t i = 0; i < std::min<size_t>(count, cell.inputCount); ++i) {
        check(api, api->KernelContext_GetInput(context, i, &values[i]), "KernelContext_GetInput");
    }
    for (size_t i = 0; i < cell.inputCount; ++i) {
        if (hasInput[i] && values[i] == nullptr) {
            throw NodeError("input " + std::string(cell.inputs[i]) + " of the node came without a value");
        }
    }
    return values;
}

std::shared_ptr<Layer>
Kernel::layerFor(const std::array<const OrtValue*, 8>& values)
{
    if (constantWeights) {
        return layer;
    }
    const Cell& cell = *op->cell;
    std::array<std::optional<HostTensor>, 4> fed;
    for (size_t w = 0; w < WEIGHT_INPUTS.size(); ++w) {
        size_t i = WEIGHT_INPUTS[w];
        if (i < cell.inputCount && hasInput[i]) {
            fed[w] = hostTensor(api, values[i], cell.inputs[i], op->dtype);
        }
    }
    std::lock_guard<std::mutex> guard(weightsLock);
    bool same = layer != nullptr;
    for (size_t w = 0; same && w < fed.size(); ++w) {
        same = sameBits(held[w], fed[w]);
    }
    if (!same) {
        // Built from ORT's buffers, then kept: a run already holding the old layer finishes
        // with it (shared_ptr).
        auto built = std::make_shared<Layer>(config, weightsOf(fed));
        for (size_t w = 0; w < fed.size(); ++w) {
            hold(held[w], fed[w]);
        }
        layer = std::move(built);
    }
    return layer;
}

OutputPointers
Kernel::outputsFor(OrtKernelContext* context, const OutputShapes& shapes) const
{
    const Cell& cell = *op->cell;
    OutputPointers out{};
    for (size_t i = 0; i < cell.outputCount; ++i) {
        if (!hasOutput[i]) {
            continue;
        }
        if (!shapes[i]) {
            throw std::logic_error("the layer gave no shape for output " + std::string(cell.outputs[i]) +
                                   ", which the config computes");
        }
        const std::vector<int64_t>& shape = *shapes[i];
        OrtValue* value = nullptr;
        check(api, api->KernelContext_GetOutput(context, i, shape.data(), shape.size(), &value),
              "KernelContext_GetOutput");
        if (value == nullptr) {
            throw std::logic_error("ONNX Runtime gave no tensor for output " + std::string(cell.outputs[i]));
        }
        void* data = nullptr;
        check(api, api->GetTensorMutableData(value, &data), "GetTensorMutableData");
        out[i] = data;
    }
    return out;
}

void
Kernel::compute(OrtKernelContext* context)
{
    const Cell& cell = *op->cell;
    std::array<const OrtValue*, 8> values = inputValues(context);
    auto input = [&](size_t i, ElementType type) -> std::optional<HostTensor> {
        if (i >= cell.inputCount || !hasInput[i]) {
            return std::nullopt;
        }
        return hostTensor(api, values[i], cell.inputs[i], type);
    };
    RunInputs inputs;
    inputs.X = *input(IN_X, op->dtype);
    inputs.sequenceLens = input(IN_LENS, ElementType::Int32);
    inputs.initialH = input(IN_H, op->dtype);
    inputs.initialC = input(IN_C, op->dtype);
    std::shared_ptr<Layer> current = layerFor(values);
    OutputShapes shapes = current->outputShapes(inputs);
    current->run(inputs, shapes, outputsFor(context, shapes));
}

} // namespace ortops::ort
