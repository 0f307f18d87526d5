// The native core's errors, in one header both doors include (neither Vulkan nor Kompute
// needed to catch them): the custom-op library turns each into an ONNX Runtime status, the
// Python module into an exception (ortops._vk.DeviceLostError, ValueError).
#pragma once

#include <stdexcept>

namespace ortops {

// A bad weight or input: the message names the operator, the argument, what was expected and
// what came ("LSTM: X must have rank 3 ([seq_length, batch_size, input_size]), got rank 2").
struct InputError : std::invalid_argument
{
    using std::invalid_argument::invalid_argument;
};

// The device cannot run the layer (its limits).
struct UnsupportedLayerError : std::runtime_error
{
    using std::runtime_error::runtime_error;
};

// The device lacks a feature the kernels rely on (rnn/device_check.hpp): the Python door raises
// it as ortops.device.UnsupportedDeviceError (a RuntimeError).
struct UnsupportedDeviceError : UnsupportedLayerError
{
    using UnsupportedLayerError::UnsupportedLayerError;
};

// The device was lost (or a submission failed in a way that leaves it unusable). Every later
// submission on the same context raises it too; a new context starts afresh.
struct DeviceLostError : std::runtime_error
{
    using std::runtime_error::runtime_error;
};

} // namespace ortops
