// One node's run through ORT's kernel context (noderun.hpp).
#include "ort/noderun.hpp"

#include <algorithm>
#include <cstring>
#include <limits>
#include <stdexcept>
#include <utility>

#include "ort/status.hpp"
#include "ort/values.hpp"

namespace ortops::ort {

namespace {

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

} // namespace

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

WeightSource
weightSource(const OrtApi* api, const OrtValue* value, std::string_view name, ElementType type)
{
    WeightSource w;
    w.present = true;
    if (value != nullptr) {
        w.constant = hostTensor(api, value, name, type);
    }
    return w;
}

void
NodeRunner::useWeights(const std::array<WeightSource, 4>& weights)
{
    std::array<std::optional<HostTensor>, 4> constant;
    constantWeights = true;
    for (size_t w = 0; w < weights.size(); ++w) {
        if (weights[w].present && !weights[w].constant) {
            constantWeights = false;
        }
        constant[w] = weights[w].constant;
    }
    if (constantWeights) {
        layer = std::make_shared<Layer>(config, weightsOf(constant));
    }
}

// The input at cell position `i` (nullopt: the node has none there).
std::optional<HostTensor>
NodeRunner::input(OrtKernelContext* context, size_t count, size_t i, ElementType type) const
{
    if (i >= cell->inputCount || inputAt[i] < 0) {
        return std::nullopt;
    }
    const OrtValue* value = nullptr;
    if (static_cast<size_t>(inputAt[i]) < count) {
        check(api, api->KernelContext_GetInput(context, inputAt[i], &value), "KernelContext_GetInput");
    }
    if (value == nullptr) {
        throw NodeError("input " + std::string(cell->inputs[i]) + " of the node came without a value");
    }
    return hostTensor(api, value, cell->inputs[i], type);
}

// The layer of the weights fed (built anew when their bits changed), or the constant one.
std::shared_ptr<Layer>
NodeRunner::layerFor(OrtKernelContext* context, size_t count)
{
    if (constantWeights) {
        return layer;
    }
    std::array<std::optional<HostTensor>, 4> fed;
    for (size_t w = 0; w < WEIGHT_INPUTS.size(); ++w) {
        fed[w] = input(context, count, WEIGHT_INPUTS[w], dtype);
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

// ORT's output tensors for the shapes; an output computed that the graph does not read goes
// to `dropped`.
OutputPointers
NodeRunner::outputsFor(OrtKernelContext* context, const OutputShapes& shapes,
                       std::array<std::vector<unsigned char>, 3>& dropped) const
{
    OutputPointers out{};
    for (size_t i = 0; i < cell->outputCount; ++i) {
        if (!shapes[i]) {
            if (outputAt[i] >= 0) {
                throw std::logic_error("the layer gave no shape for output " + std::string(cell->outputs[i]) +
                                       ", which the config computes");
            }
            continue;
        }
        const std::vector<int64_t>& shape = *shapes[i];
        if (outputAt[i] < 0) {
            HostTensor t;
            t.type = dtype;
            t.shape = shape;
            dropped[i].resize(t.elements() * elementSize(dtype));
            out[i] = dropped[i].data();
            continue;
        }
        OrtValue* value = nullptr;
        check(api, api->KernelContext_GetOutput(context, outputAt[i], shape.data(), shape.size(), &value),
              "KernelContext_GetOutput");
        if (value == nullptr) {
            throw std::logic_error("ONNX Runtime gave no tensor for output " + std::string(cell->outputs[i]));
        }
        void* data = nullptr;
        check(api, api->GetTensorMutableData(value, &data), "GetTensorMutableData");
        out[i] = data;
    }
    return out;
}

void
NodeRunner::run(OrtKernelContext* context)
{
    size_t count = 0;
    check(api, api->KernelContext_GetInputCount(context, &count), "KernelContext_GetInputCount");
    RunInputs inputs;
    inputs.X = *input(context, count, IN_X, dtype);
    inputs.sequenceLens = input(context, count, IN_LENS, ElementType::Int32);
    inputs.initialH = input(context, count, IN_H, dtype);
    inputs.initialC = input(context, count, IN_C, dtype);
    std::shared_ptr<Layer> current = layerFor(context, count);
    OutputShapes shapes = current->outputShapes(inputs);
    std::array<std::vector<unsigned char>, 3> dropped;
    current->run(inputs, shapes, outputsFor(context, shapes, dropped));
}

} // namespace ortops::ort
