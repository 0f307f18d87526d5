// ortops::Layer: one RNN, GRU or LSTM node on a Vulkan device — the native core both doors
// drive (the ONNX Runtime custom-op library, src/ort/, and the Python API through
// src/bindings.cpp). Fixed lifecycle: create (config checked, activations resolved, device
// chosen, weights checked and uploaded once) -> run (inputs checked, a plan of that shape
// taken from the pool or recorded once, inputs written, one submit, outputs read).
//
// Thread safety: run() may be called from many threads at once; each concurrent run of a
// shape uses its own plan (plan.hpp), so results equal serial results bit for bit.
//
// Errors: InputError (std::invalid_argument) for a bad weight or input, its message naming
// the operator, the argument, what was expected and what came ("LSTM: X must have rank 3
// ([seq_length, batch_size, input_size]), got rank 2"); UnsupportedLayerError when the
// device cannot run the layer (limits); DeviceLostError (context.hpp) when the device is lost.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "nodeconfig.hpp"

namespace ortops {

struct InputError : std::invalid_argument
{
    using std::invalid_argument::invalid_argument;
};

struct UnsupportedLayerError : std::runtime_error
{
    using std::runtime_error::runtime_error;
};

enum class ElementType
{
    Float32,
    Float16,
    Int32,
};

// A C-contiguous host tensor the caller owns (ORT's input buffer, a numpy array).
struct HostTensor
{
    const void* data = nullptr;
    ElementType type = ElementType::Float32;
    std::vector<int64_t> shape;

    size_t elements() const;
};

struct Weights
{
    HostTensor W;
    HostTensor R;
    std::optional<HostTensor> B;
    std::optional<HostTensor> P;
};

struct RunInputs
{
    HostTensor X;
    std::optional<HostTensor> sequenceLens;
    std::optional<HostTensor> initialH;
    std::optional<HostTensor> initialC;
};

// Output shapes in the cell's output order (Y, Y_h[, Y_c]); an output not computed has no
// shape (nullopt).
using OutputShapes = std::array<std::optional<std::vector<int64_t>>, 3>;
// Where run() writes each output (nullptr for one not computed), C-contiguous, of the shape
// outputShapes() gave and the layer's element type.
using OutputPointers = std::array<void*, 3>;

struct LayerImpl;

class Layer
{
  public:
    // config: the decoded node config (its op, dtype, attrs, absent inputs, outputs wanted,
    // device, mode). Weights must have the config's dtype.
    Layer(const NodeConfig& config, const Weights& weights);
    ~Layer();
    Layer(const Layer&) = delete;
    Layer& operator=(const Layer&) = delete;

    const NodeConfig& config() const;
    ElementType elementType() const;
    // The Vulkan device's name and UUID.
    std::string deviceName() const;
    std::string deviceUuid() const;

    // Check the inputs (shapes, dtypes, sequence_lens range) and return the output shapes.
    OutputShapes outputShapes(const RunInputs& inputs) const;
    // Run: check the inputs, write them, submit once, read the outputs into out.
    void run(const RunInputs& inputs, const OutputPointers& out);

  private:
    std::unique_ptr<LayerImpl> impl;
};

} // namespace ortops
