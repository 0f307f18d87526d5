// The OrtCustomOp callbacks of the six ops (kernel.hpp): what ORT asks of an op, and the
// kernel's C entry points, each of which catches everything (status.hpp's guarded).
#include "ort/kernel.hpp"

#include <cstring>
#include <memory>

#include "ort/status.hpp"
#include "ort/values.hpp"

namespace ortops::ort {

namespace {

// Input positions in ONNX's order (cells.hpp): sequence_lens, and B (the first optional one).
constexpr size_t IN_B = 3, IN_LENS = 4;

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

std::string
prefixFor(const OpDef* op, const std::string& node)
{
    return "ortops: " + op->name + " node '" + node + "': ";
}

} // namespace ortops::ort
