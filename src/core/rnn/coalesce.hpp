// Coalescing concurrent runs of one layer into one batched run (group commit).
//
// Why. A small-batch run (the recognizer at batch 1: two dependent layers of 80 steps) is bound
// by the GPU's latency, not its width. Runs from several threads go to one queue, where each
// run's barriers also wait for the work submitted before it: they execute one after another,
// so threads alone barely add throughput, and several queues did not overlap on the H200
// either. But a batch-8 run costs little more than a batch-1 run, so eight requests in one run
// multiply the throughput (docs/perf.md, "Threads").
//
// How. The first request to arrive while no group of the layer is in flight runs at once,
// alone, with its own buffers: one thread pays nothing but a lock. Requests that arrive while
// a group is in flight wait; when it ends, one of them becomes the leader and takes every
// waiting request of the same key (shape but for the batch, optional inputs, outputs,
// steps) up to `maxRows` batch rows, concatenates their inputs along the batch axis (padded
// with zero rows to a power of two, coalescedRows), runs them as one batch and hands each its
// rows of the outputs. Requests of other keys form the
// next group.
//
// Bits. Each batch row of a run is computed by the same operations in the same order whatever
// the batch: the projection's sums and the steps' walk do not depend on the batch, and the
// batched step kernel chosen from batch 32 gives the lanes kernel's bits
// (tests/test_step_kernels.py). So a request's outputs are the same bits coalesced or alone;
// tests/test_coalesce.py checks it for every cell, both precisions, modes and layouts, and
// the threads tests compare every threaded result with the serial one.
#pragma once

#include <array>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <vector>

#include "rnn/controls.hpp"
#include "vk/memory.hpp"
#include "rnn/tensors.hpp"

namespace ortops {

// One request: where its inputs are, the output shapes outputShapes() gave, where its outputs
// go. `rows` is its batch size.
struct CoalesceRequest
{
    const RunInputs* inputs = nullptr;
    const OutputShapes* shapes = nullptr;
    const OutputPointers* out = nullptr;
    uint32_t rows = 0;
};

// Where a coalesced run's inputs come from and its outputs go, piece by piece: the plan's
// mapped input buffers are written from each request's tensors (zeros in the padding rows)
// and its readback buffers read into each request's outputs, with no concatenated copy.
struct RunCopies
{
    std::vector<Piece> x, lens, h0, c0;
    std::array<std::vector<Piece>, 3> outputs;   // Piece::host: where the request wants them
};

// One run of the layer: the inputs (already checked), output shapes and addresses, and for a
// coalesced run the pieces to copy instead of the inputs' and outputs' own addresses.
using RunOne = std::function<void(const RunInputs&, const OutputShapes&, const OutputPointers&, const RunCopies*)>;


// Where the batch axis is in each tensor of a run, by the node's layout (0: [seq, batch, ...]
// for X, [dirs, batch, hidden] for the states, [seq, dirs, batch, hidden] for Y; 1: batch
// first everywhere).
struct BatchAxes
{
    size_t x, lens, state, y;
    static BatchAxes forLayout(int64_t layout);
};

// The batch a coalesced run of `rows` request rows runs at: the next power of two, at most
// `maxRows` (but never below `rows`). Padding bounds the plans a layer records for coalesced
// runs to one per power of two (recording a plan of a new batch costs far more than the
// padding rows' GPU time: at batch 8 or less a run is bound by the GPU's latency, not its
// width), and padding rows are computed apart from the requests' rows, so their bits stay.
uint32_t
coalescedRows(uint32_t rows, uint32_t maxRows);

// Run `requests` (same key, at least two) as one batch through `runOne`: inputs placed one
// after another along the batch axis (then zero rows up to `padTo`), outputs split back. `item`: bytes per
// element of the layer's type.
void
runCoalesced(const std::vector<CoalesceRequest>& requests, const BatchAxes& axes, size_t item, uint32_t padTo,
             const RunOne& runOne);

// The pieces (memory.hpp) that place `parts` (tensors of one shape but along `axis`, rows[r]
// rows there, C-contiguous, `item` bytes an element) one after another along `axis` in a
// tensor of `total` rows whose first byte is offset 0; a null part gives pieces of zeros, and
// `zeros` adds zero pieces for the rows past theirs. `shape`: any of them (the axis is not read).
// The coalescer's runs copy with them, and so does ortops.serve's stacking (bind_rows.cpp).
std::vector<Piece>
batchPieces(const std::vector<const void*>& parts, const std::vector<uint32_t>& rows, uint32_t total,
            const std::vector<int64_t>& shape, size_t axis, size_t item, bool zeros);

// Whether two requests may share a run: every input and output shape equal but for the batch,
// the same optional inputs, outputs and steps, and no caller scratch regions.
bool
sameCoalesceKey(const CoalesceRequest& a, const CoalesceRequest& b, const BatchAxes& axes);

// The queue of one layer's waiting requests and the group commit over it.
class Coalescer
{
  public:
    // Run `request`: alone at once when nothing is in flight, else with the requests that
    // arrived meanwhile; at most `maxInFlight` runs of this layer in flight. Rethrows the
    // exception of the run that carried it.
    void run(const CoalesceRequest& request, const BatchAxes& axes, size_t item, uint32_t maxRows,
             uint32_t maxInFlight, const RunOne& runOne);

  private:
    struct Waiter
    {
        CoalesceRequest request;
        bool done = false;
        std::exception_ptr error;
    };

    std::vector<Waiter*> takeGroup(const BatchAxes& axes, uint32_t maxRows);
    // One run on a slot taken under the lock (`lk` unlocked meanwhile, locked again on
    // return, when the slot is given back); the run's exception is returned.
    std::exception_ptr runOnSlot(std::unique_lock<std::mutex>& lk, const std::function<void()>& body);

    std::mutex lock;                        // guards everything below
    std::condition_variable finished;       // a run ended
    std::deque<Waiter*> waiting;
    uint32_t inFlight = 0;                  // this layer's runs in flight
};

// Requests carried by runs of more than one request, and those runs, in this process; and
// the nanoseconds the layers' in-flight slots were held by the runs that went through a
// coalescer (alone or in groups), and those runs.
struct CoalesceCounters
{
    uint64_t runs = 0;
    uint64_t requests = 0;
    uint64_t slotRuns = 0;
    uint64_t slotNs = 0;
};
CoalesceCounters
coalesceCounters();

} // namespace ortops
