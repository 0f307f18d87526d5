// The vocabularies, each parsed once from its name (by the node-config decoder and by each
// door) and named again only for messages and the Python views (src/tools/gen_tables.cpp
// writes them into ortops/_tables.py, which is the Python package's only copy): the element
// type of tensors, the numerics mode (docs/modes.md), the direction of a layer, the placement
// policy, the operator versions the device path implements and the step kernel a plan
// records. (The op is the cell table's entry, cells.hpp.)
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>

namespace ortops {

enum class ElementType
{
    Float32,
    Float16,
    Int32,
};

// The element type's name (as numpy and the node config spell it) and size in bytes.
inline const char*
elementTypeName(ElementType t)
{
    switch (t) {
        case ElementType::Float32:
            return "float32";
        case ElementType::Float16:
            return "float16";
        case ElementType::Int32:
            return "int32";
    }
    return "?";
}

inline size_t
elementSize(ElementType t)
{
    return t == ElementType::Float16 ? 2 : 4;
}

inline std::optional<ElementType>
parseElementType(std::string_view name)
{
    for (ElementType t : { ElementType::Float32, ElementType::Float16, ElementType::Int32 }) {
        if (name == elementTypeName(t)) {
            return t;
        }
    }
    return std::nullopt;
}

// docs/modes.md: "deterministic" (the portable kernels, bit-identical run to run), "exact"
// (float32 sums in a fixed order, docs/exact.md), "fast" (matrix units where the device has
// them).
enum class Mode
{
    Deterministic,
    Exact,
    Fast,
};

inline const char*
modeName(Mode m)
{
    switch (m) {
        case Mode::Deterministic:
            return "deterministic";
        case Mode::Exact:
            return "exact";
        case Mode::Fast:
            return "fast";
    }
    return "?";
}

inline std::optional<Mode>
parseMode(std::string_view name)
{
    for (Mode m : { Mode::Deterministic, Mode::Exact, Mode::Fast }) {
        if (name == modeName(m)) {
            return m;
        }
    }
    return std::nullopt;
}

// ONNX's direction attribute.
enum class Direction
{
    Forward,
    Reverse,
    Bidirectional,
};

inline const char*
directionName(Direction d)
{
    switch (d) {
        case Direction::Forward:
            return "forward";
        case Direction::Reverse:
            return "reverse";
        case Direction::Bidirectional:
            return "bidirectional";
    }
    return "?";
}

inline std::optional<Direction>
parseDirection(std::string_view name)
{
    for (Direction d : { Direction::Forward, Direction::Reverse, Direction::Bidirectional }) {
        if (name == directionName(d)) {
            return d;
        }
    }
    return std::nullopt;
}

// num_directions: 2 for a bidirectional layer, else 1.
inline uint32_t
directionCount(Direction d)
{
    return d == Direction::Bidirectional ? 2 : 1;
}

// The element types a layer computes in (X, W, R, B, the states and outputs).
inline constexpr ElementType LAYER_TYPES[] = { ElementType::Float32, ElementType::Float16 };
inline constexpr Mode MODES[] = { Mode::Deterministic, Mode::Exact, Mode::Fast };
inline constexpr Direction DIRECTIONS[] = { Direction::Forward, Direction::Reverse, Direction::Bidirectional };

// Placement policies (placement/placement_policy.hpp says what each does).
enum class Placement
{
    Gpu,
    Auto,
};
inline constexpr Placement PLACEMENTS[] = { Placement::Gpu, Placement::Auto };

inline const char*
placementName(Placement p)
{
    return p == Placement::Auto ? "auto" : "gpu";
}

// The ai.onnx versions of RNN, GRU and LSTM the device path implements (one semantics: layout
// came in 14, types in 22); a model of a later opset still uses version 22.
inline constexpr int SUPPORTED_VERSIONS[] = { 7, 14, 22 };

// The step kernel a plan records (variants.hpp's stepKernel and the layer's chooseStepKernel
// choose it; the recording records each): its name is its shader's, glsl/<name>.comp.
//   Lanes:   "step", lanes split each product (latency-bound small batches);
//   Batched: "step_batched", the batched layouts (R as RB, h in transposed planes); its shader
//            is BatchedVariant::shader(), v4 glsl/step_batched.comp or v5 glsl/step_tiled.comp;
//   Coopmat: "step_coopmat", R . h on the matrix units (mode "fast", float16);
//   Sequence: "step_sequence", every step in one dispatch (glsl/step_sequence.comp; R as RB);
//   Persistent: "step_persistent", every step in one grid holding R on chip, a grid barrier a
//            step (glsl/step_persistent.comp; rnn/persistent.hpp).
enum class StepKernel
{
    Lanes,
    Batched,
    Coopmat,
    Sequence,
    Persistent,
};

inline const char*
stepKernelName(StepKernel k)
{
    switch (k) {
        case StepKernel::Lanes:
            return "step";
        case StepKernel::Batched:
            return "step_batched";
        case StepKernel::Coopmat:
            return "step_coopmat";
        case StepKernel::Sequence:
            return "step_sequence";
        case StepKernel::Persistent:
            return "step_persistent";
    }
    return "?";
}

} // namespace ortops
