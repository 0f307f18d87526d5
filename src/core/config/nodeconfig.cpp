// The node config's rules (validateNodeConfig: nodeconfig.hpp holds the v4 format) and its
// encoder. Both readers of a config end here: the JSON decoder (nodeconfig_decode.cpp, for the
// custom-op library's `config` attribute and the Python layer API) and a door's typed reading of
// a standard node (placement/node_check.cpp, for the EP and ortops.convert). Activations are
// checked by resolveActivations (activations.hpp), so names and counts follow the one
// activation table. Every message starts "ortops node config: node '<name>': " (the name
// escaped and cut: it is untrusted text).
#include "config/nodeconfig.hpp"

#include <algorithm>
#include <cmath>

#include "config/activations.hpp"
#include "config/json.hpp"
#include "config/nodeconfig_text.hpp"

namespace ortops {

namespace configtext {

namespace {

const char* HEX = "0123456789abcdef";

} // namespace

std::string
quoted(std::string_view s, size_t limit)
{
    std::string out = "'";
    const auto* p = reinterpret_cast<const unsigned char*>(s.data());
    size_t n = s.size();
    size_t shown = 0;
    size_t i = 0;
    for (; i < n && shown < limit; ++shown) {
        uint32_t cp = p[i];
        size_t len = 1;
        if (cp >= 0x80) {
            size_t need = (cp >= 0xC2 && cp <= 0xDF) ? 2 : (cp >= 0xE0 && cp <= 0xEF) ? 3 : (cp >= 0xF0 && cp <= 0xF4) ? 4 : 0;
            if (need && i + need <= n && json::isValidUtf8(s.substr(i, need))) {
                cp &= need == 2 ? 0x1F : need == 3 ? 0x0F : 0x07;
                for (size_t k = 1; k < need; ++k) {
                    cp = (cp << 6) | (p[i + k] & 0x3F);
                }
                len = need;
            }
            // else: a stray byte, shown as \xNN below (cp < 0x100)
        }
        i += len;
        if (cp == '\'' || cp == '\\') {
            out.push_back('\\');
            out.push_back(static_cast<char>(cp));
        } else if (cp >= 0x20 && cp < 0x7F) {
            out.push_back(static_cast<char>(cp));
        } else if (cp < 0x100) {
            out += "\\x";
            out.push_back(HEX[cp >> 4]);
            out.push_back(HEX[cp & 15]);
        } else {
            int digits = cp < 0x10000 ? 4 : 8;
            out += digits == 4 ? "\\u" : "\\U";
            for (int k = digits - 1; k >= 0; --k) {
                out.push_back(HEX[(cp >> (4 * k)) & 15]);
            }
        }
    }
    if (i < n) {
        out += "...' (" + std::to_string(n) + " bytes)";
    } else {
        out += "'";
    }
    return out;
}

std::string
describeText(std::string_view s)
{
    return "the string " + quoted(s, 40);
}

std::string
describeInteger(int64_t i)
{
    return std::to_string(i);
}

std::string
describeNumber(double d)
{
    if (std::isnan(d)) {
        return "nan";
    }
    if (std::isinf(d)) {
        return d > 0 ? "inf" : "-inf";
    }
    return json::formatDouble(d);
}

std::string
describeList(size_t n)
{
    return "a list of " + std::to_string(n);
}

std::string
choices(const std::vector<std::string_view>& names, const char* last)
{
    std::string out;
    for (size_t i = 0; i < names.size(); ++i) {
        out += i == 0 ? "" : (i + 1 == names.size() ? last : ", ");
        out += "'" + std::string(names[i]) + "'";
    }
    return out;
}

} // namespace configtext

namespace {

using namespace configtext;

constexpr size_t NODE_NAME_MAX_BYTES = 4096;
constexpr int64_t HIDDEN_SIZE_MAX = int64_t(1) << 20;
constexpr size_t PARAMETER_LIST_MAX = 64;

bool
isUuid(std::string_view s)
{
    if (s.size() != 36) {
        return false;
    }
    for (size_t i = 0; i < s.size(); ++i) {
        char c = s[i];
        if (i == 8 || i == 13 || i == 18 || i == 23) {
            if (c != '-') {
                return false;
            }
        } else if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) {
            return false;
        }
    }
    return true;
}

template<typename T, size_t N>
std::vector<std::string_view>
namesOf(const T (&values)[N], const char* (*name)(T))
{
    std::vector<std::string_view> out;
    for (T v : values) {
        out.emplace_back(name(v));
    }
    return out;
}

// The rules, in the order a config is read (so that the decoder reports what it reported).
class Rules
{
  public:
    explicit Rules(const NodeConfigDraft& d)
      : d_(d)
    {
    }

    NodeConfig run()
    {
        NodeConfig c;
        if (d_.node.size() > NODE_NAME_MAX_BYTES) {
            fail("node (the name) must be at most " + std::to_string(NODE_NAME_MAX_BYTES) + " bytes, got " +
                 std::to_string(d_.node.size()));
        }
        c.node = d_.node;
        c.cell = findCell(d_.op);
        if (c.cell == nullptr) {
            fail(mustBe("op") + ", got " + describeText(d_.op));
        }
        std::optional<ElementType> dtype = parseElementType(d_.dtype);
        if (!dtype || std::find(std::begin(LAYER_TYPES), std::end(LAYER_TYPES), *dtype) == std::end(LAYER_TYPES)) {
            fail(mustBe("dtype") + ", got " + describeText(d_.dtype));
        }
        c.dtype = *dtype;
        attrs(*c.cell, c.attrs);
        c.absent = names(d_.absent, "absent", *c.cell, false);
        c.outputs = names(d_.outputs, "outputs", *c.cell, true);
        if (d_.device) {
            if (!isUuid(*d_.device)) {
                fail(mustBe("device") + ", got " + describeText(*d_.device));
            }
            c.device = d_.device;
        }
        std::optional<Mode> mode = parseMode(d_.mode);
        if (!mode) {
            fail(mustBe("mode") + ", got " + describeText(d_.mode));
        }
        c.mode = *mode;
        return c;
    }

  private:
    [[noreturn]] void fail(const std::string& what) const
    {
        throw ConfigError("ortops node config: node " + quoted(d_.node) + ": " + what);
    }

    void flag(int64_t value, const char* key) const
    {
        if (value != 0 && value != 1) {
            fail(mustBe(std::string("attrs.") + key) + ", got " + describeInteger(value));
        }
    }

    // A float attribute's value: finite, and finite as the float32 an ONNX attribute holds.
    void finite32(double d, const std::string& what) const
    {
        if (!std::isfinite(d) || std::fabs(d) >= 0x1.ffffffp127) {
            fail(what + " must be a finite float32 value, got " + describeNumber(d));
        }
    }

    void parameters(const std::optional<std::vector<double>>& values, const char* key) const
    {
        if (!values) {
            return;
        }
        std::string what = std::string("attrs.") + key;
        if (values->size() > PARAMETER_LIST_MAX) {
            fail(what + " must list at most " + std::to_string(PARAMETER_LIST_MAX) + " numbers, got " +
                 std::to_string(values->size()));
        }
        for (size_t i = 0; i < values->size(); ++i) {
            finite32((*values)[i], what + "[" + std::to_string(i) + "]");
        }
    }

    void attrs(const Cell& cell, NodeAttrs& out) const
    {
        const NodeConfigDraft::Attrs& a = d_.attrs;
        if (a.hiddenSize && (*a.hiddenSize < 1 || *a.hiddenSize > HIDDEN_SIZE_MAX)) {
            fail(mustBe("attrs.hidden_size") + ", got " + describeInteger(*a.hiddenSize));
        }
        out.hiddenSize = a.hiddenSize;
        std::optional<Direction> direction = parseDirection(a.direction);
        if (!direction) {
            fail(mustBe("attrs.direction") + ", got " + describeText(a.direction));
        }
        out.direction = *direction;
        if (a.layout != 0 && a.layout != 1) {
            fail(mustBe("attrs.layout") + ", got " + describeInteger(a.layout));
        }
        out.layout = a.layout;
        out.activations = a.activations;
        parameters(a.activationAlpha, "activation_alpha");
        parameters(a.activationBeta, "activation_beta");
        out.activationAlpha = a.activationAlpha;
        out.activationBeta = a.activationBeta;
        if (a.clip) {
            finite32(*a.clip, "attrs.clip");
            if (!(*a.clip > 0.0) || static_cast<float>(*a.clip) == 0.0f) {
                fail("attrs.clip must be null or a positive number (positive as a float32), got " +
                     describeNumber(*a.clip));
            }
            out.clip = a.clip;
        }
        flag(a.inputForget, "input_forget");
        if (a.inputForget && !cell.inputForget) {
            fail("attrs.input_forget is only defined for LSTM, got 1 on " + std::string(cell.name));
        }
        out.inputForget = a.inputForget;
        flag(a.linearBeforeReset, "linear_before_reset");
        if (a.linearBeforeReset && !cell.linearBeforeReset) {
            fail("attrs.linear_before_reset is only defined for GRU, got 1 on " + std::string(cell.name));
        }
        out.linearBeforeReset = a.linearBeforeReset;
        try {
            resolveActivations(cell, out.directions(), out.activations, out.activationAlpha, out.activationBeta);
        } catch (const std::invalid_argument& e) {
            fail(e.what());
        }
    }

    // absent (outputs = false): distinct optional inputs of the cell, any order; outputs:
    // distinct outputs of the cell in ONNX's order, at least one.
    std::vector<std::string> names(const std::vector<std::string>& list, const char* key, const Cell& cell,
                                   bool outputs) const
    {
        std::string allowed = nameChoices(cell, outputs);
        if (outputs && list.empty()) {
            fail("outputs must name at least one output of " + std::string(cell.name) + " (" + allowed + ")");
        }
        std::vector<std::string> out;
        int64_t last = -1;
        for (size_t i = 0; i < list.size(); ++i) {
            const std::string& item = list[i];
            int64_t index = nameIndex(cell, item, outputs);
            if (index < 0) {
                fail(nameItemMessage(cell, key, i, outputs, describeText(item)));
            }
            if (std::find(out.begin(), out.end(), item) != out.end()) {
                fail(std::string(key) + "[" + std::to_string(i) + "] repeats " + quoted(item));
            }
            if (outputs && index < last) {
                fail("outputs must be in ONNX's order (" + allowed + "), got " + quoted(item) + " after " +
                     quoted(out.back()));
            }
            last = index;
            out.push_back(item);
        }
        return out;
    }

    const NodeConfigDraft& d_;
};

json::Value
stringList(const std::vector<std::string>& names)
{
    std::vector<json::Value> items;
    for (const std::string& n : names) {
        items.push_back(json::Value::fromString(n));
    }
    return json::Value::array(std::move(items));
}

json::Value
numberList(const std::optional<std::vector<double>>& values)
{
    if (!values) {
        return json::Value::null();
    }
    std::vector<json::Value> items;
    for (double d : *values) {
        items.push_back(json::Value::fromNumber(d));
    }
    return json::Value::array(std::move(items));
}

} // namespace

namespace configtext {

std::string
nameChoices(const Cell& cell, bool outputs)
{
    std::string allowed;
    if (outputs) {
        for (uint32_t i = 0; i < cell.outputCount; ++i) {
            allowed += (i ? ", " : "") + std::string(cell.outputs[i]);
        }
    } else {
        for (uint32_t i = 3; i < cell.inputCount; ++i) {
            allowed += (i > 3 ? ", " : "") + std::string(cell.inputs[i]);
        }
    }
    return allowed;
}

int64_t
nameIndex(const Cell& cell, std::string_view name, bool outputs)
{
    if (outputs) {
        for (uint32_t k = 0; k < cell.outputCount; ++k) {
            if (cell.outputs[k] == name) {
                return k;
            }
        }
        return -1;
    }
    for (uint32_t k = 3; k < cell.inputCount; ++k) {
        if (cell.inputs[k] == name) {
            return k;
        }
    }
    return -1;
}

std::string
nameItemMessage(const Cell& cell, const char* key, size_t i, bool outputs, const std::string& got)
{
    return std::string(key) + "[" + std::to_string(i) + "] must be " + (outputs ? "an output" : "an optional input") +
           " of " + std::string(cell.name) + " (" + nameChoices(cell, outputs) + "), got " + got;
}

std::string
mustBe(std::string_view key)
{
    std::string k(key);
    if (key == "op") {
        return k + " must be 'LSTM', 'GRU' or 'RNN'";
    }
    if (key == "dtype") {
        return k + " must be " + choices(namesOf(LAYER_TYPES, elementTypeName));
    }
    if (key == "mode") {
        return k + " must be " + choices(namesOf(MODES, modeName));
    }
    if (key == "attrs.direction") {
        return k + " must be " + choices(namesOf(DIRECTIONS, directionName));
    }
    if (key == "device") {
        return k + " must be null or a Vulkan device UUID (36 lower-case characters, 8-4-4-4-12 hex digits)";
    }
    if (key == "attrs.hidden_size") {
        return k + " must be null or an integer from 1 to " + std::to_string(HIDDEN_SIZE_MAX);
    }
    return k + " must be 0 or 1";    // attrs.layout, attrs.input_forget, attrs.linear_before_reset
}

} // namespace configtext

bool
NodeConfig::isAbsent(std::string_view input) const
{
    return std::find(absent.begin(), absent.end(), input) != absent.end();
}

bool
NodeConfig::wants(std::string_view output) const
{
    return std::find(outputs.begin(), outputs.end(), output) != outputs.end();
}

NodeConfig
validateNodeConfig(const NodeConfigDraft& draft)
{
    return Rules(draft).run();
}

std::string
encodeNodeConfig(const NodeConfig& config)
{
    if (!config.cell) {
        throw ConfigError("ortops node config: cannot encode a config without an op");
    }
    using json::Value;
    const NodeAttrs& a = config.attrs;
    Value attrs = Value::object({
      { "activation_alpha", numberList(a.activationAlpha) },
      { "activation_beta", numberList(a.activationBeta) },
      { "activations", a.activations ? stringList(*a.activations) : Value::null() },
      { "clip", a.clip ? Value::fromNumber(*a.clip) : Value::null() },
      { "direction", Value::fromString(directionName(a.direction)) },
      { "hidden_size", a.hiddenSize ? Value::fromInteger(*a.hiddenSize) : Value::null() },
      { "input_forget", Value::fromInteger(a.inputForget) },
      { "layout", Value::fromInteger(a.layout) },
      { "linear_before_reset", Value::fromInteger(a.linearBeforeReset) },
    });
    Value root = Value::object({
      { "absent", stringList(config.absent) },
      { "attrs", std::move(attrs) },
      { "device", config.device ? Value::fromString(*config.device) : Value::null() },
      { "dtype", Value::fromString(elementTypeName(config.dtype)) },
      { "mode", Value::fromString(modeName(config.mode)) },
      { "node", Value::fromString(config.node) },
      { "op", Value::fromString(std::string(config.cell->name)) },
      { "outputs", stringList(config.outputs) },
      { "v", Value::fromInteger(config.version) },
    });
    try {
        return json::write(root);
    } catch (const std::invalid_argument& e) {
        throw ConfigError(std::string("ortops node config: cannot encode: ") + e.what());
    }
}

} // namespace ortops
