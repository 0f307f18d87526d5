// The core's C++ tests' shared helpers (support.hpp).
#include "support.hpp"

#include <cstring>
#include <limits>
#include <stdexcept>

#include "rnn/coalesce.hpp"

namespace ortops::test {

uint32_t
gatesOf(const std::string& op)
{
    return op == "LSTM" ? 4 : op == "GRU" ? 3 : 1;
}

std::string
configText(const LayerSpec& s, const std::string& node)
{
    std::string outputs = s.op == "LSTM" ? R"(["Y","Y_h","Y_c"])" : R"(["Y","Y_h"])";
    std::string absent = s.bias ? "[]" : R"(["B"])";
    return R"({"absent":)" + absent + R"(,"attrs":{"activation_alpha":null,"activation_beta":null,"activations":null,)"
           R"("clip":null,"direction":")" +
           s.direction + R"(","hidden_size":)" + std::to_string(s.hidden) +
           R"(,"input_forget":0,"layout":)" + std::to_string(s.layout) +
           R"(,"linear_before_reset":0},"device":null,"dtype":"float32","mode":")" + s.mode + R"(","node":")" +
           node + R"(","op":")" + s.op + R"(","outputs":)" + outputs + R"(,"v":4})";
}

std::vector<float>
randomFloats(size_t n, uint32_t seed)
{
    // A 32-bit LCG (Numerical Recipes' constants): reproducible on every platform, unlike
    // std::uniform_real_distribution, whose algorithm the standard leaves open.
    uint32_t x = seed * 2654435761u + 12345u;
    std::vector<float> v(n);
    for (auto& f : v) {
        x = x * 1664525u + 1013904223u;
        f = static_cast<float>(x >> 8) / static_cast<float>(1u << 24) - 0.5f;
    }
    return v;
}

Weights
Model::weights() const
{
    int64_t d = dirs(), g = gatesOf(spec.op), h = spec.hidden;
    Weights w;
    w.W = HostTensor{ W.data(), ElementType::Float32, { d, g * h, spec.input } };
    w.R = HostTensor{ R.data(), ElementType::Float32, { d, g * h, h } };
    if (!B.empty()) {
        w.B = HostTensor{ B.data(), ElementType::Float32, { d, 2 * g * h } };
    }
    if (!P.empty()) {
        w.P = HostTensor{ P.data(), ElementType::Float32, { d, 3 * h } };
    }
    return w;
}

LayerSettings
stepKernelSettings()
{
    LayerSettings s;
    s.variants.sequenceSteps = 0;   // never (variants.hpp: 0 never, 1 where it fits)
    s.variants.cpuProjection = 0;   // the tiled projection (variants.hpp: 0 never, 1 on every device)
    return s;
}

std::unique_ptr<Layer>
Model::layer(const LayerSettings& settings) const
{
    return std::make_unique<Layer>(config, weights(), settings);
}

Model
makeModel(const LayerSpec& spec, uint32_t seed)
{
    Model m;
    m.spec = spec;
    m.config = decodeNodeConfig(configText(spec));
    size_t gh = static_cast<size_t>(m.dirs()) * gatesOf(spec.op) * spec.hidden;
    m.W = randomFloats(gh * spec.input, seed);
    m.R = randomFloats(gh * spec.hidden, seed + 1000);
    if (spec.bias) {
        m.B = randomFloats(2 * gh, seed + 2000);
    }
    if (spec.peepholes) {
        m.P = randomFloats(static_cast<size_t>(m.dirs()) * 3 * spec.hidden, seed + 3000);
    }
    return m;
}

namespace {

std::vector<int64_t>
xShape(const Model& m, uint32_t seq, uint32_t batch)
{
    return m.spec.layout == 0 ? std::vector<int64_t>{ seq, batch, m.spec.input }
                              : std::vector<int64_t>{ batch, seq, m.spec.input };
}

std::vector<int64_t>
stateShape(const Model& m, uint32_t batch)
{
    return m.spec.layout == 0 ? std::vector<int64_t>{ m.dirs(), batch, m.spec.hidden }
                              : std::vector<int64_t>{ batch, m.dirs(), m.spec.hidden };
}

std::vector<int64_t>
yShape(const Model& m, uint32_t seq, uint32_t batch)
{
    return m.spec.layout == 0 ? std::vector<int64_t>{ seq, m.dirs(), batch, m.spec.hidden }
                              : std::vector<int64_t>{ batch, seq, m.dirs(), m.spec.hidden };
}

size_t
product(const std::vector<int64_t>& shape)
{
    size_t n = 1;
    for (int64_t d : shape) {
        n *= static_cast<size_t>(d);
    }
    return n;
}

} // namespace

RunInputs
Request::inputs(const Model& m) const
{
    RunInputs in;
    in.X = HostTensor{ X.data(), ElementType::Float32, xShape(m, seq, batch) };
    if (!lens.empty()) {
        in.sequenceLens = HostTensor{ lens.data(), ElementType::Int32, { batch } };
    }
    if (!h0.empty()) {
        in.initialH = HostTensor{ h0.data(), ElementType::Float32, stateShape(m, batch) };
    }
    if (!c0.empty()) {
        in.initialC = HostTensor{ c0.data(), ElementType::Float32, stateShape(m, batch) };
    }
    return in;
}

Request
makeRequest(const Model& m, uint32_t seq, uint32_t batch, uint32_t seed, bool lens, bool states)
{
    Request r;
    r.seq = seq;
    r.batch = batch;
    r.X = randomFloats(product(xShape(m, seq, batch)), seed);
    if (lens) {
        for (uint32_t b = 0; b < batch; b++) {
            r.lens.push_back(static_cast<int32_t>((seed + 3 * b) % (seq + 1)));   // 0 .. seq
        }
    }
    if (states) {
        r.h0 = randomFloats(product(stateShape(m, batch)), seed + 7);
        if (m.spec.op == "LSTM") {
            r.c0 = randomFloats(product(stateShape(m, batch)), seed + 11);
        }
    }
    return r;
}

OutputBuffers::OutputBuffers(const OutputShapes& shapes)
{
    for (size_t i = 0; i < 3; i++) {
        if (shapes[i]) {
            // A NaN pattern: an output the run does not write stays visibly wrong.
            values[i].assign(product(*shapes[i]), std::numeric_limits<float>::quiet_NaN());
            pointers[i] = values[i].data();
        }
    }
}

Outputs
runOnce(Layer& layer, const Model& m, const Request& r)
{
    RunInputs in = r.inputs(m);
    OutputShapes shapes = layer.outputShapes(in);
    OutputBuffers out(shapes);
    layer.run(in, shapes, out.pointers);
    return out.values;
}

bool
sameBits(const std::vector<float>& a, const std::vector<float>& b)
{
    // Empty vectors may hold no storage (data() null), which memcmp must not be given (UBSan).
    return a.size() == b.size() && (a.empty() || std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0);
}

bool
sameBits(const Outputs& a, const Outputs& b)
{
    return sameBits(a[0], b[0]) && sameBits(a[1], b[1]) && sameBits(a[2], b[2]);
}

std::vector<float>
rowsOf(const std::vector<float>& v, const std::vector<int64_t>& shape, size_t axis, int64_t from, int64_t count)
{
    size_t outer = 1, inner = 1;
    for (size_t i = 0; i < shape.size(); i++) {
        if (i < axis) {
            outer *= static_cast<size_t>(shape[i]);
        } else if (i > axis) {
            inner *= static_cast<size_t>(shape[i]);
        }
    }
    size_t rows = static_cast<size_t>(shape[axis]);
    std::vector<float> out;
    for (size_t o = 0; o < outer; o++) {
        auto begin = v.begin() + static_cast<ptrdiff_t>((o * rows + from) * inner);
        out.insert(out.end(), begin, begin + static_cast<ptrdiff_t>(count * inner));
    }
    return out;
}

Request
rowsOf(const Model& m, const Request& r, uint32_t from, uint32_t count)
{
    BatchAxes axes = BatchAxes::forLayout(m.spec.layout);
    Request part;
    part.seq = r.seq;
    part.batch = count;
    part.X = rowsOf(r.X, xShape(m, r.seq, r.batch), axes.x, from, count);
    if (!r.lens.empty()) {
        part.lens.assign(r.lens.begin() + from, r.lens.begin() + from + count);
    }
    if (!r.h0.empty()) {
        part.h0 = rowsOf(r.h0, stateShape(m, r.batch), axes.state, from, count);
    }
    if (!r.c0.empty()) {
        part.c0 = rowsOf(r.c0, stateShape(m, r.batch), axes.state, from, count);
    }
    return part;
}

Outputs
rowsOf(const Model& m, const Request& r, const Outputs& o, uint32_t from, uint32_t count)
{
    BatchAxes axes = BatchAxes::forLayout(m.spec.layout);
    Outputs part;
    part[0] = rowsOf(o[0], yShape(m, r.seq, r.batch), axes.y, from, count);
    for (size_t i = 1; i < 3; i++) {
        if (!o[i].empty()) {
            part[i] = rowsOf(o[i], stateShape(m, r.batch), axes.state, from, count);
        }
    }
    return part;
}

} // namespace ortops::test
