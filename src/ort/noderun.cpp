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

void
NodeRunner::run(OrtKernelContext* context)
{
    size_t count = 0;
    check(api, api->KernelContext_GetInputCount(context, &count), "KernelContext_GetInputCount");
    auto input = [&](size_t i, ElementType type) -> std::optional<HostTensor> {
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
    };

    RunInputs inputs;
    inputs.X = *input(IN_X, dtype);
    inputs.sequenceLens = input(IN_LENS, ElementType::Int32);
    inputs.initialH = input(IN_H, dtype);
    inputs.initialC = input(IN_C, dtype);

    std::shared_ptr<Layer> current;
    if (constantWeights) {
        current = layer;
    } else {
        std::array<std::optional<HostTensor>, 4> fed;
        for (size_t w = 0; w < WEIGHT_INPUTS.size(); ++w) {
            fed[w] = input(WEIGHT_INPUTS[w], dtype);
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
    std::array<std::vector<unsigned char>, 3> dropped;    // outputs computed the graph does not read
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
    current->run(inputs, shapes, out);
}

} // namespace ortops::ort
