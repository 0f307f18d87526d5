// The ortops custom ops' kernels, through ONNX Runtime's C API (kernel.hpp says what a node
// is and how its kernel behaves). Every C entry point catches everything: an exception that
// crossed into ONNX Runtime would terminate the process.
#include "ort/kernel.hpp"

#include <algorithm>
#include <cstring>
#include <exception>
#include <limits>
#include <new>
#include <stdexcept>
#include <typeinfo>
#include <utility>

namespace ortops::ort {

namespace {

// Input positions in ONNX's order (cells.hpp): X W R B sequence_lens initial_h initial_c P.
constexpr size_t IN_X = 0, IN_W = 1, IN_R = 2, IN_B = 3, IN_LENS = 4, IN_H = 5, IN_C = 6, IN_P = 7;
// The weights in Kernel::held's order, as input positions.
constexpr std::array<size_t, 4> WEIGHT_INPUTS = { IN_W, IN_R, IN_B, IN_P };

// A failed ORT API call, with ORT's code, carried to the entry point.
struct OrtCallError : std::runtime_error
{
    OrtErrorCode code;
    OrtCallError(OrtErrorCode c, const std::string& m) : std::runtime_error(m), code(c) {}
};

// The node and its config disagree, or the config does not fit the op.
struct NodeError : std::invalid_argument
{
    using std::invalid_argument::invalid_argument;
};

void
check(const OrtApi* api, OrtStatus* status, const char* what)
{
    if (status == nullptr) {
        return;
    }
    OrtErrorCode code = api->GetErrorCode(status);
    std::string message = std::string(what) + ": " + api->GetErrorMessage(status);
    api->ReleaseStatus(status);
    throw OrtCallError(code, message);
}

// ortops::DeviceLostError, or Vulkan-Hpp's vk::DeviceLostError should one escape the core
// unwrapped (by name: the glue does not include vulkan.hpp).
bool
isDeviceLost(const std::exception& e)
{
    // An unwrapped vk::DeviceLostError (a Vulkan call outside the core's checks) too.
    return dynamic_cast<const DeviceLostError*>(&e) != nullptr ||
           std::strcmp(typeid(e).name(), "N2vk15DeviceLostErrorE") == 0;
}

ONNXTensorElementDataType
ortType(ElementType t)
{
    switch (t) {
        case ElementType::Float32:
            return ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT;
        case ElementType::Float16:
            return ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT16;
        case ElementType::Int32:
            return ONNX_TENSOR_ELEMENT_DATA_TYPE_INT32;
    }
    return ONNX_TENSOR_ELEMENT_DATA_TYPE_UNDEFINED;
}


// numpy-style names of ONNX's element types (TensorProto.DataType order).
std::string
ortTypeName(ONNXTensorElementDataType t)
{
    static const char* const names[] = { "undefined", "float32", "uint8", "int8", "uint16",
                                         "int16", "int32", "int64", "string", "bool",
                                         "float16", "float64", "uint32", "uint64",
                                         "complex64", "complex128", "bfloat16" };
    auto i = static_cast<size_t>(t);
    if (i < sizeof(names) / sizeof(names[0])) {
        return names[i];
    }
    return "element type " + std::to_string(i);
}

std::string
shapeText(const std::vector<int64_t>& shape)
{
    std::string s = "[";
    for (size_t i = 0; i < shape.size(); ++i) {
        s += (i ? ", " : "") + std::to_string(shape[i]);
    }
    return s + "]";
}

// A string through ORT's two-call protocol: the first call asks the size (with the '\0'),
// the second fills it. The bytes are kept exactly (embedded NULs included).
template <typename Call>
std::string
twoCallString(const OrtApi* api, Call call, const char* what)
{
    size_t size = 0;
    check(api, call(nullptr, &size), what);
    if (size == 0) {
        return {};
    }
    std::string buffer(size, '\0');
    check(api, call(buffer.data(), &size), what);
    size = std::min(size, buffer.size());
    buffer.resize(size > 0 ? size - 1 : 0);    // drop the terminating '\0'
    return buffer;
}

struct TypeShape
{
    ONNXTensorElementDataType type;
    std::vector<int64_t> shape;
};

TypeShape
typeShape(const OrtApi* api, const OrtValue* value, const char* what)
{
    OrtTensorTypeAndShapeInfo* info = nullptr;
    check(api, api->GetTensorTypeAndShape(value, &info), what);
    struct Release
    {
        const OrtApi* api;
        OrtTensorTypeAndShapeInfo* info;
        ~Release() { api->ReleaseTensorTypeAndShapeInfo(info); }
    } release{ api, info };
    TypeShape ts{};
    check(api, api->GetTensorElementType(info, &ts.type), what);
    size_t rank = 0;
    check(api, api->GetDimensionsCount(info, &rank), what);
    ts.shape.resize(rank);
    if (rank > 0) {
        check(api, api->GetDimensions(info, ts.shape.data(), rank), what);
    }
    return ts;
}

// An input's OrtValue as a HostTensor on ORT's buffer (no copy), of element type `want`.
HostTensor
hostTensor(const OrtApi* api, const OrtValue* value, std::string_view name, ElementType want)
{
    std::string what = "reading input " + std::string(name);
    TypeShape ts = typeShape(api, value, what.c_str());
    if (ts.type != ortType(want)) {
        throw InputError(std::string(name) + " must be a " + elementTypeName(want) + " tensor, got " +
                         ortTypeName(ts.type) + " " + shapeText(ts.shape));
    }
    void* data = nullptr;
    // ORT's C API has no const accessor before 1.23; the buffer is only read.
    check(api, api->GetTensorMutableData(const_cast<OrtValue*>(value), &data), what.c_str());
    HostTensor t;
    t.data = data;
    t.type = want;
    t.shape = std::move(ts.shape);
    return t;
}

size_t
byteSize(const HostTensor& t)
{
    size_t n = 1;
    for (int64_t d : t.shape) {
        if (d < 0) {
            throw InputError("negative dimension in " + shapeText(t.shape));
        }
        auto u = static_cast<size_t>(d);
        if (u != 0 && n > std::numeric_limits<size_t>::max() / u) {
            throw InputError("tensor of shape " + shapeText(t.shape) + " is too large");
        }
        n *= u;
    }
    size_t e = elementSize(t.type);
    if (n > std::numeric_limits<size_t>::max() / e) {
        throw InputError("tensor of shape " + shapeText(t.shape) + " is too large");
    }
    return n * e;
}

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

std::string
stripOrtopsPrefix(const char* message)
{
    std::string_view m(message);
    constexpr std::string_view p = "ortops: ";
    if (m.substr(0, p.size()) == p) {
        m.remove_prefix(p.size());
    }
    return std::string(m);
}

OrtStatus*
makeStatus(const OrtApi* api, OrtErrorCode code, const std::string& prefix, const std::string& message) noexcept
{
    try {
        std::string text = prefix + message;
        return api->CreateStatus(code, text.c_str());
    } catch (...) {
        return api->CreateStatus(code, "ortops: an error occurred and its message could not be formed (out of memory)");
    }
}

// Runs f, turning every exception into an OrtStatus (nullptr when f returns normally).
template <typename F>
OrtStatus*
guarded(const OrtApi* api, const std::string& prefix, F&& f) noexcept
{
    try {
        f();
        return nullptr;
    } catch (const ConfigError& e) {
        return makeStatus(api, ORT_INVALID_ARGUMENT, prefix, e.what());
    } catch (const NodeError& e) {
        return makeStatus(api, ORT_INVALID_ARGUMENT, prefix, e.what());
    } catch (const InputError& e) {
        return makeStatus(api, ORT_INVALID_ARGUMENT, prefix, stripOrtopsPrefix(e.what()));
    } catch (const UnsupportedLayerError& e) {
        return makeStatus(api, ORT_NOT_IMPLEMENTED, prefix, stripOrtopsPrefix(e.what()));
    } catch (const OrtCallError& e) {
        return makeStatus(api, e.code, prefix, e.what());
    } catch (const std::bad_alloc&) {
        return makeStatus(api, ORT_FAIL, prefix, "out of host memory");
    } catch (const std::exception& e) {
        if (isDeviceLost(e)) {
            return makeStatus(api, ORT_RUNTIME_EXCEPTION, prefix, "device lost: " + stripOrtopsPrefix(e.what()));
        }
        if (dynamic_cast<const std::invalid_argument*>(&e) != nullptr) {
            return makeStatus(api, ORT_INVALID_ARGUMENT, prefix, stripOrtopsPrefix(e.what()));
        }
        return makeStatus(api, ORT_FAIL, prefix, stripOrtopsPrefix(e.what()));
    } catch (...) {
        return makeStatus(api, ORT_FAIL, prefix, "unknown error (an exception not derived from std::exception)");
    }
}

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

    // Weights: constant initializers are uploaded now, once; otherwise they are run inputs.
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

void
Kernel::compute(OrtKernelContext* context)
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

    std::shared_ptr<Layer> current;
    if (constantWeights) {
        current = layer;
    } else {
        std::array<std::optional<HostTensor>, 4> fed;
        for (size_t w = 0; w < WEIGHT_INPUTS.size(); ++w) {
            fed[w] = input(WEIGHT_INPUTS[w], op->dtype);
        }
        std::lock_guard<std::mutex> guard(weightsLock);
        bool same = layer != nullptr;
        for (size_t w = 0; same && w < fed.size(); ++w) {
            same = sameBits(held[w], fed[w]);
        }
        if (!same) {
            // Built from ORT's buffers, then kept: a run already holding the old layer
            // finishes with it (shared_ptr).
            auto built = std::make_shared<Layer>(config, weightsOf(fed));
            for (size_t w = 0; w < fed.size(); ++w) {
                hold(held[w], fed[w]);
            }
            layer = std::move(built);
        }
        current = layer;
    }

    OutputShapes shapes = current->outputShapes(inputs);
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
    current->run(inputs, shapes, out);
}

} // namespace ortops::ort
