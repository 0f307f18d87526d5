// The ortops custom ops' kernels, through ONNX Runtime's C API (kernel.hpp says what a node
// is and how its kernel behaves). Every C entry point catches everything: an exception that
// crossed into ONNX Runtime would terminate the process.
#include "ort/kernel.hpp"

#include <cstring>
#include <memory>
#include <optional>
#include <stdexcept>

#include "ort/status.hpp"

namespace ortops::ort {

namespace {

std::string
prefixFor(const OpDef* op, const std::string& node)
{
    return "ortops: " + op->name + " node '" + node + "': ";
}

// -- the OrtCustomOp callbacks ------------------------------------------------------------

const OpDef*
self(const OrtCustomOp* op)
{
    return static_cast<const OpDef*>(op);
}

const char* ORT_API_CALL
getName(const OrtCustomOp* op)
{
    return self(op)->name.c_str();
}

const char* ORT_API_CALL
getExecutionProviderType(const OrtCustomOp*)
{
    return nullptr;    // the CPU execution provider: inputs and outputs in host memory
}

ONNXTensorElementDataType ORT_API_CALL
getInputType(const OrtCustomOp* op, size_t index)
{
    return index == IN_LENS ? ONNX_TENSOR_ELEMENT_DATA_TYPE_INT32 : ortType(self(op)->dtype);
}

size_t ORT_API_CALL
getInputTypeCount(const OrtCustomOp* op)
{
    return self(op)->cell->inputCount;
}

ONNXTensorElementDataType ORT_API_CALL
getOutputType(const OrtCustomOp* op, size_t)
{
    return ortType(self(op)->dtype);
}

size_t ORT_API_CALL
getOutputTypeCount(const OrtCustomOp* op)
{
    return self(op)->cell->outputCount;
}

OrtCustomOpInputOutputCharacteristic ORT_API_CALL
getInputCharacteristic(const OrtCustomOp*, size_t index)
{
    return index < IN_B ? INPUT_OUTPUT_REQUIRED : INPUT_OUTPUT_OPTIONAL;
}

OrtCustomOpInputOutputCharacteristic ORT_API_CALL
getOutputCharacteristic(const OrtCustomOp*, size_t)
{
    return INPUT_OUTPUT_OPTIONAL;
}

OrtMemType ORT_API_CALL
getInputMemoryType(const OrtCustomOp*, size_t)
{
    return OrtMemTypeDefault;
}

int ORT_API_CALL
variadicArity(const OrtCustomOp*)
{
    return 1;    // no variadic inputs or outputs: never asked
}

int ORT_API_CALL
variadicHomogeneity(const OrtCustomOp*)
{
    return 1;
}

OrtStatusPtr ORT_API_CALL
createKernelV2(const OrtCustomOp* op, const OrtApi* api, const OrtKernelInfo* info, void** kernel) noexcept
{
    if (kernel == nullptr || api == nullptr) {
        return api ? api->CreateStatus(ORT_INVALID_ARGUMENT, "ortops: CreateKernelV2 called without a kernel pointer") : nullptr;
    }
    *kernel = nullptr;
    const OpDef* def = self(op);
    // The node's name for the messages, before anything else can fail.
    std::string node;
    try {
        node = twoCallString(
          api, [&](char* out, size_t* size) { return api->KernelInfo_GetNodeName(info, out, size); },
          "KernelInfo_GetNodeName");
    } catch (...) {
        node = "?";
    }
    std::string prefix;
    try {
        prefix = prefixFor(def, node);
    } catch (...) {
    }
    return guarded(api, prefix, [&] {
        auto k = std::make_unique<Kernel>(api, def, info);
        *kernel = k.release();
    });
}

OrtStatusPtr ORT_API_CALL
kernelComputeV2(void* opKernel, OrtKernelContext* context) noexcept
{
    auto* k = static_cast<Kernel*>(opKernel);
    std::string prefix;
    try {
        prefix = k->prefix();
    } catch (...) {
    }
    return guarded(k->api, prefix, [&] { k->compute(context); });
}

void ORT_API_CALL
kernelDestroy(void* opKernel) noexcept
{
    try {
        delete static_cast<Kernel*>(opKernel);
    } catch (...) {
        // A destructor that throws (it should not): swallowed; ORT cannot be told.
    }
}

} // namespace

void
defineOp(OpDef& op, const Cell& cell, ElementType dtype)
{
    OrtCustomOp& c = op;
    std::memset(&c, 0, sizeof(OrtCustomOp));    // every later field (version > 16) stays null
    c.version = ORT_API_REQUIRED;
    c.CreateKernel = nullptr;                   // ORT calls the V2 entry points from version 16
    c.GetName = getName;
    c.GetExecutionProviderType = getExecutionProviderType;
    c.GetInputType = getInputType;
    c.GetInputTypeCount = getInputTypeCount;
    c.GetOutputType = getOutputType;
    c.GetOutputTypeCount = getOutputTypeCount;
    c.KernelCompute = nullptr;
    c.KernelDestroy = kernelDestroy;
    c.GetInputCharacteristic = getInputCharacteristic;
    c.GetOutputCharacteristic = getOutputCharacteristic;
    c.GetInputMemoryType = getInputMemoryType;
    c.GetVariadicInputMinArity = variadicArity;
    c.GetVariadicInputHomogeneity = variadicHomogeneity;
    c.GetVariadicOutputMinArity = variadicArity;
    c.GetVariadicOutputHomogeneity = variadicHomogeneity;
    c.CreateKernelV2 = createKernelV2;
    c.KernelComputeV2 = kernelComputeV2;
    op.cell = &cell;
    op.dtype = dtype;
    op.name = std::string(cell.name) + (dtype == ElementType::Float16 ? "_f16" : "");
}

// -- Kernel --------------------------------------------------------------------------------

std::string
Kernel::prefix() const
{
    return prefixFor(op, nodeName);
}

Kernel::Kernel(const OrtApi* api_, const OpDef* op_, const OrtKernelInfo* info) : api(api_), op(op_)
{
    const Cell& cell = *op->cell;
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
    NodeConfig& config = runner.config;
    config = decodeNodeConfig(std::string_view(text.data(), text.size()));
    if (config.cell == nullptr || config.cell->op != cell.op) {
        throw NodeError("its config is for op '" + std::string(config.cell ? config.cell->name : "?") +
                        "', the node is " + op->name);
    }
    if (config.dtype != op->dtype) {
        throw NodeError("its config says dtype '" + std::string(elementTypeName(config.dtype)) + "', the node is " + op->name +
                        " (" + elementTypeName(op->dtype) + ")");
    }

    // The node's inputs and outputs against the cell and the config.
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

    // The run: the context's inputs and outputs are the node's, in ONNX's order.
    runner.api = api;
    runner.cell = &cell;
    runner.dtype = op->dtype;
    for (size_t i = 0; i < cell.inputCount; ++i) {
        runner.inputAt[i] = hasInput[i] ? static_cast<int>(i) : -1;
    }
    for (size_t i = 0; i < cell.outputCount; ++i) {
        runner.outputAt[i] = hasOutput[i] ? static_cast<int>(i) : -1;
    }

    // Weights: constant initializers are uploaded now, once; otherwise they are run inputs.
    std::array<std::optional<HostTensor>, 4> weights;
    bool constantWeights = true;
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
        runner.layer = std::make_shared<Layer>(config, weightsOf(weights));
    }
    runner.constantWeights = constantWeights;
}

void
Kernel::compute(OrtKernelContext* context)
{
    runner.run(context);
}

} // namespace ortops::ort
