// Coalescing concurrent runs of one layer (see coalesce.hpp).

#include "rnn/coalesce.hpp"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstring>
#include <memory>

namespace ortops {

namespace {

std::atomic<uint64_t> g_runs{ 0 }, g_requests{ 0 }, g_slotRuns{ 0 }, g_slotNs{ 0 };

// A tensor's shape seen around its batch axis: `outer` blocks (the axes before it) of
// `rows` x `inner` bytes (the axes after it).
struct Around
{
    size_t outer = 1;
    size_t inner = 1;
};

Around
around(const std::vector<int64_t>& shape, size_t axis, size_t item)
{
    Around a;
    a.inner = item;
    for (size_t i = 0; i < shape.size(); i++) {
        if (i < axis) {
            a.outer *= static_cast<size_t>(shape[i]);
        } else if (i > axis) {
            a.inner *= static_cast<size_t>(shape[i]);
        }
    }
    return a;
}

std::vector<int64_t>
withBatch(std::vector<int64_t> shape, size_t axis, uint32_t rows)
{
    shape[axis] = rows;
    return shape;
}

bool
sameButAxis(const std::vector<int64_t>& a, const std::vector<int64_t>& b, size_t axis)
{
    if (a.size() != b.size()) {
        return false;
    }
    for (size_t i = 0; i < a.size(); i++) {
        if (i != axis && a[i] != b[i]) {
            return false;
        }
    }
    return true;
}

} // namespace

std::vector<Piece>
batchPieces(const std::vector<const void*>& parts, const std::vector<uint32_t>& rows, uint32_t total,
            const std::vector<int64_t>& shape, size_t axis, size_t item, bool zeros)
{
    Around a = around(shape, axis, item);
    std::vector<Piece> out;
    out.reserve(a.outer * (parts.size() + 1));
    for (size_t o = 0; o < a.outer; o++) {
        uint64_t at = o * total * a.inner;
        uint64_t end = at + total * a.inner;
        for (size_t r = 0; r < parts.size(); r++) {
            uint64_t n = rows[r] * a.inner;
            const void* base = parts[r];
            out.push_back(Piece{ base ? static_cast<const uint8_t*>(base) + o * n : nullptr, at, n });
            at += n;
        }
        if (zeros && end > at) {
            out.push_back(Piece{ nullptr, at, end - at });
        }
    }
    return out;
}

BatchAxes
BatchAxes::forLayout(int64_t layout)
{
    return layout == 0 ? BatchAxes{ 1, 0, 1, 2 } : BatchAxes{ 0, 0, 0, 0 };
}

bool
sameCoalesceKey(const CoalesceRequest& a, const CoalesceRequest& b, const BatchAxes& axes)
{
    const RunInputs& x = *a.inputs;
    const RunInputs& y = *b.inputs;
    if (x.xwScratch || x.stateScratch || y.xwScratch || y.stateScratch) {
        return false;
    }
    if (x.X.type != y.X.type || !sameButAxis(x.X.shape, y.X.shape, axes.x)) {
        return false;
    }
    if (x.sequenceLens.has_value() != y.sequenceLens.has_value() || x.initialH.has_value() != y.initialH.has_value() ||
        x.initialC.has_value() != y.initialC.has_value() || x.steps != y.steps) {
        return false;
    }
    for (size_t i = 0; i < 3; i++) {
        if ((*a.shapes)[i].has_value() != (*b.shapes)[i].has_value()) {
            return false;
        }
    }
    return true;
}

uint32_t
coalescedRows(uint32_t rows, uint32_t maxRows)
{
    uint32_t p = 1;
    while (p < rows) {
        p *= 2;
    }
    return std::max(rows, std::min(p, maxRows));
}

void
runCoalesced(const std::vector<CoalesceRequest>& requests, const BatchAxes& axes, size_t item, uint32_t padTo,
             const RunOne& runOne)
{
    size_t n = requests.size();
    std::vector<uint32_t> rows(n);
    uint32_t total = 0;
    for (size_t r = 0; r < n; r++) {
        rows[r] = requests[r].rows;
        total += rows[r];
    }
    total = std::max(total, padTo);
    const RunInputs& first = *requests[0].inputs;

    // The run's inputs as the plan needs them (shapes and which are present); their bytes go
    // straight from each request's tensors into the plan's mapped memory, and the outputs
    // straight out of it into each request's (RunCopies): no concatenated copy on the way.
    RunInputs all;
    all.steps = first.steps;
    all.outputs = first.outputs;
    RunCopies copies;
    all.X = HostTensor{ nullptr, first.X.type, withBatch(first.X.shape, axes.x, total) };
    // Each request's address of one tensor (null where it has none).
    auto addresses = [&](auto of) {
        std::vector<const void*> a(n);
        for (size_t r = 0; r < n; r++) {
            a[r] = of(requests[r]);
        }
        return a;
    };
    copies.x = batchPieces(addresses([](const CoalesceRequest& q) { return q.inputs->X.data; }), rows, total,
                           first.X.shape, axes.x, item, true);
    if (first.sequenceLens) {
        // Padding rows get length 0 (zeros), inside every plan's range.
        all.sequenceLens = HostTensor{ nullptr, ElementType::Int32, { static_cast<int64_t>(total) } };
        copies.lens = batchPieces(addresses([](const CoalesceRequest& q) { return q.inputs->sequenceLens->data; }),
                                  rows, total, first.sequenceLens->shape, axes.lens, 4, true);
    }
    if (first.initialH) {
        all.initialH = HostTensor{ nullptr, first.initialH->type, withBatch(first.initialH->shape, axes.state, total) };
        copies.h0 = batchPieces(addresses([](const CoalesceRequest& q) { return q.inputs->initialH->data; }), rows,
                                total, first.initialH->shape, axes.state, item, true);
    }
    if (first.initialC) {
        all.initialC = HostTensor{ nullptr, first.initialC->type, withBatch(first.initialC->shape, axes.state, total) };
        copies.c0 = batchPieces(addresses([](const CoalesceRequest& q) { return q.inputs->initialC->data; }), rows,
                                total, first.initialC->shape, axes.state, item, true);
    }

    OutputShapes shapes;
    OutputPointers out{ nullptr, nullptr, nullptr };
    for (size_t i = 0; i < 3; i++) {
        const auto& one = (*requests[0].shapes)[i];
        if (!one) {
            continue;
        }
        size_t axis = i == 0 ? axes.y : axes.state;
        shapes[i] = withBatch(*one, axis, total);
        std::vector<Piece> all = batchPieces(
          addresses([i](const CoalesceRequest& q) { return static_cast<const void*>((*q.out)[i]); }), rows, total,
          *one, axis, item, false);
        // A request without this output (a null address) reads nothing.
        for (const Piece& p : all) {
            if (p.host != nullptr) {
                copies.outputs[i].push_back(p);
            }
        }
    }

    runOne(all, shapes, out, &copies);
    g_runs++;
    g_requests += n;
}

std::vector<Coalescer::Waiter*>
Coalescer::takeGroup(const BatchAxes& axes, uint32_t maxRows)
{
    std::vector<Waiter*> group{ waiting.front() };
    waiting.pop_front();
    uint32_t rows = group[0]->request.rows;
    for (auto it = waiting.begin(); it != waiting.end();) {
        Waiter* w = *it;
        if (rows + w->request.rows <= maxRows && sameCoalesceKey(group[0]->request, w->request, axes)) {
            rows += w->request.rows;
            group.push_back(w);
            it = waiting.erase(it);
        } else {
            ++it;
        }
    }
    return group;
}

std::exception_ptr
Coalescer::runOnSlot(std::unique_lock<std::mutex>& lk, const std::function<void()>& body)
{
    inFlight++;
    auto taken = std::chrono::steady_clock::now();
    lk.unlock();
    std::exception_ptr error;
    try {
        body();
    } catch (...) {
        error = std::current_exception();
    }
    lk.lock();
    inFlight--;
    g_slotRuns++;
    g_slotNs += static_cast<uint64_t>(
      std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - taken).count());
    finished.notify_all();
    return error;
}

void
Coalescer::run(const CoalesceRequest& request, const BatchAxes& axes, size_t item, uint32_t maxRows,
               uint32_t maxInFlight, const RunOne& runOne)
{
    Waiter me{ request };
    std::unique_lock<std::mutex> lk(lock);
    if (inFlight < maxInFlight && waiting.empty()) {
        // Nothing to wait for: run alone, on the caller's own buffers.
        me.error = runOnSlot(lk, [&] { runOne(*request.inputs, *request.shapes, *request.out, nullptr); });
        lk.unlock();
        if (me.error) {
            std::rethrow_exception(me.error);
        }
        return;
    }
    waiting.push_back(&me);
    while (!me.done) {
        if (inFlight < maxInFlight && !waiting.empty()) {
            // Lead the next group (which need not hold this request: the oldest waiter's key
            // goes first). The waiters stay blocked in this loop until `done`, so their
            // requests stay valid while the group runs.
            std::vector<Waiter*> group = takeGroup(axes, maxRows);
            std::exception_ptr error = runOnSlot(lk, [&] {
                if (group.size() == 1) {
                    const CoalesceRequest& r = group[0]->request;
                    runOne(*r.inputs, *r.shapes, *r.out, nullptr);
                    return;
                }
                std::vector<CoalesceRequest> requests;
                uint32_t rows = 0;
                for (Waiter* w : group) {
                    requests.push_back(w->request);
                    rows += w->request.rows;
                }
                runCoalesced(requests, axes, item, coalescedRows(rows, maxRows), runOne);
            });
            for (Waiter* w : group) {
                w->error = error;
                w->done = true;
            }
            finished.notify_all();
        } else {
            // wait_for, not wait: libstdc++ 12 versions condition_variable::wait
            // GLIBCXX_3.4.30, which would raise the wheel's manylinux tag (hostcopy.cpp).
            finished.wait_for(lk, std::chrono::milliseconds(50));
        }
    }
    lk.unlock();
    if (me.error) {
        std::rethrow_exception(me.error);
    }
}

CoalesceCounters
coalesceCounters()
{
    return { g_runs.load(), g_requests.load(), g_slotRuns.load(), g_slotNs.load() };
}

} // namespace ortops
