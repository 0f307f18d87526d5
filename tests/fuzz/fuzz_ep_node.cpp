// libFuzzer target for the EP's node reader (src/ep/node.cpp) past ONNX Runtime's graph API:
// the checks of src/ep/node_check.hpp, run on fuzzed nodes in the order readNode and the EP's
// GetCapability (src/ep/ep.cpp, takes) run them on what ORT gives. Built by scripts/ci/fuzz.sh
// with -fsanitize=fuzzer,address,undefined; tests/fuzz/replay.cpp --ep replays the corpus
// without libFuzzer. The bytes decode (Reader below; tests/fuzz/make_corpus.py writes the seeds
// from the recurrent nodes of tests/models/*.onnx in the same layout) into what ORT would hand
// over: op type and name, opset version, input and output counts (any: missing and extra
// ones), per input its presence, name, ONNX element type and dims, per output its presence,
// the attributes as (name, ORT attribute type, value: an int64, a float incl. NaN and Inf, or
// bytes: strings, NUL-separated string lists, float lists of any length), the EP's mode and
// the device's storage-binding limit. For any bytes:
//   - the node is taken (a config the core decoded and checked), or refused with the EP's
//     typed errors (ort::NodeError, the core's ConfigError, InputError,
//     UnsupportedLayerError), the message GetCapability logs naming the node; anything else
//     escaping (another exception type), a crash, a leak or undefined behaviour is a finding;
//   - a taken node's config is the node's (op, dtype, outputs, absent inputs, mode) and encodes
//     to text that the core's decoder (the custom-op door's) accepts and encodes to the same text.
// DynamicQuantizeLSTM's int8 weights and quantization parameters are read through ORT
// (readQuantized, dequantize): not here; its W and R shapes are taken as given.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <string>
#include <vector>

#include "core/base/errors.hpp"
#include "core/config/nodeconfig.hpp"
#include "ep/node_check.hpp"

namespace {

using namespace ortops;
using ortops::ep::NodeSpec;

[[noreturn]] void
finding(const char* what, const std::string& detail)
{
    std::fprintf(stderr, "fuzz_ep_node: %s\n%s\n", what, detail.c_str());
    std::abort();
}

// Little-endian fields; past the end every field reads as zero or empty.
struct Reader
{
    const uint8_t* data;
    size_t size;

    uint64_t bytes(size_t n)
    {
        uint64_t v = 0;
        for (size_t k = 0; k < n && size > 0; ++k, ++data, --size) {
            v |= static_cast<uint64_t>(*data) << (8 * k);
        }
        return v;
    }
    uint8_t u8() { return static_cast<uint8_t>(bytes(1)); }
    int32_t i32() { return static_cast<int32_t>(static_cast<uint32_t>(bytes(4))); }
    int64_t i64() { return static_cast<int64_t>(bytes(8)); }
    float f32()
    {
        auto u = static_cast<uint32_t>(bytes(4));
        float f;
        std::memcpy(&f, &u, sizeof f);
        return f;
    }
    std::string str()    // u16 length, then the bytes
    {
        size_t n = static_cast<size_t>(bytes(2));
        n = n < size ? n : size;
        std::string s(reinterpret_cast<const char*>(data), n);
        data += n;
        size -= n;
        return s;
    }
};

struct Attr
{
    std::string name;
    int type;
    ep::AttrValue value;
};

// What ORT hands over for one node, decoded from the bytes.
struct FuzzNode
{
    std::string op, name, mode;
    int version = 0;
    size_t inputs = 0, outputs = 0;
    struct Input { bool present, named; int element; std::optional<std::vector<int64_t>> dims; };
    std::vector<Input> in;
    std::vector<bool> out;
    std::vector<Attr> attrs;
    ep::DeviceLimits device;
};

FuzzNode
decode(Reader r)
{
    static const char* const modes[] = { "deterministic", "exact", "fast" };
    FuzzNode n;
    n.op = r.str();
    n.name = r.str();
    n.version = r.i32();
    n.inputs = r.u8();
    n.outputs = r.u8();
    for (size_t i = 0; i < n.inputs && i < 12; ++i) {
        uint8_t flags = r.u8();
        FuzzNode::Input input{ (flags & 1) == 0, (flags & 2) == 0, r.i32(), std::nullopt };
        uint8_t rank = r.u8();
        if (rank != 0xFF) {
            n.in.emplace_back(input);
            n.in.back().dims.emplace();
            for (uint8_t d = 0; d < rank && d < 8; ++d) {
                n.in.back().dims->push_back(r.i64());
            }
            continue;
        }
        n.in.push_back(input);
    }
    for (size_t i = 0; i < n.outputs && i < 3; ++i) {
        n.out.push_back(r.u8() == 0);
    }
    uint8_t attrs = r.u8();
    for (uint8_t k = 0; k < attrs && k < 16; ++k) {
        Attr a{ r.str(), r.u8(), {} };
        if (a.type == ep::ATTR_INT) {
            a.value.integer = r.i64();
        } else if (a.type == ep::ATTR_FLOAT) {
            a.value.real = r.f32();
        } else {
            a.value.bytes = r.str();
        }
        n.attrs.push_back(std::move(a));
    }
    n.mode = modes[r.u8() % 3];    // CreateEp admits these three only (factory.cpp, readOptions)
    n.device.maxStorageBufferRange = static_cast<uint32_t>(r.bytes(4));
    n.device.name = "fuzz device";
    n.device.uuid = r.u8() ? "0123abcd-4567-89ef-0a1b-2c3d4e5f6a7b" : "";
    return n;
}

// readNode's reads, then GetCapability's (takes), on the decoded node.
NodeConfig
take(const FuzzNode& n, NodeSpec& spec, std::vector<std::string>& outputs)
{
    spec.name = n.name;
    spec.opType = n.op;
    ep::setCell(spec);
    ep::checkVersion(spec, n.version);
    ep::checkCounts(spec, n.inputs, n.outputs);
    for (size_t i = 0; i < n.out.size(); ++i) {
        spec.outputs[i] = n.out[i] ? "out" + std::to_string(i) : "";
    }
    for (size_t i = 0; i < n.in.size() && i < spec.cell->inputCount; ++i) {
        if (!n.in[i].present || !n.in[i].named) {
            continue;    // a null value info, or an empty name: the input is absent
        }
        spec.inputs[i] = "in" + std::to_string(i);
        const auto& dims = n.in[i].dims;
        bool known = dims && std::all_of(dims->begin(), dims->end(), [](int64_t d) { return d >= 0; });
        spec.shapes[i] = known ? dims : std::nullopt;
        spec.dims[i] = dims ? *dims : std::vector<int64_t>{};
        ep::checkElement(spec, i, n.in[i].element);
    }
    if (spec.quantized && spec.dtype != ElementType::Float32) {    // readQuantized's first check
        throw ort::NodeError("DynamicQuantizeLSTM: X must be float32");
    }
    ep::checkRequired(spec);
    ep::RawAttrs raw;
    for (const Attr& a : n.attrs) {
        ep::checkAttr(*spec.cell, a.name, a.type);
        ep::setAttr(raw, a.name, a.value);
    }
    spec.attrsJson = ep::attrsJson(raw, *spec.cell);
    outputs = ep::namedOutputs(spec);
    if (outputs.empty()) {
        throw ort::NodeError("the node names no output");
    }
    return ep::checkedConfig(spec, outputs, n.mode, n.device);
}

void
checkTaken(const FuzzNode& n, const NodeSpec& spec, const std::vector<std::string>& outputs, const NodeConfig& config)
{
    if (config.cell != spec.cell || config.outputs != outputs || config.dtype != spec.dtype ||
        config.mode != parseMode(n.mode)) {
        finding("a taken node's config is not the node's", encodeNodeConfig(config));
    }
    for (uint32_t i = ort::IN_B; i < spec.cell->inputCount; ++i) {
        if (config.isAbsent(std::string(spec.cell->inputs[i])) != spec.inputs[i].empty()) {
            finding("a taken node's config has other inputs absent", encodeNodeConfig(config));
        }
    }
    std::string once = encodeNodeConfig(config);
    try {
        std::string twice = encodeNodeConfig(decodeNodeConfig(once));
        if (once != twice) {
            finding("encode -> decode -> encode changed a taken node's config", once + "\n" + twice);
        }
    } catch (const ConfigError& e) {
        finding("the custom-op door's decoder refuses a config the EP took", once + "\n" + e.what());
    }
}

// FUZZ_EP_NODE_VERBOSE=1: each input's outcome on stderr (to see what a seed exercises).
bool
verbose()
{
    static const bool on = std::getenv("FUZZ_EP_NODE_VERBOSE") != nullptr;
    return on;
}

// The message GetCapability logs for a refused node (ep.cpp, takes) names it and says why.
void
refused(const std::string& prefix, const char* what)
{
    if (what == nullptr || *what == '\0') {
        finding("a refusal without a reason", prefix);
    }
    if (verbose()) {
        std::fprintf(stderr, "%sleft to the next execution provider: %s\n", prefix.c_str(), what);
    }
}

} // namespace

extern "C" int
LLVMFuzzerTestOneInput(const uint8_t* data, size_t size)
{
    FuzzNode n = decode(Reader{ data, size });
    NodeSpec spec;
    std::vector<std::string> outputs;
    std::string prefix = ep::prefixFor(n.op, n.name);
    NodeConfig config;
    try {
        config = take(n, spec, outputs);
    } catch (const ort::NodeError& e) {
        refused(prefix, e.what());
        return 0;
    } catch (const ConfigError& e) {
        refused(prefix, e.what());
        return 0;
    } catch (const InputError& e) {
        refused(prefix, e.what());
        return 0;
    } catch (const UnsupportedLayerError& e) {
        refused(prefix, e.what());
        return 0;
    }
    checkTaken(n, spec, outputs, config);
    if (verbose()) {
        std::fprintf(stderr, "%staken\n", prefix.c_str());
    }
    return 0;
}
