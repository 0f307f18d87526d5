// decodeNodeConfig / encodeNodeConfig (nodeconfig.hpp holds the v4 format). The decoder is
// strict: a config is refused unless it is one JSON object (json.hpp's strict reader) with
// exactly the keys of v4 at both levels, each of the type and in the range the format says;
// activations are checked by resolveActivations (activations.hpp), so names and counts follow
// the one activation table. Every message starts "ortops node config: " and, once the node's
// name has been read, names the node (escaped and cut: the name is untrusted text).
#include "config/nodeconfig.hpp"

#include <algorithm>
#include <array>
#include <iterator>
#include <cmath>
#include <limits>

#include "config/activations.hpp"
#include "config/json.hpp"

namespace ortops {

namespace {

constexpr size_t NODE_NAME_MAX_BYTES = 4096;
constexpr int64_t HIDDEN_SIZE_MAX = int64_t(1) << 20;
constexpr size_t PARAMETER_LIST_MAX = 64;

constexpr std::string_view TOP_KEYS[] = { "absent", "attrs", "device", "dtype", "mode", "node", "op", "outputs", "v" };
constexpr std::string_view ATTR_KEYS[] = { "activation_alpha", "activation_beta", "activations", "clip", "direction",
                                           "hidden_size", "input_forget", "layout", "linear_before_reset" };

// The names a vocabulary of types.hpp may have, in its order.
template<typename T, size_t N, typename Name>
std::array<std::string_view, N>
namesOf(const T (&values)[N], Name name)
{
    std::array<std::string_view, N> out;
    for (size_t i = 0; i < N; ++i) {
        out[i] = name(values[i]);
    }
    return out;
}

const auto DTYPE_NAMES = namesOf(LAYER_TYPES, elementTypeName);
const auto DIRECTION_NAMES = namesOf(DIRECTIONS, directionName);
const auto MODE_NAMES = namesOf(MODES, modeName);

const char* HEX = "0123456789abcdef";

// Untrusted text for a message: between single quotes, printable ASCII as is, the quote and
// the backslash escaped, every other byte sequence as \xNN / \uNNNN / \UNNNNNNNN (valid UTF-8
// decoded; a stray byte as \xNN), cut after `limit` characters with "..." and the size.
std::string
quoted(std::string_view s, size_t limit = 64)
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

// A value as a message shows it: scalars by their text, strings quoted and cut.
std::string
describe(const json::Value& v)
{
    switch (v.type) {
        case json::Type::Null: return "null";
        case json::Type::Bool: return v.boolean ? "true" : "false";
        case json::Type::Integer: return std::to_string(v.integer);
        case json::Type::Number: return json::formatDouble(v.number);
        case json::Type::String: return "the string " + quoted(v.string, 40);
        case json::Type::Array: return "a list of " + std::to_string(v.items.size());
        case json::Type::Object: return "an object";
    }
    return "?";
}

template<typename Names>
std::string
choices(const Names& names, const char* last = " or ")
{
    const size_t N = std::size(names);
    std::string out;
    for (size_t i = 0; i < N; ++i) {
        out += i == 0 ? "" : (i + 1 == N ? last : ", ");
        out += "'" + std::string(names[i]) + "'";
    }
    return out;
}

template<typename Names>
bool
oneOf(std::string_view s, const Names& names)
{
    return std::find(std::begin(names), std::end(names), s) != std::end(names);
}

class Decoder
{
  public:
    explicit Decoder(std::string_view text)
      : text_(text)
    {
    }

    NodeConfig run()
    {
        if (text_.size() > NODE_CONFIG_MAX_BYTES) {
            fail("the config is " + std::to_string(text_.size()) + " bytes, more than the limit of " +
                 std::to_string(NODE_CONFIG_MAX_BYTES));
        }
        json::Value root;
        try {
            json::ParseOptions options;
            options.maxBytes = NODE_CONFIG_MAX_BYTES;
            options.captureKey = "node";
            root = json::parse(text_, options);
        } catch (const json::Error& e) {
            if (e.captured) {
                name_ = e.captured;
            }
            fail(std::string("not valid JSON: ") + e.what());
        }
        if (root.type != json::Type::Object) {
            fail(std::string("the config must be a JSON object, got ") + describe(root));
        }
        // The name first, so that every later message can name the node.
        const json::Value* node = root.find("node");
        if (node && node->type == json::Type::String) {
            name_ = node->string;
        }
        NodeConfig c;
        const json::Value* v = root.find("v");
        if (!v) {
            fail("the config lacks the version 'v'");
        }
        if (v->type != json::Type::Integer) {
            fail("v (the config version) must be the integer " + std::to_string(NODE_CONFIG_VERSION) + ", got " +
                 describe(*v));
        }
        if (v->integer != NODE_CONFIG_VERSION) {
            fail("config version " + describe(*v) + " is not the supported version " +
                 std::to_string(NODE_CONFIG_VERSION));
        }
        c.version = NODE_CONFIG_VERSION;
        exactKeys(root, TOP_KEYS, "the config");

        if (node->type != json::Type::String) {
            fail("node must be a string, got " + describe(*node));
        }
        if (node->string.size() > NODE_NAME_MAX_BYTES) {
            fail("node (the name) must be at most " + std::to_string(NODE_NAME_MAX_BYTES) + " bytes, got " +
                 std::to_string(node->string.size()));
        }
        c.node = node->string;

        const json::Value& op = *root.find("op");
        if (op.type != json::Type::String || !findCell(op.string)) {
            fail("op must be 'LSTM', 'GRU' or 'RNN', got " + describe(op));
        }
        c.cell = findCell(op.string);

        c.dtype = *parseElementType(oneString(root, "dtype", DTYPE_NAMES));
        attrs(*root.find("attrs"), *c.cell, c.attrs);
        c.absent = nameList(*root.find("absent"), "absent", *c.cell, false);
        c.outputs = nameList(*root.find("outputs"), "outputs", *c.cell, true);

        const json::Value& device = *root.find("device");
        if (device.type != json::Type::Null) {
            if (device.type != json::Type::String || !isUuid(device.string)) {
                fail("device must be null or a Vulkan device UUID (36 lower-case characters, 8-4-4-4-12 "
                     "hex digits), got " + describe(device));
            }
            c.device = device.string;
        }
        c.mode = *parseMode(oneString(root, "mode", MODE_NAMES));
        return c;
    }

  private:
    [[noreturn]] void fail(const std::string& what) const
    {
        std::string message = "ortops node config: ";
        if (name_) {
            message += "node " + quoted(*name_) + ": ";
        }
        throw ConfigError(message + what);
    }

    template<typename Names>
    void exactKeys(const json::Value& object, const Names& keys, const std::string& where) const
    {
        for (const auto& [key, value] : object.members) {
            if (!oneOf(key, keys)) {
                fail(where + " has the unknown key " + quoted(key, 40) + " (its keys are exactly " + choices(keys, " and ") +
                     ")");
            }
        }
        for (std::string_view key : keys) {
            if (!object.find(key)) {
                fail(where + " lacks the key '" + std::string(key) + "'");
            }
        }
    }

    template<typename Names>
    std::string oneString(const json::Value& object, const char* key, const Names& names,
                          const char* prefix = "") const
    {
        const json::Value& v = *object.find(key);
        if (v.type != json::Type::String || !oneOf(v.string, names)) {
            fail(std::string(prefix) + key + " must be " + choices(names) + ", got " + describe(v));
        }
        return v.string;
    }

    int64_t flag(const json::Value& attrs, const char* key) const
    {
        const json::Value& v = *attrs.find(key);
        if (v.type != json::Type::Integer || (v.integer != 0 && v.integer != 1)) {
            fail(std::string("attrs.") + key + " must be 0 or 1, got " + describe(v));
        }
        return v.integer;
    }

    // A float attribute's value: finite, and finite as the float32 an ONNX attribute holds.
    double finite32(const json::Value& v, const std::string& what) const
    {
        if (!v.isNumeric()) {
            fail(what + " must be a number, got " + describe(v));
        }
        double d = v.number;
        if (!std::isfinite(d) || std::fabs(d) >= 0x1.ffffffp127) {
            fail(what + " must be a finite float32 value, got " + describe(v));
        }
        return d;
    }

    std::optional<std::vector<double>> parameters(const json::Value& attrs, const char* key) const
    {
        const json::Value& v = *attrs.find(key);
        if (v.type == json::Type::Null) {
            return std::nullopt;
        }
        std::string what = std::string("attrs.") + key;
        if (v.type != json::Type::Array) {
            fail(what + " must be null or a list of numbers, got " + describe(v));
        }
        if (v.items.size() > PARAMETER_LIST_MAX) {
            fail(what + " must list at most " + std::to_string(PARAMETER_LIST_MAX) + " numbers, got " +
                 std::to_string(v.items.size()));
        }
        std::vector<double> out;
        for (size_t i = 0; i < v.items.size(); ++i) {
            out.push_back(finite32(v.items[i], what + "[" + std::to_string(i) + "]"));
        }
        return out;
    }

    void attrs(const json::Value& a, const Cell& cell, NodeAttrs& out) const
    {
        if (a.type != json::Type::Object) {
            fail("attrs must be an object, got " + describe(a));
        }
        exactKeys(a, ATTR_KEYS, "attrs");

        const json::Value& hidden = *a.find("hidden_size");
        if (hidden.type != json::Type::Null) {
            if (hidden.type != json::Type::Integer || hidden.integer < 1 || hidden.integer > HIDDEN_SIZE_MAX) {
                fail("attrs.hidden_size must be null or an integer from 1 to " + std::to_string(HIDDEN_SIZE_MAX) +
                     ", got " + describe(hidden));
            }
            out.hiddenSize = hidden.integer;
        }
        out.direction = *parseDirection(oneString(a, "direction", DIRECTION_NAMES, "attrs."));
        const json::Value& layout = *a.find("layout");
        if (layout.type != json::Type::Integer || (layout.integer != 0 && layout.integer != 1)) {
            fail("attrs.layout must be 0 or 1, got " + describe(layout));
        }
        out.layout = layout.integer;

        const json::Value& names = *a.find("activations");
        if (names.type != json::Type::Null) {
            if (names.type != json::Type::Array) {
                fail("attrs.activations must be null or a list of names, got " + describe(names));
            }
            std::vector<std::string> list;
            for (size_t i = 0; i < names.items.size(); ++i) {
                const json::Value& n = names.items[i];
                if (n.type != json::Type::String) {
                    fail("attrs.activations[" + std::to_string(i) + "] must be a string, got " + describe(n));
                }
                list.push_back(n.string);
            }
            out.activations = std::move(list);
        }
        out.activationAlpha = parameters(a, "activation_alpha");
        out.activationBeta = parameters(a, "activation_beta");

        const json::Value& clip = *a.find("clip");
        if (clip.type != json::Type::Null) {
            double d = finite32(clip, "attrs.clip");
            if (!(d > 0.0) || static_cast<float>(d) == 0.0f) {
                fail("attrs.clip must be null or a positive number (positive as a float32), got " + describe(clip));
            }
            out.clip = d;
        }

        out.inputForget = flag(a, "input_forget");
        if (out.inputForget && !cell.inputForget) {
            fail("attrs.input_forget is only defined for LSTM, got 1 on " + std::string(cell.name));
        }
        out.linearBeforeReset = flag(a, "linear_before_reset");
        if (out.linearBeforeReset && !cell.linearBeforeReset) {
            fail("attrs.linear_before_reset is only defined for GRU, got 1 on " + std::string(cell.name));
        }

        try {
            resolveActivations(cell, out.directions(), out.activations, out.activationAlpha, out.activationBeta);
        } catch (const std::invalid_argument& e) {
            fail(e.what());
        }
    }

    // absent (outputs = false): distinct optional inputs of the cell, any order; outputs:
    // distinct outputs of the cell in ONNX's order, at least one.
    std::vector<std::string> nameList(const json::Value& v, const char* key, const Cell& cell, bool outputs) const
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
        if (v.type != json::Type::Array) {
            fail(std::string(key) + " must be a list of names, got " + describe(v));
        }
        if (outputs && v.items.empty()) {
            fail("outputs must name at least one output of " + std::string(cell.name) + " (" + allowed + ")");
        }
        std::vector<std::string> out;
        int64_t last = -1;
        for (size_t i = 0; i < v.items.size(); ++i) {
            const json::Value& item = v.items[i];
            std::string where = std::string(key) + "[" + std::to_string(i) + "]";
            int64_t index = -1;
            if (item.type == json::Type::String) {
                if (outputs) {
                    for (uint32_t k = 0; k < cell.outputCount; ++k) {
                        if (cell.outputs[k] == item.string) {
                            index = k;
                        }
                    }
                } else {
                    for (uint32_t k = 3; k < cell.inputCount; ++k) {
                        if (cell.inputs[k] == item.string) {
                            index = k;
                        }
                    }
                }
            }
            if (index < 0) {
                fail(where + " must be " + (outputs ? "an output" : "an optional input") + " of " +
                     std::string(cell.name) + " (" + allowed + "), got " + describe(item));
            }
            if (std::find(out.begin(), out.end(), item.string) != out.end()) {
                fail(where + " repeats " + quoted(item.string));
            }
            if (outputs && index < last) {
                fail("outputs must be in ONNX's order (" + allowed + "), got " + quoted(item.string) + " after " +
                     quoted(out.back()));
            }
            last = index;
            out.push_back(item.string);
        }
        return out;
    }

    static bool isUuid(std::string_view s)
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

    std::string_view text_;
    std::optional<std::string> name_;
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
decodeNodeConfig(std::string_view text)
{
    return Decoder(text).run();
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
