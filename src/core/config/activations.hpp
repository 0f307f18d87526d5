// The one table of activations (name, the shaders' code, which parameters it takes, ONNX
// Runtime's defaults) and the resolution of a node's activations / activation_alpha /
// activation_beta into one (code, alpha, beta) per slot and direction. The index in
// ACTIVATIONS is the code glsl/common.glsl's activate() switches on: never reorder it.
// Rules (checked against ONNX Runtime 1.32 CPU, docs/design.md "Activations"): names match
// case-insensitively; alpha and beta are consumed in order over the whole list with separate
// cursors, only by activations that take them; a missing one takes ORT's default (LeakyRelu
// 0.01, HardSigmoid 0.2 / 0.5, Elu 1.0, else 0); a bidirectional layer lists one set (both
// directions) or two; an RNN of one direction may list two names (the first is used).
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "config/cells.hpp"

namespace ortops {

struct ActivationInfo
{
    std::string_view name;
    bool takesAlpha;
    bool takesBeta;
    float defaultAlpha;
    float defaultBeta;
};

inline constexpr std::array<ActivationInfo, 11> ACTIVATIONS = { {
  { "Sigmoid", false, false, 0.0f, 0.0f },
  { "Tanh", false, false, 0.0f, 0.0f },
  { "Relu", false, false, 0.0f, 0.0f },
  { "Affine", true, true, 0.0f, 0.0f },
  { "LeakyRelu", true, false, 0.01f, 0.0f },
  { "ThresholdedRelu", true, false, 0.0f, 0.0f },
  { "ScaledTanh", true, true, 0.0f, 0.0f },
  { "HardSigmoid", true, true, 0.2f, 0.5f },
  { "Elu", true, false, 1.0f, 0.0f },
  { "Softsign", false, false, 0.0f, 0.0f },
  { "Softplus", false, false, 0.0f, 0.0f },
} };

// The code of a name (case-insensitive), or nullopt.
std::optional<uint32_t>
activationCode(std::string_view name);

struct Activation
{
    uint32_t code = 0;
    float alpha = 0.0f;
    float beta = 0.0f;
};

// One per slot (cell.slotCount) and direction (1 or 2). Throws std::invalid_argument with a
// message "<op>: activations ..." naming what is wrong.
std::vector<std::vector<Activation>>
resolveActivations(const Cell& cell,
                   uint32_t directions,
                   const std::optional<std::vector<std::string>>& names,
                   const std::optional<std::vector<double>>& alpha,
                   const std::optional<std::vector<double>>& beta);

} // namespace ortops
