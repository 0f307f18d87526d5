// A layer's checked configuration (Spec): everything about it that does not depend on X, made
// once from the node config and the weights' shapes and types (makeSpec), and the checks of a
// run's inputs against it (checkInputs). Every refusal is an InputError naming the operator,
// the argument, what was expected and what came, or an UnsupportedLayerError for sizes beyond
// what the kernels index.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "config/activations.hpp"
#include "config/cells.hpp"
#include "config/nodeconfig.hpp"
#include "rnn/specialization.hpp"
#include "rnn/tensors.hpp"
#include "config/types.hpp"

namespace ortops {

struct Spec
{
    const Cell* cell = nullptr;
    std::string op;                    // the cell's name, for messages
    bool float16 = false;
    uint32_t item = 4;
    uint32_t dirs = 1;
    uint32_t hidden = 0;
    uint32_t input = 0;
    uint32_t gates = 1;
    uint32_t layout = 0;
    bool reverse = false;
    std::vector<std::vector<Activation>> activations;
    std::optional<float> clip;
    bool inputForget = false;
    bool lbr = false;
    bool hasBias = false;
    bool hasPeepholes = false;
    bool generalActivations = false;   // activations other than the cell's defaults (GENERAL)
    Mode mode = Mode::Deterministic;

    bool gruTwoPass() const { return cell->op == Op::GRU && !lbr; }
    // Bytes per element of R (and RB) on the device: exact mode's step kernels read float32
    // words in both precisions (exactR).
    uint32_t rItem() const { return mode == Mode::Exact ? 4 : item; }
    ElementType type() const { return float16 ? ElementType::Float16 : ElementType::Float32; }
};

// The spec of a node: its config's attributes, the weights checked against them.
Spec
makeSpec(const NodeConfig& cfg, const Weights& w);

// The inputs of a run checked (shapes, dtypes, sequence_lens range, max_length) and the output
// shapes, in the cell's order; `config` says which outputs are wanted unless the run does.
OutputShapes
checkInputs(const Spec& s, const NodeConfig& config, const RunInputs& in);

// The GENERAL flag and the step shaders' ACT/ALPHA/BETA constants: per direction the f, g, h
// slots (a cell with fewer slots repeats its last; one direction's list serves both).
bool
activationConstants(const Spec& s, Constants& out);

} // namespace ortops
