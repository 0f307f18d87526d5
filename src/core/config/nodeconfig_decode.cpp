// decodeNodeConfig (nodeconfig.hpp holds the v4 format): a config's bytes read strictly as
// one JSON object (json.hpp's strict reader) with exactly the keys of v4 at both levels, each
// of the JSON type the format gives it, into a NodeConfigDraft; then validateNodeConfig
// (nodeconfig.cpp), the rules a door's typed reading of a node runs too. A value of the wrong
// JSON type gets the message its rule gives (nodeconfig_text.hpp). Every message starts
// "ortops node config: " and, once the node's name has been read, names the node.
#include <algorithm>

#include "config/json.hpp"
#include "config/nodeconfig.hpp"
#include "config/nodeconfig_text.hpp"

namespace ortops {

namespace {

using namespace configtext;

constexpr std::string_view TOP_KEYS[] = { "absent", "attrs", "device", "dtype", "mode", "node", "op", "outputs", "v" };
constexpr std::string_view ATTR_KEYS[] = { "activation_alpha", "activation_beta", "activations", "clip", "direction",
                                           "hidden_size", "input_forget", "layout", "linear_before_reset" };

// A value as a message shows it: scalars by their text, strings quoted and cut.
std::string
describe(const json::Value& v)
{
    switch (v.type) {
        case json::Type::Null: return "null";
        case json::Type::Bool: return v.boolean ? "true" : "false";
        case json::Type::Integer: return describeInteger(v.integer);
        case json::Type::Number: return describeNumber(v.number);
        case json::Type::String: return describeText(v.string);
        case json::Type::Array: return describeList(v.items.size());
        case json::Type::Object: return "an object";
    }
    return "?";
}

template<size_t N>
std::vector<std::string_view>
listOf(const std::string_view (&names)[N])
{
    return std::vector<std::string_view>(std::begin(names), std::end(names));
}

class Decoder
{
  public:
    explicit Decoder(std::string_view text)
      : text_(text)
    {
    }

    NodeConfigDraft run()
    {
        json::Value root = parse();
        NodeConfigDraft d;
        d.node = root.find("node")->string;
        d.op = text(root, "op");
        d.dtype = text(root, "dtype");
        attrs(*root.find("attrs"), d.attrs);
        const Cell* cell = findCell(d.op);
        names(*root.find("absent"), "absent", cell, false, d.op, d.absent);
        names(*root.find("outputs"), "outputs", cell, true, d.op, d.outputs);
        const json::Value& device = *root.find("device");
        if (device.type != json::Type::Null) {
            d.device = text(root, "device");
        }
        d.mode = text(root, "mode");
        return d;
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

    // The root object, its version and keys checked, the node's name read.
    json::Value parse()
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
        exactKeys(root, TOP_KEYS, "the config");
        if (node->type != json::Type::String) {
            fail("node must be a string, got " + describe(*node));
        }
        return root;
    }

    template<size_t N>
    void exactKeys(const json::Value& object, const std::string_view (&keys)[N], const std::string& where) const
    {
        for (const auto& [key, value] : object.members) {
            if (std::find(std::begin(keys), std::end(keys), key) == std::end(keys)) {
                fail(where + " has the unknown key " + quoted(key, 40) + " (its keys are exactly " +
                     choices(listOf(keys), " and ") + ")");
            }
        }
        for (std::string_view key : keys) {
            if (!object.find(key)) {
                fail(where + " lacks the key '" + std::string(key) + "'");
            }
        }
    }

    // A key whose value is a string (its rule's message otherwise).
    std::string text(const json::Value& object, const char* key, const char* prefix = "") const
    {
        const json::Value& v = *object.find(key);
        if (v.type != json::Type::String) {
            fail(mustBe(std::string(prefix) + key) + ", got " + describe(v));
        }
        return v.string;
    }

    int64_t integer(const json::Value& attrs, const char* key) const
    {
        const json::Value& v = *attrs.find(key);
        if (v.type != json::Type::Integer) {
            fail(mustBe(std::string("attrs.") + key) + ", got " + describe(v));
        }
        return v.integer;
    }

    double number(const json::Value& v, const std::string& what) const
    {
        if (!v.isNumeric()) {
            fail(what + " must be a number, got " + describe(v));
        }
        return v.number;
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
        std::vector<double> out;
        for (size_t i = 0; i < v.items.size(); ++i) {
            out.push_back(number(v.items[i], what + "[" + std::to_string(i) + "]"));
        }
        return out;
    }

    void attrs(const json::Value& a, NodeConfigDraft::Attrs& out) const
    {
        if (a.type != json::Type::Object) {
            fail("attrs must be an object, got " + describe(a));
        }
        exactKeys(a, ATTR_KEYS, "attrs");
        if (a.find("hidden_size")->type != json::Type::Null) {
            out.hiddenSize = integer(a, "hidden_size");
        }
        out.direction = text(a, "direction", "attrs.");
        out.layout = integer(a, "layout");
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
            out.clip = number(clip, "attrs.clip");
        }
        out.inputForget = integer(a, "input_forget");
        out.linearBeforeReset = integer(a, "linear_before_reset");
    }

    // absent / outputs: a list of strings (an item of another type gets the rule's message,
    // which names the op's names: an op the rules refuse is reported first).
    void names(const json::Value& v, const char* key, const Cell* cell, bool outputs, const std::string& op,
               std::vector<std::string>& out) const
    {
        if (v.type != json::Type::Array) {
            fail(std::string(key) + " must be a list of names, got " + describe(v));
        }
        for (size_t i = 0; i < v.items.size(); ++i) {
            const json::Value& item = v.items[i];
            if (item.type == json::Type::String) {
                out.push_back(item.string);
                continue;
            }
            if (cell == nullptr) {
                fail(mustBe("op") + ", got " + describeText(op));
            }
            fail(nameItemMessage(*cell, key, i, outputs, describe(item)));
        }
    }

    std::string_view text_;
    std::optional<std::string> name_;
};

} // namespace

NodeConfig
decodeNodeConfig(std::string_view text)
{
    return validateNodeConfig(Decoder(text).run());
}

} // namespace ortops
