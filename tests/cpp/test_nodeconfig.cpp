// The node-config decoder (src/core/config/nodeconfig.hpp): configs ortops.convert writes decode to
// their fields and encode back to the same text; every other config is refused with a
// ConfigError whose whole message is checked here (prefix, the node's name, what is wrong).
// tests/test_node_config_decoder.py covers the same decoder from Python, with the fuzz corpus.
#include <doctest/doctest.h>

#include <string>

#include "config/nodeconfig.hpp"
#include "support.hpp"

using namespace ortops;
using ortops::test::configText;
using ortops::test::LayerSpec;

namespace {

const std::string PREFIX = "ortops node config: node 'lstm_7': ";

// The canonical LSTM config (hidden 16) with `from` replaced by `to` (which must occur).
std::string
lstmWith(const std::string& from, const std::string& to)
{
    std::string text = configText(LayerSpec{ "LSTM", 16 }, "lstm_7");
    size_t at = text.find(from);
    REQUIRE_MESSAGE(at != std::string::npos, "the config has no " << from);
    return text.replace(at, from.size(), to);
}

// The message decodeNodeConfig refuses `text` with ("" if it decodes).
std::string
refusal(const std::string& text)
{
    try {
        decodeNodeConfig(text);
    } catch (const ConfigError& e) {
        return e.what();
    }
    return "";
}

} // namespace

TEST_SUITE("nodeconfig")
{
    TEST_CASE("a canonical config decodes to its fields and encodes back to the same text")
    {
        std::string text = configText(LayerSpec{ "LSTM", 16 }, "lstm_7");
        NodeConfig c = decodeNodeConfig(text);
        CHECK(c.version == 4);
        CHECK(c.node == "lstm_7");
        REQUIRE(c.cell != nullptr);
        CHECK(c.cell->name == "LSTM");
        CHECK(c.dtype == ElementType::Float32);
        CHECK(c.attrs.hiddenSize == 16);
        CHECK(c.attrs.direction == Direction::Forward);
        CHECK(c.attrs.directions() == 1);
        CHECK(c.attrs.layout == 0);
        CHECK_FALSE(c.attrs.activations.has_value());
        CHECK_FALSE(c.attrs.clip.has_value());
        CHECK(c.outputs == std::vector<std::string>{ "Y", "Y_h", "Y_c" });
        CHECK(c.wants("Y_c"));
        CHECK_FALSE(c.isAbsent("B"));
        CHECK_FALSE(c.device.has_value());
        CHECK(c.mode == Mode::Deterministic);
        CHECK(encodeNodeConfig(c) == text);
    }

    TEST_CASE("every field's other values decode and encode back to the same text")
    {
        const std::string cases[] = {
            lstmWith(R"("direction":"forward")", R"("direction":"bidirectional")"),
            lstmWith(R"("direction":"forward")", R"("direction":"reverse")"),
            lstmWith(R"("hidden_size":16)", R"("hidden_size":null)"),
            lstmWith(R"("layout":0)", R"("layout":1)"),
            lstmWith(R"("clip":null)", R"("clip":0.1)"),
            lstmWith(R"("input_forget":0)", R"("input_forget":1)"),
            lstmWith(R"("activations":null)", R"("activations":["HardSigmoid","Tanh","Tanh"])"),
            lstmWith(R"("activation_alpha":null)", R"("activation_alpha":[0.25])"),
            lstmWith(R"("absent":[])", R"("absent":["B","initial_c","sequence_lens"])"),
            lstmWith(R"("outputs":["Y","Y_h","Y_c"])", R"("outputs":["Y_h"])"),
            lstmWith(R"("device":null)", R"("device":"0123abcd-4567-89ef-0a1b-2c3d4e5f6a7b")"),
            lstmWith(R"("dtype":"float32")", R"("dtype":"float16")"),
            lstmWith(R"("mode":"deterministic")", R"("mode":"exact")"),
            lstmWith(R"("mode":"deterministic")", R"("mode":"fast")"),
            lstmWith(R"("node":"lstm_7")", R"("node":"")"),
        };
        for (const std::string& text : cases) {
            CAPTURE(text);
            CHECK(encodeNodeConfig(decodeNodeConfig(text)) == text);
        }
        NodeConfig bidi = decodeNodeConfig(cases[0]);
        CHECK(bidi.attrs.directions() == 2);
        NodeConfig clipped = decodeNodeConfig(cases[4]);
        CHECK(clipped.attrs.clip == 0.1);
        NodeConfig absent = decodeNodeConfig(cases[8]);
        CHECK(absent.isAbsent("initial_c"));
        CHECK_FALSE(absent.isAbsent("initial_h"));
        NodeConfig onlyH = decodeNodeConfig(cases[9]);
        CHECK(onlyH.wants("Y_h"));
        CHECK_FALSE(onlyH.wants("Y"));
    }

    TEST_CASE("GRU and RNN configs decode with their own outputs and flags")
    {
        std::string gru = configText(LayerSpec{ "GRU", 8 }, "g");
        size_t at = gru.find(R"("linear_before_reset":0)");
        REQUIRE(at != std::string::npos);
        gru.replace(at, 23, R"("linear_before_reset":1)");
        NodeConfig g = decodeNodeConfig(gru);
        CHECK(g.cell->name == "GRU");
        CHECK(g.attrs.linearBeforeReset == 1);
        CHECK(g.outputs == std::vector<std::string>{ "Y", "Y_h" });
        CHECK(encodeNodeConfig(g) == gru);
        NodeConfig r = decodeNodeConfig(configText(LayerSpec{ "RNN", 8 }, "r"));
        CHECK(r.cell->name == "RNN");
        CHECK(r.cell->gates == 1);
    }

    TEST_CASE("a wrong value of each field is refused with a message naming the node, the field and the value")
    {
        const std::pair<std::string, std::string> cases[] = {
            { lstmWith(R"("v":4)", R"("v":3)"), "config version 3 is not the supported version 4" },
            { lstmWith(R"("v":4)", R"("v":"4")"), "v (the config version) must be the integer 4, got the string '4'" },
            { lstmWith(R"("absent":[],)", R"("absent":[],"extra":1,)"),
              "the config has the unknown key 'extra' (its keys are exactly 'absent', 'attrs', 'device', 'dtype', "
              "'mode', 'node', 'op', 'outputs' and 'v')" },
            { lstmWith(R"("device":null,)", ""), "the config lacks the key 'device'" },
            { lstmWith(R"("op":"LSTM")", R"("op":"lstm")"), "op must be 'LSTM', 'GRU' or 'RNN', got the string 'lstm'" },
            { lstmWith(R"("dtype":"float32")", R"("dtype":"float64")"),
              "dtype must be 'float32' or 'float16', got the string 'float64'" },
            { lstmWith(R"("direction":"forward")", R"("direction":"both")"),
              "attrs.direction must be 'forward', 'reverse' or 'bidirectional', got the string 'both'" },
            { lstmWith(R"("hidden_size":16)", R"("hidden_size":0)"),
              "attrs.hidden_size must be null or an integer from 1 to 1048576, got 0" },
            { lstmWith(R"("hidden_size":16)", R"("hidden_size":16.0)"),
              "attrs.hidden_size must be null or an integer from 1 to 1048576, got 16.0" },
            { lstmWith(R"("layout":0)", R"("layout":2)"), "attrs.layout must be 0 or 1, got 2" },
            { lstmWith(R"("clip":null)", R"("clip":-1.5)"),
              "attrs.clip must be null or a positive number (positive as a float32), got -1.5" },
            { lstmWith(R"("linear_before_reset":0)", R"("linear_before_reset":1)"),
              "attrs.linear_before_reset is only defined for GRU, got 1 on LSTM" },
            { lstmWith(R"("input_forget":0)", R"("input_forget":true)"), "attrs.input_forget must be 0 or 1, got true" },
            { lstmWith(R"("activation_beta":null)", R"("activation_beta":"x")"),
              "attrs.activation_beta must be null or a list of numbers, got the string 'x'" },
            { lstmWith(R"("outputs":["Y","Y_h","Y_c"])", R"("outputs":[])"),
              "outputs must name at least one output of LSTM (Y, Y_h, Y_c)" },
            { lstmWith(R"("outputs":["Y","Y_h","Y_c"])", R"("outputs":["Y_h","Y"])"),
              "outputs must be in ONNX's order (Y, Y_h, Y_c), got 'Y' after 'Y_h'" },
            { lstmWith(R"("absent":[])", R"("absent":["X"])"),
              "absent[0] must be an optional input of LSTM (B, sequence_lens, initial_h, initial_c, P), got the "
              "string 'X'" },
            { lstmWith(R"("absent":[])", R"("absent":["B","B"])"), "absent[1] repeats 'B'" },
            { lstmWith(R"("device":null)", R"("device":"ABC")"),
              "device must be null or a Vulkan device UUID (36 lower-case characters, 8-4-4-4-12 hex digits), got "
              "the string 'ABC'" },
            { lstmWith(R"("mode":"deterministic")", R"("mode":"turbo")"),
              "mode must be 'deterministic', 'exact' or 'fast', got the string 'turbo'" },
        };
        for (const auto& [text, what] : cases) {
            CAPTURE(text);
            CHECK(refusal(text) == PREFIX + what);
        }
    }

    TEST_CASE("text that is no config object is refused before any name is read")
    {
        CHECK(refusal("[]") == "ortops node config: the config must be a JSON object, got a list of 0");
        CHECK(refusal("{") ==
              "ortops node config: not valid JSON: unexpected end of input, expected a key (a string) at byte 1");
        CHECK(refusal("") == "ortops node config: not valid JSON: empty input (no value) at byte 0");
        std::string big(NODE_CONFIG_MAX_BYTES + 1, ' ');
        CHECK(refusal(big) == "ortops node config: the config is 65537 bytes, more than the limit of 65536");
        CHECK(refusal(R"({"node":"n"})") == "ortops node config: node 'n': the config lacks the version 'v'");
    }

    TEST_CASE("duplicate keys, trailing bytes and invalid UTF-8 are refused; a name read is shown escaped")
    {
        // "mode" comes before "node" in the sorted text: the reader stops before the name.
        CHECK(refusal(lstmWith(R"("mode":"deterministic")", R"("mode":"deterministic","mode":"fast")")) ==
              "ortops node config: not valid JSON: duplicate key \"mode\" at byte 247");
        // The name is read before the trailing byte: shown, its quote escaped.
        CHECK(refusal(lstmWith(R"("node":"lstm_7")", R"("node":"it's")") + "x") ==
              "ortops node config: node 'it\\'s': not valid JSON: trailing data after the value ('x') at byte 307");
        CHECK(refusal(lstmWith(R"("node":"lstm_7")", "\"node\":\"a\xff\"")) ==
              "ortops node config: not valid JSON: invalid UTF-8 (byte 0xF8..0xFF) at byte 256");
    }

    TEST_CASE("a wrong number of activations for the op and direction is refused")
    {
        CHECK(refusal(lstmWith(R"("activations":null)", R"("activations":["Sigmoid"])")) ==
              PREFIX + "LSTM: activations must list 3 names (f, g, h) for one direction, got 1: ['Sigmoid']");
    }

    TEST_CASE("encoding a config without an op is refused")
    {
        NodeConfig empty;
        CHECK_THROWS_WITH_AS(encodeNodeConfig(empty), "ortops node config: cannot encode a config without an op",
                             ConfigError);
    }
}
