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
    runner.api = api;
    runner.cell = &cell;
    runner.dtype = op->dtype;
    runner.config = config;
    for (size_t i = 0; i < cell.inputCount; ++i) {
        runner.inputAt[i] = hasInput[i] ? static_cast<int>(i) : -1;
    }
    for (size_t i = 0; i < cell.outputCount; ++i) {
        runner.outputAt[i] = hasOutput[i] ? static_cast<int>(i) : -1;
    }
    std::array<WeightSource, 4> weights;
    for (size_t w = 0; w < WEIGHT_INPUTS.size(); ++w) {
        size_t i = WEIGHT_INPUTS[w];
        if (i >= cell.inputCount || !hasInput[i]) {
            continue;
        }
        int isConstant = 0;
        const OrtValue* value = nullptr;
        check(api, api->KernelInfoGetConstantInput_tensor(info, i, &isConstant, &value),
              "KernelInfoGetConstantInput_tensor");
        weights[w] = weightSource(api, isConstant ? value : nullptr, cell.inputs[i], op->dtype);
    }
    runner.useWeights(weights);
}

void
Kernel::compute(OrtKernelContext* context)
{
    runner.run(context);
}

} // namespace ortops::ort
