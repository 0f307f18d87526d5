// The `config` attribute of an ortops custom node (domain "ortops", ops LSTM / GRU / RNN),
// decoded here only, strictly: a model is input from outside (downloaded, cached, copied,
// sometimes corrupted), so every config that is not exactly what ortops.convert writes is
// refused with a ConfigError naming what is wrong — invalid UTF-8, bad JSON, unknown, missing
// or duplicate keys, wrong types, values out of range. Nothing is silently ignored.
//
// Format, version 4 (written by ortops/ort/nodeconfig.py: sorted keys, no spaces, floats by
// Python's repr of the float64 value of the ONNX float32 attribute): one JSON object with
// exactly these keys
//   "v": 4
//   "node": string, the ONNX node's name (may be empty; at most 4096 bytes)
//   "op": "LSTM" | "GRU" | "RNN"
//   "dtype": "float32" | "float16"
//   "attrs": object with exactly the keys
//       "hidden_size": positive integer (at most 1 << 20) or null (taken from R)
//       "direction": "forward" | "reverse" | "bidirectional"
//       "layout": 0 | 1
//       "activations": null or a list of activation names the op accepts (activations.hpp:
//                      names, counts per op and direction)
//       "activation_alpha", "activation_beta": null or a list of at most 64 finite numbers
//       "clip": null or a positive finite number
//       "input_forget": 0 | 1 (only 0 unless op is LSTM)
//       "linear_before_reset": 0 | 1 (only 0 unless op is GRU)
//   "absent": list of distinct optional inputs of the op fed nothing (B, sequence_lens,
//             initial_h, initial_c, P as the op has them)
//   "outputs": non-empty list of distinct outputs of the op, in ONNX's order: those computed
//   "device": null or a Vulkan device UUID, 36 lower-case characters 8-4-4-4-12 hex
//   "mode": "deterministic" | "exact" | "fast"
#pragma once

#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "config/cells.hpp"
#include "config/types.hpp"

namespace ortops {

inline constexpr int NODE_CONFIG_VERSION = 4;
inline constexpr size_t NODE_CONFIG_MAX_BYTES = 64 * 1024;

struct ConfigError : std::invalid_argument
{
    using std::invalid_argument::invalid_argument;
};

struct NodeAttrs
{
    std::optional<int64_t> hiddenSize;
    Direction direction = Direction::Forward;
    int64_t layout = 0;
    std::optional<std::vector<std::string>> activations;
    std::optional<std::vector<double>> activationAlpha;
    std::optional<std::vector<double>> activationBeta;
    std::optional<double> clip;
    int64_t inputForget = 0;
    int64_t linearBeforeReset = 0;

    uint32_t directions() const { return directionCount(direction); }
};

struct NodeConfig
{
    int version = NODE_CONFIG_VERSION;
    std::string node;
    const Cell* cell = nullptr;    // from "op" (cell->op: the Op)
    ElementType dtype = ElementType::Float32;   // "float32" | "float16"
    NodeAttrs attrs;
    std::vector<std::string> absent;
    std::vector<std::string> outputs;
    std::optional<std::string> device;
    Mode mode = Mode::Deterministic;

    bool isAbsent(std::string_view input) const;
    bool wants(std::string_view output) const;
};

// A config's values before the format's rules: what the JSON decoder read (each of the JSON
// type the format gives it) or what a door read from a node's typed attributes
// (placement/node_check.hpp). validateNodeConfig applies every rule of the format to it, so
// both paths refuse the same values with the same messages.
struct NodeConfigDraft
{
    std::string node;
    std::string op;
    std::string dtype;
    struct Attrs
    {
        std::optional<int64_t> hiddenSize;
        std::string direction = "forward";
        int64_t layout = 0;
        std::optional<std::vector<std::string>> activations;
        std::optional<std::vector<double>> activationAlpha;
        std::optional<std::vector<double>> activationBeta;
        std::optional<double> clip;
        int64_t inputForget = 0;
        int64_t linearBeforeReset = 0;
    } attrs;
    std::vector<std::string> absent;
    std::vector<std::string> outputs;
    std::optional<std::string> device;
    std::string mode = "deterministic";
};

// The config of a draft, checked by the format's rules (the name's length, the op, the dtype,
// each attribute's range, the activations, the absent inputs and outputs, the device's UUID,
// the mode). Throws ConfigError "ortops node config: node '<name>': <what>".
NodeConfig
validateNodeConfig(const NodeConfigDraft& draft);

// Decode a config attribute (any bytes): its JSON read into a draft, then validateNodeConfig.
// Throws ConfigError whose message starts "ortops node config: " and says what is wrong (with
// the node's name when it was read).
NodeConfig
decodeNodeConfig(std::string_view text);

// The canonical text of a config (what ortops.convert writes for it).
std::string
encodeNodeConfig(const NodeConfig& config);

} // namespace ortops
