// The node checker (src/core/placement/node_check.hpp), the EP's decisions
// (placement/decisions.hpp) and DynamicQuantizeLSTM's rule (config/quantized.hpp), with no
// device and no ONNX Runtime: a described node is taken with its checked config or refused with
// the core's words; a bad attribute value read as a typed attribute and the same value read from
// a config's JSON give one message (validateNodeConfig behind both); decisions are kept per
// report key, a later one replacing an earlier one of the same node. tests/test_node_check.py
// covers the same checker from Python (ortops._vk.check_node).
#include <doctest/doctest.h>

#include <cmath>
#include <string>
#include <vector>

#include "base/errors.hpp"
#include "config/nodeconfig.hpp"
#include "config/quantized.hpp"
#include "placement/decisions.hpp"
#include "placement/node_check.hpp"

using namespace ortops;

namespace {

// A GRU of hidden 4, input 3: X fed, W and R constant (shapes only).
NodeDescription
gru()
{
    NodeDescription d;
    d.name = "g";
    d.opType = "GRU";
    d.sinceVersion = 14;
    d.inputs = { { "X", onnx::FLOAT, std::vector<int64_t>{ 5, 2, 3 }, false, nullptr },
                 { "W", onnx::FLOAT, std::vector<int64_t>{ 1, 12, 3 }, true, nullptr },
                 { "R", onnx::FLOAT, std::vector<int64_t>{ 1, 12, 4 }, true, nullptr } };
    d.outputs = { "Y", "Y_h" };
    NodeAttribute hidden;
    hidden.name = "hidden_size";
    hidden.type = onnx::ATTR_INT;
    hidden.i = 4;
    d.attributes = { hidden };
    return d;
}

NodeQuestion
question()
{
    NodeQuestion q;
    q.device = DeviceFacts{ "dev", "0123abcd-4567-89ef-0a1b-2c3d4e5f6a7b", 1 << 20, true };
    return q;
}

NodeDescription
withInt(const std::string& name, int64_t value)
{
    NodeDescription d = gru();
    NodeAttribute a;
    a.name = name;
    a.type = onnx::ATTR_INT;
    a.i = value;
    d.attributes.push_back(a);
    return d;
}

std::string
decoderRefusal(const std::string& text)
{
    try {
        decodeNodeConfig(text);
    } catch (const ConfigError& e) {
        return e.what();
    }
    return "";
}

} // namespace

TEST_CASE("a plain node is taken with its config; its encoding decodes to the same config")
{
    NodeVerdict v = checkNode(gru(), question());
    REQUIRE_MESSAGE(v.taken, v.reason);
    CHECK(v.reason == "dev");
    CHECK(v.weights == "constant, uploaded once");    // W and R constant, B absent
    CHECK(v.config.outputs == std::vector<std::string>{ "Y", "Y_h" });
    CHECK(v.config.absent == std::vector<std::string>{ "B", "sequence_lens", "initial_h" });
    std::string text = encodeNodeConfig(v.config);
    CHECK(encodeNodeConfig(decodeNodeConfig(text)) == text);
}

TEST_CASE("an Unsqueeze's axes make those dimensions of X 1 where the graph gives none")
{
    auto xDims = [](GraphDims dims, std::optional<std::vector<int64_t>> axes) {
        NodeDescription d = gru();
        d.inputs[0].dims = std::move(dims);
        d.inputs[0].unsqueezed = std::move(axes);
        NodeVerdict v = checkNode(d, question());
        REQUIRE_MESSAGE(v.taken, v.reason);
        return v.xDims;
    };
    using Dims = std::vector<int64_t>;
    CHECK(xDims(std::nullopt, std::nullopt) == std::nullopt);             // nothing known
    CHECK(xDims(std::nullopt, Dims{ 0 }) == Dims{ 1, -1, -1 });            // one frame: seq 1
    CHECK(xDims(Dims{}, Dims{ -3 }) == Dims{ 1, -1, -1 });                 // ORT's rank 0: unknown
    CHECK(xDims(Dims{ -1, 2, 3 }, Dims{ 0, 1 }) == Dims{ 1, 2, 3 });       // a known dim stays
    CHECK(xDims(Dims{ -1, -1, 3 }, Dims{ 3, -4 }) == Dims{ -1, -1, 3 });   // axes beyond rank 3
}

TEST_CASE("a bad attribute value: the typed path and the JSON decoder give one message")
{
    NodeVerdict v = checkNode(withInt("layout", 2), question());
    REQUIRE_FALSE(v.taken);
    std::string good = encodeNodeConfig(checkNode(gru(), question()).config);
    std::string bad = good;
    bad.replace(bad.find("\"layout\":0"), 10, "\"layout\":2");
    CHECK(v.reason == decoderRefusal(bad));
    CHECK(v.reason == "ortops node config: node 'g': attrs.layout must be 0 or 1, got 2");

    NodeVerdict h = checkNode(withInt("hidden_size", 0), question());
    std::string zero = good;
    zero.replace(zero.find("\"hidden_size\":4"), 15, "\"hidden_size\":0");
    CHECK(h.reason == decoderRefusal(zero));
}

TEST_CASE("refusals name the version, the attribute's type, the device")
{
    NodeDescription old = gru();
    old.sinceVersion = 3;
    CHECK(checkNode(old, question()).reason == "GRU-3 is not one of the supported versions 7, 14, 22");
    NodeDescription typed = gru();
    typed.attributes[0].type = onnx::ATTR_FLOAT;
    CHECK(checkNode(typed, question()).reason == "attribute hidden_size has type FLOAT, the GRU schema says INT");
    NodeQuestion none = question();
    none.device.reset();
    none.noDevice = "no device here";
    CHECK(checkNode(gru(), none).reason == "no device here");
    NodeQuestion small = question();
    small.device->maxStorageBufferRange = 100;
    CHECK(checkNode(gru(), small).reason == "GRU: unsupported layer on dev: W needs 144 bytes in one storage binding, "
                                           "above the device's maxStorageBufferRange of 100 bytes");
}

TEST_CASE("decisions are kept per report key, the latest per node")
{
    NodeDescription d = gru();
    NodeVerdict taken = checkNode(d, question());
    NodeVerdict refused = checkNode(withInt("layout", 2), question());
    std::string path = pathStep("Loop", "loop", "body");
    recordDecision("r1", decisionOf(path, d, refused));
    recordDecision("r1", decisionOf(path, d, taken));
    recordDecision("r1", decisionOf("", d, refused));    // the same name in another graph
    recordDecision("", decisionOf(path, d, taken));      // no report key: nothing kept
    std::vector<NodeDecision> got = decisionsFor("r1");
    REQUIRE(got.size() == 2);
    CHECK(got[0].taken);
    CHECK(got[0].key == "Loop loop body\ng\nGRU");
    CHECK(got[0].outputsKey == outputsKey({ "Y", "Y_h", "" }));
    CHECK(got[0].outputsKey == "Y\nY_h");
    CHECK_FALSE(got[1].taken);
    CHECK(decodeNodeConfig(got[0].config).outputs == taken.config.outputs);
    forgetDecisions("r1");
    CHECK(decisionsFor("r1").empty());
}

TEST_CASE("DynamicQuantizeLSTM's weights: the formula and the refusals")
{
    std::vector<int8_t> q = { -2, -1, 0, 1, 2, 3 };    // [1, 3, 2]: 3 rows, 2 gate columns
    std::vector<float> scale = { 0.5f, 0.25f };
    std::vector<int8_t> zero = { 0, 0 };
    QuantTensor qt{ onnx::INT8, { 1, 3, 2 }, q.data() }, st{ onnx::FLOAT, { 1, 2 }, scale.data() },
      zt{ onnx::INT8, { 1, 2 }, zero.data() };
    std::vector<int64_t> shape;
    std::vector<float> w = dequantizeWeight("W", qt, st, zt, shape);
    CHECK(shape == std::vector<int64_t>{ 1, 2, 3 });
    CHECK(w == std::vector<float>{ -1.0f, 0.0f, 1.0f, -0.25f, 0.25f, 0.75f });
    zero[1] = 3;
    CHECK_THROWS_WITH_AS(checkQuantizedWeight("W", qt, st, zt),
                         "DynamicQuantizeLSTM: W_zero_point: expected per-channel int8 zero points all 0 (ONNX "
                         "Runtime's kernel refuses others), got [0, 3]",
                         InputError);
    scale[0] = NAN;
    zero[1] = 0;
    CHECK_THROWS_WITH_AS(checkQuantizedWeight("W", qt, st, zt), "DynamicQuantizeLSTM: W_scale: expected finite scales, got [nan]",
                         InputError);
}
