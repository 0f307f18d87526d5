// The one table of recurrent cells: what LSTM, GRU and RNN are, for every part of the native
// core (the node-config decoder, layer checks, plan recording, the ONNX Runtime kernels).
// Adding a cell means visiting this table, glsl/cell.glsl (which holds the arithmetic) and
// ortops/cells.py (the pure-Python reference's copy): tests/test_native_tables.py holds the two
// tables to each other, tests/test_cells.py the Python one to ONNX's schemas and the shaders.
#pragma once

#include <array>
#include <cstdint>
#include <string_view>

namespace ortops {

// The op a cell is, for decisions (its name is for messages and the Python views); the value
// is glsl/cell.glsl's CELL constant.
enum class Op : uint32_t
{
    LSTM = 0,
    GRU = 1,
    RNN = 2,
};

struct Cell
{
    Op op;
    std::string_view name;
    uint32_t code;                                  // glsl/cell.glsl's CELL constant (uint32_t(op))
    std::array<std::string_view, 4> gateOrder;      // as ONNX stacks W, R and B
    uint32_t gates;
    std::array<std::string_view, 8> inputs;         // ONNX's inputs in order
    uint32_t inputCount;
    std::array<std::string_view, 3> outputs;        // ONNX's outputs in order
    uint32_t outputCount;
    std::array<std::string_view, 3> slots;          // activation slots of one direction
    std::array<std::string_view, 3> defaultActivations;
    uint32_t slotCount;
    bool inputForget;                               // has the input_forget attribute
    bool linearBeforeReset;                         // has the linear_before_reset attribute

    // State planes (directions x batch x hidden) the step passes keep besides every step's
    // hidden state: LSTM its cell state; a GRU with linear_before_reset = 0 its z and r * h
    // between its two passes.
    uint32_t extraStatePlanes(bool lbr) const
    {
        if (op == Op::LSTM) {
            return 1;
        }
        return (op == Op::GRU && !lbr) ? 2 : 0;
    }
    bool hasInput(std::string_view n) const
    {
        for (uint32_t i = 0; i < inputCount; ++i) {
            if (inputs[i] == n) {
                return true;
            }
        }
        return false;
    }
    bool hasOutput(std::string_view n) const
    {
        for (uint32_t i = 0; i < outputCount; ++i) {
            if (outputs[i] == n) {
                return true;
            }
        }
        return false;
    }
};

inline constexpr std::array<Cell, 3> CELLS = { {
  { Op::LSTM, "LSTM", 0, { "i", "o", "f", "c" }, 4,
    { "X", "W", "R", "B", "sequence_lens", "initial_h", "initial_c", "P" }, 8,
    { "Y", "Y_h", "Y_c" }, 3,
    { "f", "g", "h" }, { "Sigmoid", "Tanh", "Tanh" }, 3, true, false },
  { Op::GRU, "GRU", 1, { "z", "r", "h", "" }, 3,
    { "X", "W", "R", "B", "sequence_lens", "initial_h", "", "" }, 6,
    { "Y", "Y_h", "" }, 2,
    { "f", "g", "" }, { "Sigmoid", "Tanh", "" }, 2, false, true },
  { Op::RNN, "RNN", 2, { "i", "", "", "" }, 1,
    { "X", "W", "R", "B", "sequence_lens", "initial_h", "", "" }, 6,
    { "Y", "Y_h", "" }, 2,
    { "f", "", "" }, { "Tanh", "", "" }, 1, false, false },
} };
static_assert(CELLS[0].code == uint32_t(Op::LSTM) && CELLS[1].code == uint32_t(Op::GRU) &&
              CELLS[2].code == uint32_t(Op::RNN));

// The cell of an op.
inline const Cell&
cellOf(Op op)
{
    return CELLS[static_cast<uint32_t>(op)];
}

// The cell of an ONNX op type, or nullptr.
inline const Cell*
findCell(std::string_view op)
{
    for (const Cell& c : CELLS) {
        if (c.name == op) {
            return &c;
        }
    }
    return nullptr;
}

} // namespace ortops
