// libFuzzer target for the core's node checker (src/core/placement/node_check.hpp), which the
// EP runs on what ONNX Runtime's graph API gives it (src/ep/read.cpp builds the description) and
// ortops.convert on what onnx gives it. Built by scripts/ci/fuzz.sh with
// -fsanitize=fuzzer,address,undefined; tests/fuzz/replay.cpp --ep replays the corpus without
// libFuzzer. The bytes decode (Reader below; tests/fuzz/make_ep_corpus.py writes the seeds from
// the recurrent nodes of tests/models/*.onnx in the same layout) into a NodeDescription: op
// type, domain, name, operator version, inputs (any count) each with its presence, ONNX element
// type, dims and constness (a constant's elements follow when it is at most 64 KiB: the
// checker reads a quantized node's scales and zero points), outputs, the attributes with their
// ONNX attribute types and values (an int64, a float incl. NaN and Inf, a string, lists of any
// length); then the mode and the device (name, UUID or none, storage-binding limit, NaN
// preservation). For any bytes:
//   - the node is taken (a config the core validated and checked) or refused with a reason;
//     anything escaping checkNode, a crash, a leak or undefined behaviour is a finding;
//   - a taken node's config is the node's (op, dtype, outputs, absent inputs, mode) and encodes
//     to text that the core's decoder (the custom-op door's) accepts and encodes to the same text.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "core/config/nodeconfig.hpp"
#include "core/placement/node_check.hpp"

namespace {

using namespace ortops;

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
    std::string raw(size_t n)    // n bytes, zeros past the end
    {
        std::string s(n, '\0');
        size_t have = n < size ? n : size;
        std::memcpy(s.data(), data, have);
        data += have;
        size -= have;
        return s;
    }
    std::string str() { return raw(static_cast<size_t>(bytes(2))); }    // u16 length, then the bytes
};

template<typename T>
std::vector<T>
elements(const std::string& bytes)
{
    std::vector<T> out(bytes.size() / sizeof(T));
    if (!out.empty()) {
        std::memcpy(out.data(), bytes.data(), out.size() * sizeof(T));
    }
    return out;
}

size_t
elementBytes(int element)
{
    switch (element) {
        case onnx::UINT8: case onnx::INT8: case onnx::BOOL: return 1;
        case onnx::UINT16: case onnx::INT16: case onnx::FLOAT16: case onnx::BFLOAT16: return 2;
        case onnx::FLOAT: case onnx::INT32: case onnx::UINT32: return 4;
        default: return 8;
    }
}

// The description, and the constants' elements it points into (kept alive with it).
struct FuzzNode
{
    NodeDescription node;
    NodeQuestion question;
    std::vector<std::string> storage;
};

void
readInput(Reader& r, FuzzNode& n, NodeInput& in, size_t i)
{
    uint8_t flags = r.u8();
    in.element = r.i32();
    uint8_t rank = r.u8();
    if (rank != 0xFF) {
        in.dims.emplace();
        for (uint8_t d = 0; d < rank && d < 8; ++d) {
            in.dims->push_back(r.i64());
        }
    }
    in.name = (flags & 3) == 0 ? "in" + std::to_string(i) : "";    // bit 0: a null value info, 1: no name
    in.constant = (flags & 4) != 0;
    std::optional<std::vector<int64_t>> shape = in.shape();
    if (in.present() && in.constant && shape) {
        constexpr uint64_t LIMIT = uint64_t(1) << 16;
        uint64_t count = 1;
        for (int64_t d : *shape) {
            count = (d != 0 && count > LIMIT / static_cast<uint64_t>(d)) ? LIMIT + 1 : count * static_cast<uint64_t>(d);
        }
        uint64_t bytes = count * elementBytes(in.element);
        if (count <= LIMIT && bytes <= LIMIT) {
            n.storage.push_back(r.raw(static_cast<size_t>(bytes)));
            n.storage.back().reserve(1);    // a non-null data pointer for 0 bytes too
            in.data = n.storage.back().data();
        }
    }
}

NodeAttribute
readAttr(Reader& r)
{
    NodeAttribute a;
    a.name = r.str();
    a.type = r.u8();
    if (a.type == onnx::ATTR_INT) {
        a.i = r.i64();
    } else if (a.type == onnx::ATTR_FLOAT) {
        a.f = r.f32();
    } else if (a.type == onnx::ATTR_STRING) {
        a.s = r.str();
    } else if (a.type == onnx::ATTR_STRINGS) {
        std::string bytes = r.str();
        for (size_t start = 0; start < bytes.size();) {
            size_t end = std::min(bytes.find('\0', start), bytes.size());
            a.strings.push_back(bytes.substr(start, end - start));
            start = end + 1;
        }
    } else if (a.type == onnx::ATTR_FLOATS) {
        a.floats = elements<float>(r.str());
    } else if (a.type == onnx::ATTR_INTS) {
        a.ints = elements<int64_t>(r.str());
    } else {
        (void)r.str();
    }
    return a;
}

FuzzNode
decode(Reader r)
{
    FuzzNode n;
    n.storage.reserve(16);    // the constants' data pointers stay valid
    NodeDescription& d = n.node;
    d.opType = r.str();
    d.domain = r.str();
    d.name = r.str();
    d.sinceVersion = r.i32();
    size_t inputs = std::min<size_t>(r.u8(), 16), outputs = std::min<size_t>(r.u8(), 4);
    d.inputs.resize(inputs);
    for (size_t i = 0; i < inputs; ++i) {
        readInput(r, n, d.inputs[i], i);
    }
    for (size_t i = 0; i < outputs; ++i) {
        d.outputs.push_back(r.u8() == 0 ? "out" + std::to_string(i) : "");
    }
    for (uint8_t k = 0, count = r.u8(); k < count && k < 16; ++k) {
        d.attributes.push_back(readAttr(r));
    }
    n.question.mode = MODES[r.u8() % 3];
    DeviceFacts device{ "fuzz device", "", static_cast<uint32_t>(r.bytes(4)), true };
    uint8_t flags = r.u8();
    device.uuid = (flags & 1) ? "0123abcd-4567-89ef-0a1b-2c3d4e5f6a7b" : "";
    device.nanPreserveFloat32 = (flags & 2) == 0;
    if ((flags & 4) == 0) {
        n.question.device = device;
    } else {
        n.question.noDevice = "no Vulkan device (fuzzed)";
    }
    return n;
}

void
checkTaken(const FuzzNode& n, const NodeVerdict& v)
{
    const NodeConfig& config = v.config;
    const NodeDescription& d = n.node;
    if (v.cell == nullptr || config.cell != v.cell || config.mode != n.question.mode || config.outputs.empty() ||
        elementTypeName(config.dtype) != v.dtype) {
        finding("a taken node's config is not the node's", encodeNodeConfig(config));
    }
    for (uint32_t i = 3; i < v.cell->inputCount; ++i) {
        bool absent = i >= d.inputs.size() || !d.inputs[i].present();
        if (config.isAbsent(std::string(v.cell->inputs[i])) != absent) {
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

} // namespace

extern "C" int
LLVMFuzzerTestOneInput(const uint8_t* data, size_t size)
{
    FuzzNode n = decode(Reader{ data, size });
    NodeVerdict v = checkNode(n.node, n.question);
    std::string prefix = nodePrefix(n.node.opType, n.node.name);
    if (v.reason.empty()) {
        finding(v.taken ? "a taken node without its device's name" : "a refusal without a reason", prefix);
    }
    if (v.taken) {
        checkTaken(n, v);
    }
    if (verbose()) {
        std::fprintf(stderr, "%s%s%s\n", prefix.c_str(), v.taken ? "taken: " : "left to the next execution provider: ",
                     v.reason.c_str());
    }
    return 0;
}
