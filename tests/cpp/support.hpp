// What the core's C++ tests share: a node config written as ortops.convert writes it, random
// weights and inputs, a layer built from them, one run's outputs, and bit-for-bit comparisons.
// Every layer is small (hidden 8, input 4, a few steps): the tests run on lavapipe, and under
// ThreadSanitizer too (scripts/test_sanitizers.sh), where a run costs several times more.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "rnn/layer.hpp"
#include "config/nodeconfig.hpp"

namespace ortops::test {

// The node's op and attributes (the config's defaults otherwise: no activations, no clip).
struct LayerSpec
{
    std::string op = "LSTM";
    uint32_t hidden = 8;
    uint32_t input = 4;
    std::string direction = "forward";
    std::string mode = "deterministic";
    int layout = 0;
    bool peepholes = false;   // an LSTM's P input
    bool bias = true;         // the B input
};

// The v4 config text of a float32 node of this spec (sorted keys, no spaces; every output;
// B listed absent when the spec has no bias).
std::string
configText(const LayerSpec& spec, const std::string& node = "cpp_test");

uint32_t
gatesOf(const std::string& op);

// `n` floats in [-0.5, 0.5) from a fixed generator: the same seed gives the same values.
std::vector<float>
randomFloats(size_t n, uint32_t seed);

// A node's weights (W, R, B and P of ONNX's shapes) and its decoded config.
// The settings these tests are written about: the step kernels, one dispatch a time step, and
// the tiled input projection, on every device. On a CPU implementation of Vulkan (lavapipe) the
// table picks the whole-sequence kernel (variants.hpp, SEQUENCE_STEPS) for most of their shapes
// and the CPU projection (CPU_PROJECTION) for all, each compiled for seconds per new shape
// (the projection 3-5 s of CPU: with both, the suite's first run with Mesa's shader cache
// empty took 259 s of CPU, with these settings 61 s; lavapipe, 2026-12-06);
// test_kernel_choice.cpp checks the table's choice, tests/test_sequence_kernel.py and
// tests/test_cpu_projection.py those kernels' results (tests/conftest.py gives the Python suite
// the same two settings, for the same reason).
LayerSettings
stepKernelSettings();

struct Model
{
    LayerSpec spec;
    NodeConfig config;
    std::vector<float> W, R, B, P;   // B empty unless spec.bias, P unless spec.peepholes

    uint32_t dirs() const { return spec.direction == "bidirectional" ? 2 : 1; }
    Weights weights() const;
    std::unique_ptr<Layer> layer(const LayerSettings& settings = stepKernelSettings()) const;
};

Model
makeModel(const LayerSpec& spec, uint32_t seed = 1);

// One request: X (and optionally sequence_lens, initial_h, initial_c) for `batch` rows of
// `seq` steps, in the layer's layout.
struct Request
{
    uint32_t seq = 0, batch = 0;
    std::vector<float> X, h0, c0;
    std::vector<int32_t> lens;

    RunInputs inputs(const Model& m) const;
};

// A request of random values (states and lengths only where asked).
Request
makeRequest(const Model& m, uint32_t seq, uint32_t batch, uint32_t seed, bool lens = false, bool states = false);

// The outputs of one run, in the cell's order (Y, Y_h[, Y_c]); absent ones empty.
using Outputs = std::array<std::vector<float>, 3>;

// Storage for the outputs `shapes` names, and the pointers run() writes through.
struct OutputBuffers
{
    Outputs values;
    OutputPointers pointers{ nullptr, nullptr, nullptr };
    explicit OutputBuffers(const OutputShapes& shapes);
};

Outputs
runOnce(Layer& layer, const Model& m, const Request& r);

// Whether two outputs are the same bits (every float compared as its 32 bits, so -0 and NaN
// payloads count).
bool
sameBits(const std::vector<float>& a, const std::vector<float>& b);
bool
sameBits(const Outputs& a, const Outputs& b);

// The rows [from, from + count) of a tensor along `axis`.
std::vector<float>
rowsOf(const std::vector<float>& v, const std::vector<int64_t>& shape, size_t axis, int64_t from, int64_t count);

// A request made of rows [from, from + count) of another (batch axis by the layout).
Request
rowsOf(const Model& m, const Request& r, uint32_t from, uint32_t count);

// The outputs' rows [from, from + count) along their batch axis.
Outputs
rowsOf(const Model& m, const Request& r, const Outputs& o, uint32_t from, uint32_t count);

} // namespace ortops::test
