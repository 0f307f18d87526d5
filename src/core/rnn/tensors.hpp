// What a run of a layer takes and gives on the host, as both doors hand it over: C-contiguous
// host tensors the caller owns (ORT's buffers, numpy arrays), the weights, a run's inputs and
// where its outputs go. No Vulkan here: coalesce.hpp and spec.hpp need these as layer.hpp does.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <optional>
#include <vector>

#include "config/types.hpp"

namespace ortops {

// A C-contiguous host tensor the caller owns (ORT's input buffer, a numpy array).
struct HostTensor
{
    const void* data = nullptr;
    ElementType type = ElementType::Float32;
    std::vector<int64_t> shape;

    size_t elements() const
    {
        size_t n = 1;
        for (int64_t d : shape) {
            n *= static_cast<size_t>(d);
        }
        return n;
    }
};

struct Weights
{
    HostTensor W;
    HostTensor R;
    std::optional<HostTensor> B;
    std::optional<HostTensor> P;
};

struct Buffer;

// A caller's scratch region: a device buffer (Context's "storage" buffers) and a byte offset
// (a multiple of 4) from which the region runs.
struct ScratchRegion
{
    std::shared_ptr<Buffer> buffer;
    uint64_t offset = 0;
};

struct RunInputs
{
    HostTensor X;
    std::optional<HostTensor> sequenceLens;
    std::optional<HostTensor> initialH;
    std::optional<HostTensor> initialC;
    // The Python door's extras (the custom-op library leaves them unset):
    // steps to run (max_length, at least every sequence length; default seq_length);
    std::optional<uint32_t> steps;
    // the outputs computed, in the cell's order (default: the config's);
    std::optional<std::array<bool, 3>> outputs;
    // caller scratch regions for Xw and the state (default: the plan's own); runs given
    // regions are serialised, since they may share one arena.
    std::optional<ScratchRegion> xwScratch;
    std::optional<ScratchRegion> stateScratch;
};

// Output shapes in the cell's output order (Y, Y_h[, Y_c]); an output not computed has no
// shape (nullopt).
using OutputShapes = std::array<std::optional<std::vector<int64_t>>, 3>;
// Where run() writes each output (nullptr for one not computed), C-contiguous, of the shape
// outputShapes() gave and the layer's element type.
using OutputPointers = std::array<void*, 3>;

} // namespace ortops
