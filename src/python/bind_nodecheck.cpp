// The core's node checker (src/core/placement/node_check.hpp) for Python: the question the EP
// asks in GetCapability, asked by ortops.convert and the placement report about a node the
// door read from onnx (ortops/ort/placement.py builds the description):
//   check_node(node: dict, mode, device=None, no_device="", write_device=True, computed=None,
//              placement="gpu", calibration=None, cost_problem="") -> dict
// the EP's recorded decisions (src/core/placement/decisions.hpp, under the EP option report_id):
//   node_decisions(report_id) -> list[dict];  forget_node_decisions(report_id)
// and DynamicQuantizeLSTM's one dequantization rule (src/core/config/quantized.hpp) on numpy arrays:
//   dequantize_lstm_weight(name, q, scale, zero_point) -> float32 array
// Texts the core took from a model (names, reasons quoting them) come back as str with any
// invalid UTF-8 escaped (backslashreplace), never as a UnicodeDecodeError.
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <optional>
#include <string>
#include <vector>

#include "base/errors.hpp"
#include "config/quantized.hpp"
#include "placement/decisions.hpp"
#include "placement/node_check.hpp"

namespace py = pybind11;

namespace ortops {

namespace {

py::str
text(const std::string& s)
{
    PyObject* o = PyUnicode_DecodeUTF8(s.data(), static_cast<Py_ssize_t>(s.size()), "backslashreplace");
    if (o == nullptr) {
        throw py::error_already_set();
    }
    return py::reinterpret_steal<py::str>(o);
}

// A str as its UTF-8 bytes, bytes as they are.
std::string
bytesOf(const py::handle& v)
{
    if (py::isinstance<py::bytes>(v)) {
        return v.cast<std::string>();
    }
    return py::str(v).cast<std::string>();
}

// The ONNX element type of a numpy dtype ("undefined" for one ONNX has no number for).
int
elementOf(const py::dtype& dt)
{
    static const std::pair<const char*, int> names[] = {
        { "float32", onnx::FLOAT },  { "uint8", onnx::UINT8 },    { "int8", onnx::INT8 },     { "uint16", onnx::UINT16 },
        { "int16", onnx::INT16 },    { "int32", onnx::INT32 },    { "int64", onnx::INT64 },   { "bool", onnx::BOOL },
        { "float16", onnx::FLOAT16 }, { "float64", onnx::DOUBLE }, { "uint32", onnx::UINT32 }, { "uint64", onnx::UINT64 },
    };
    std::string name = py::str(dt.attr("name"));
    for (const auto& [n, e] : names) {
        if (name == n) {
            return e;
        }
    }
    return onnx::UNDEFINED;
}

// A numpy array's elements, row-major in native order (a copy only where it is not already).
py::array
contiguous(const py::handle& a)
{
    py::module_ np = py::module_::import("numpy");
    py::array arr = np.attr("ascontiguousarray")(a);
    if (!py::bool_(arr.dtype().attr("isnative"))) {
        arr = arr.attr("astype")(arr.dtype().attr("newbyteorder")("="));
    }
    return arr;
}

NodeAttribute
attributeOf(const py::dict& d)
{
    NodeAttribute a;
    a.name = bytesOf(d["name"]);
    a.type = d["type"].cast<int>();
    py::object v = d["value"];
    switch (a.type) {
        case onnx::ATTR_INT: a.i = v.cast<int64_t>(); break;
        case onnx::ATTR_FLOAT: a.f = v.cast<float>(); break;
        case onnx::ATTR_STRING: a.s = bytesOf(v); break;
        case onnx::ATTR_INTS: a.ints = v.cast<std::vector<int64_t>>(); break;
        case onnx::ATTR_FLOATS: a.floats = v.cast<std::vector<float>>(); break;
        case onnx::ATTR_STRINGS:
            for (const py::handle& s : v) {
                a.strings.push_back(bytesOf(s));
            }
            break;
        default: break;    // a graph, a tensor: no value the checker reads
    }
    return a;
}

// The description of the dict ortops/ort/placement.py writes; `keep` holds the constants'
// arrays the description points into.
NodeDescription
descriptionOf(const py::dict& d, std::vector<py::array>& keep)
{
    NodeDescription n;
    n.name = bytesOf(d["name"]);
    n.opType = bytesOf(d["op_type"]);
    n.domain = bytesOf(d["domain"]);
    n.sinceVersion = d["since_version"].cast<int>();
    for (const py::handle& h : d["inputs"]) {
        py::dict in = py::reinterpret_borrow<py::dict>(h);
        NodeInput i;
        i.name = bytesOf(in["name"]);
        i.element = in["element"].cast<int>();
        if (!in["dims"].is_none()) {
            i.dims = in["dims"].cast<std::vector<int64_t>>();
        }
        i.constant = in["constant"].cast<bool>();
        if (in.contains("unsqueezed") && !in["unsqueezed"].is_none()) {
            i.unsqueezed = in["unsqueezed"].cast<std::vector<int64_t>>();
        }
        if (in.contains("data") && !in["data"].is_none()) {
            keep.push_back(contiguous(in["data"]));
            i.data = keep.back().data();
        }
        n.inputs.push_back(std::move(i));
    }
    for (const py::handle& o : d["outputs"]) {
        n.outputs.push_back(bytesOf(o));
    }
    for (const py::handle& a : d["attributes"]) {
        n.attributes.push_back(attributeOf(py::reinterpret_borrow<py::dict>(a)));
    }
    return n;
}

std::optional<DeviceFacts>
deviceOf(const py::object& d)
{
    if (d.is_none()) {
        return std::nullopt;
    }
    py::dict dict = d.cast<py::dict>();
    return DeviceFacts{ bytesOf(dict["name"]), bytesOf(dict["uuid"]), dict["max_storage_buffer_range"].cast<uint64_t>(),
                        dict["nan_preserve_float32"].cast<bool>() };
}

py::object
optionalInt(const std::optional<int64_t>& v)
{
    return v ? py::object(py::int_(*v)) : py::object(py::none());
}

py::dict
verdictDict(const NodeVerdict& v)
{
    py::dict out;
    out["taken"] = v.taken;
    out["reason"] = text(v.reason);
    out["dtype"] = v.dtype.empty() ? py::object(py::none()) : py::object(text(v.dtype));
    out["direction"] = text(v.direction);
    out["layout"] = v.layout;
    out["hidden_size"] = optionalInt(v.hiddenSize);
    out["weights"] = text(v.weights);
    out["constant"] = v.constantWeights;
    py::list outputs;
    for (const std::string& o : v.config.outputs) {
        outputs.append(text(o));
    }
    out["outputs"] = py::tuple(outputs);
    out["config"] = v.taken ? py::object(text(encodeNodeConfig(v.config))) : py::object(py::none());
    return out;
}

py::dict
checkNodeDict(const py::dict& node, const std::string& mode, const py::object& device, const std::string& noDevice,
              bool writeDevice, const std::optional<std::vector<std::string>>& computed, const std::string& placement,
              const py::object& calibration, const std::string& costProblem)
{
    std::vector<py::array> keep;
    NodeDescription d = descriptionOf(node, keep);
    NodeQuestion q;
    std::optional<Mode> m = parseMode(mode);
    if (!m) {
        throw py::value_error("check_node: mode must be 'deterministic', 'exact' or 'fast', got '" + mode + "'");
    }
    q.mode = *m;
    q.device = deviceOf(device);
    q.noDevice = noDevice;
    q.writeDevice = writeDevice;
    q.computed = computed;
    NodeVerdict v = checkNode(d, q);
    if (parsePlacement(placement, "check_node: placement") == Placement::Auto) {
        std::optional<Calibration> cal;
        if (!calibration.is_none()) {
            auto [dev, cpu] = calibration.cast<std::pair<std::array<double, 3>, std::array<double, 3>>>();
            cal = Calibration{ "", Side{ dev[0], dev[1], dev[2] }, Side{ cpu[0], cpu[1], cpu[2] } };
        }
        placeAuto(v, cal ? &*cal : nullptr, costProblem);
    }
    return verdictDict(v);
}

py::list
decisions(const std::string& reportId)
{
    py::list out;
    for (const NodeDecision& d : decisionsFor(reportId)) {
        py::dict e;
        e["name"] = text(d.name);
        e["op_type"] = text(d.opType);
        e["key"] = text(d.key);
        e["outputs_key"] = text(d.outputsKey);
        e["taken"] = d.taken;
        e["reason"] = text(d.reason);
        e["dtype"] = d.dtype.empty() ? py::object(py::none()) : py::object(text(d.dtype));
        e["direction"] = text(d.direction);
        e["layout"] = d.layout;
        e["hidden_size"] = optionalInt(d.hiddenSize);
        e["weights"] = text(d.weights);
        py::list outputs;
        for (const std::string& o : d.outputs) {
            outputs.append(text(o));
        }
        e["outputs"] = py::tuple(outputs);
        e["config"] = d.config.empty() ? py::object(py::none()) : py::object(text(d.config));
        out.append(e);
    }
    return out;
}

QuantTensor
quantTensor(const py::array& a)
{
    QuantTensor t;
    t.element = elementOf(a.dtype());
    for (py::ssize_t i = 0; i < a.ndim(); ++i) {
        t.shape.push_back(a.shape(i));
    }
    t.data = a.data();
    return t;
}

py::array
dequantize(const std::string& name, const py::handle& q, const py::handle& scale, const py::handle& zero)
{
    py::array qa = contiguous(q), sa = contiguous(scale), za = contiguous(zero);
    std::vector<int64_t> shape;
    std::vector<float> out = dequantizeWeight(name, quantTensor(qa), quantTensor(sa), quantTensor(za), shape);
    py::array_t<float> result(std::vector<py::ssize_t>(shape.begin(), shape.end()));
    std::copy(out.begin(), out.end(), result.mutable_data());
    return std::move(result);
}

} // namespace

void
bindNodeCheck(py::module_& m)
{
    m.def("check_node", &checkNodeDict, py::arg("node"), py::kw_only(), py::arg("mode"), py::arg("device") = py::none(),
          py::arg("no_device") = "", py::arg("write_device") = true, py::arg("computed") = py::none(),
          py::arg("placement") = "gpu", py::arg("calibration") = py::none(), py::arg("cost_problem") = "",
          "The core's verdict on a recurrent node (node_check.hpp), the EP's question: node is the description "
          "(name, op_type, domain, since_version, inputs [{name, element, dims, constant, data}], outputs, "
          "attributes [{name, type, value}]); device the facts (name, uuid, max_storage_buffer_range, "
          "nan_preserve_float32) or None with no_device saying why; placement 'auto' applies the calibration "
          "((device side), (cpu side)) or, without one, keeps the node saying cost_problem. Returns taken, "
          "reason, dtype, direction, layout, hidden_size, weights, constant, outputs and config (JSON).");
    m.def("node_decisions", &decisions, py::arg("report_id"),
          "The EP's decisions on the recurrent nodes of the session whose EP option report_id is report_id.");
    m.def("forget_node_decisions", &forgetDecisions, py::arg("report_id"),
          "Drop what report_id's session recorded (its report was read).");
    m.def("dequantize_lstm_weight", &dequantize, py::arg("name"), py::arg("q"), py::arg("scale"), py::arg("zero_point"),
          "A com.microsoft DynamicQuantizeLSTM weight ('W' or 'R', [dirs, cols, 4*hidden] int8/uint8) as ai.onnx "
          "LSTM's float32 [dirs, 4*hidden, cols] (config/quantized.hpp); ValueError naming the operator, the "
          "argument, what was expected and what came.");
}

} // namespace ortops
