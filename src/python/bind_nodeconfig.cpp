// The node-config decoder (src/core/config/nodeconfig.hpp) for Python: the one decoder the custom-op
// library uses, for ortops.ort.nodeconfig (NodeConfig.from_json):
//   decode_node_config(data: bytes | bytearray | str) -> dict
// and, in the testing build only (ORTOPS_TESTING; tests/test_node_config_decoder.py drives the
// C++ decoder and compares it with ortops.activations):
//   encode_node_config(config: dict) -> str        (checked by decoding it first)
//   resolve_activations(op, num_directions, activations=None, activation_alpha=None,
//                       activation_beta=None) -> list[list[tuple[str, float, float]]]
// Every refusal is a ValueError carrying the C++ message.
#include <pybind11/pybind11.h>

#include <cmath>
#include <string>
#include <string_view>

#include "config/activations.hpp"
#include "config/json.hpp"
#include "config/nodeconfig.hpp"

namespace py = pybind11;

namespace {

constexpr const char* PREFIX = "ortops node config: ";

// The bytes of a config given as bytes, bytearray or str (UTF-8); a str that cannot be UTF-8
// (a lone surrogate) is a ValueError like any other malformed config.
std::string
configBytes(const py::handle& data)
{
    if (PyBytes_Check(data.ptr())) {
        char* p = nullptr;
        Py_ssize_t n = 0;
        if (PyBytes_AsStringAndSize(data.ptr(), &p, &n) != 0) {
            throw py::error_already_set();
        }
        return std::string(p, static_cast<size_t>(n));
    }
    if (PyByteArray_Check(data.ptr())) {
        return std::string(PyByteArray_AsString(data.ptr()), static_cast<size_t>(PyByteArray_Size(data.ptr())));
    }
    if (PyUnicode_Check(data.ptr())) {
        Py_ssize_t n = 0;
        const char* p = PyUnicode_AsUTF8AndSize(data.ptr(), &n);
        if (!p) {
            PyErr_Clear();
            throw py::value_error(std::string(PREFIX) +
                                  "not valid JSON: invalid UTF-8 (the str holds a lone UTF-16 surrogate)");
        }
        return std::string(p, static_cast<size_t>(n));
    }
    throw py::type_error(std::string("decode_node_config: data must be bytes or str, got ") +
                         Py_TYPE(data.ptr())->tp_name);
}

py::object
optionalStrings(const std::optional<std::vector<std::string>>& v)
{
    if (!v) {
        return py::none();
    }
    py::list out;
    for (const auto& s : *v) {
        out.append(py::str(s.data(), s.size()));
    }
    return std::move(out);
}

py::list
strings(const std::vector<std::string>& v)
{
    py::list out;
    for (const auto& s : v) {
        out.append(py::str(s.data(), s.size()));
    }
    return out;
}

py::object
optionalNumbers(const std::optional<std::vector<double>>& v)
{
    if (!v) {
        return py::none();
    }
    py::list out;
    for (double d : *v) {
        out.append(py::float_(d));
    }
    return std::move(out);
}

py::dict
toDict(const ortops::NodeConfig& c)
{
    const ortops::NodeAttrs& a = c.attrs;
    py::dict attrs;
    attrs["hidden_size"] = a.hiddenSize ? py::object(py::int_(*a.hiddenSize)) : py::object(py::none());
    attrs["direction"] = py::str(ortops::directionName(a.direction));
    attrs["layout"] = py::int_(a.layout);
    attrs["activations"] = optionalStrings(a.activations);
    attrs["activation_alpha"] = optionalNumbers(a.activationAlpha);
    attrs["activation_beta"] = optionalNumbers(a.activationBeta);
    attrs["clip"] = a.clip ? py::object(py::float_(*a.clip)) : py::object(py::none());
    attrs["input_forget"] = py::int_(a.inputForget);
    attrs["linear_before_reset"] = py::int_(a.linearBeforeReset);
    py::dict d;
    d["v"] = py::int_(c.version);
    d["node"] = py::str(c.node.data(), c.node.size());
    d["op"] = py::str(std::string(c.cell->name));
    d["dtype"] = py::str(ortops::elementTypeName(c.dtype));
    d["attrs"] = attrs;
    d["absent"] = strings(c.absent);
    d["outputs"] = strings(c.outputs);
    d["device"] = c.device ? py::object(py::str(*c.device)) : py::object(py::none());
    d["mode"] = py::str(ortops::modeName(c.mode));
    return d;
}

} // namespace

namespace ortops {

void
bindNodeConfig(py::module_& m)
{
    m.attr("NODE_CONFIG_VERSION") = ortops::NODE_CONFIG_VERSION;
    m.attr("NODE_CONFIG_MAX_BYTES") = ortops::NODE_CONFIG_MAX_BYTES;

    m.def(
      "decode_node_config",
      [](const py::object& data) {
          std::string bytes = configBytes(data);
          try {
              return toDict(ortops::decodeNodeConfig(bytes));
          } catch (const ortops::ConfigError& e) {
              throw py::value_error(e.what());
          }
      },
      py::arg("data"),
      "Decode a custom node's config attribute (bytes or str) strictly as the native library does: "
      "a dict, or ValueError saying what is wrong.");
}

} // namespace ortops

#ifdef ORTOPS_TESTING
// ---------------------------------------------------------------- the testing build's part

namespace {

// A Python value (what json.dumps takes: dict with str keys, list, tuple, str, int, float,
// bool, None) as a JSON value; anything else, or nesting deeper than the decoder's limit, is a
// ValueError.
ortops::json::Value
toJson(const py::handle& o, int depth)
{
    using ortops::json::Value;
    if (depth > ortops::json::DEFAULT_MAX_DEPTH) {
        throw py::value_error(std::string(PREFIX) + "the config is nested too deeply");
    }
    if (o.is_none()) {
        return Value::null();
    }
    if (PyBool_Check(o.ptr())) {
        return Value::fromBool(o.ptr() == Py_True);
    }
    if (PyLong_Check(o.ptr())) {
        int overflow = 0;
        long long v = PyLong_AsLongLongAndOverflow(o.ptr(), &overflow);
        if (overflow || (v == -1 && PyErr_Occurred())) {
            PyErr_Clear();
            throw py::value_error(std::string(PREFIX) + "an integer outside int64: " + std::string(py::repr(o)));
        }
        return Value::fromInteger(static_cast<int64_t>(v));
    }
    if (PyFloat_Check(o.ptr())) {
        double d = PyFloat_AsDouble(o.ptr());
        if (!std::isfinite(d)) {
            throw py::value_error(std::string(PREFIX) + "JSON has no NaN or infinity, got " +
                                  std::string(py::repr(o)));
        }
        return Value::fromNumber(d);
    }
    if (PyUnicode_Check(o.ptr())) {
        Py_ssize_t n = 0;
        const char* p = PyUnicode_AsUTF8AndSize(o.ptr(), &n);
        if (!p) {
            PyErr_Clear();
            throw py::value_error(std::string(PREFIX) + "a string holds a lone UTF-16 surrogate");
        }
        return Value::fromString(std::string(p, static_cast<size_t>(n)));
    }
    if (PyList_Check(o.ptr()) || PyTuple_Check(o.ptr())) {
        std::vector<Value> items;
        for (const py::handle& item : o) {
            items.push_back(toJson(item, depth + 1));
        }
        return Value::array(std::move(items));
    }
    if (PyDict_Check(o.ptr())) {
        std::vector<std::pair<std::string, Value>> members;
        for (const auto& [k, v] : py::reinterpret_borrow<py::dict>(o)) {
            if (!PyUnicode_Check(k.ptr())) {
                throw py::value_error(std::string(PREFIX) + "a key is not a str: " + std::string(py::repr(k)));
            }
            members.emplace_back(toJson(k, depth + 1).string, toJson(v, depth + 1));
        }
        return Value::object(std::move(members));
    }
    throw py::value_error(std::string(PREFIX) + "a value JSON cannot hold: " + std::string(py::repr(o)));
}

std::optional<std::vector<double>>
floats(const std::string& op, const char* argument, const py::object& values)
{
    if (values.is_none()) {
        return std::nullopt;
    }
    auto bad = [&]() {
        return py::value_error(op + ": " + argument + " must be a list of numbers, got " +
                               std::string(py::repr(values)));
    };
    if (PyUnicode_Check(values.ptr()) || PyBytes_Check(values.ptr())) {
        throw bad();
    }
    std::vector<double> out;
    try {
        for (const py::handle& v : values) {
            PyObject* f = PyNumber_Float(v.ptr());
            if (!f) {
                PyErr_Clear();
                throw bad();
            }
            out.push_back(PyFloat_AsDouble(f));
            Py_DECREF(f);
        }
    } catch (const py::error_already_set&) {
        throw bad();
    }
    return out;
}

// The activation names as given: one str, or an iterable of str.
std::optional<std::vector<std::string>>
names(const std::string& op, const py::object& activations)
{
    if (activations.is_none()) {
        return std::nullopt;
    }
    std::vector<std::string> out;
    if (PyUnicode_Check(activations.ptr())) {
        out.push_back(activations.cast<std::string>());
        return out;
    }
    for (const py::handle& n : activations) {
        if (!PyUnicode_Check(n.ptr())) {
            throw py::value_error(op + ": activations[" + std::to_string(out.size()) + "] must be a str, got " +
                                  std::string(py::repr(n)));
        }
        out.push_back(n.cast<std::string>());
    }
    return out;
}

py::list
resolve(const std::string& op, int64_t numDirections, const py::object& activations, const py::object& alpha,
        const py::object& beta)
{
    const ortops::Cell* cell = ortops::findCell(op);
    if (!cell) {
        throw py::value_error("unknown op " + std::string(py::repr(py::str(op))) + " (LSTM, GRU or RNN)");
    }
    if (numDirections != 1 && numDirections != 2) {
        throw py::value_error(op + ": num_directions must be 1 or 2, got " + std::to_string(numDirections));
    }
    auto given = names(op, activations);
    auto a = floats(op, "activation_alpha", alpha);
    auto b = floats(op, "activation_beta", beta);
    std::vector<std::vector<ortops::Activation>> resolved;
    try {
        resolved = ortops::resolveActivations(*cell, static_cast<uint32_t>(numDirections), given, a, b);
    } catch (const std::invalid_argument& e) {
        throw py::value_error(e.what());
    }
    py::list out;
    for (const auto& direction : resolved) {
        py::list d;
        for (const auto& act : direction) {
            d.append(py::make_tuple(std::string(ortops::ACTIVATIONS[act.code].name), static_cast<double>(act.alpha),
                                    static_cast<double>(act.beta)));
        }
        out.append(d);
    }
    return out;
}

std::string
encode(const py::object& config)
{
    ortops::json::Value value = toJson(config, 0);
    std::string text;
    try {
        text = ortops::json::write(value);
    } catch (const std::invalid_argument& e) {
        throw py::value_error(std::string(PREFIX) + e.what());
    }
    try {
        return ortops::encodeNodeConfig(ortops::decodeNodeConfig(text));
    } catch (const ortops::ConfigError& e) {
        throw py::value_error(e.what());
    }
}

} // namespace

namespace ortops {

void
bindNodeConfigTesting(py::module_& m)
{
    m.def("encode_node_config", &encode, py::arg("config"),
          "Test hook: the canonical config text of a config dict (as decode_node_config returns), checked "
          "as the decoder checks it: what json.dumps(config, sort_keys=True, separators=(',', ':'), "
          "allow_nan=False) writes.");
    m.def("resolve_activations", &resolve, py::arg("op"), py::arg("num_directions"),
          py::arg("activations") = py::none(), py::arg("activation_alpha") = py::none(),
          py::arg("activation_beta") = py::none(),
          "Test hook: the C++ resolveActivations: per direction, (name, alpha, beta) per slot; ValueError "
          "as ortops.activations.resolve_activations words it.");
}

} // namespace ortops
#endif // ORTOPS_TESTING
