// The persistent step kernel's choice, split and run (see persistent.hpp).

#include "rnn/persistent.hpp"

#include <algorithm>
#include <cstdlib>
#include <map>
#include <memory>
#include <mutex>
#include <string>

#include "base/errors.hpp"
#include "rnn/plan_pool.hpp"
#include "vk/grid_support.hpp"
#include "vk/memory.hpp"
#include "vk/sequence.hpp"

namespace ortops {

namespace {

// Polls a wait makes before it gives up. A GPU's poll is a device-scope load of about half a
// microsecond (an L2 round trip): about half a second, far beyond any step. A CPU
// implementation's poll computes CPU_POLL_DELAY dependent integer divisions first, 6 us on
// lavapipe (2.6 us for 64), whose loops end after 65,535 iterations in all (the shader's
// POLL_DELAY): about 0.12 s a wait, 0.4 s in all, for threads the system may leave unscheduled
// for a while on a loaded machine (lavapipe's threads started 5-15 ms apart on the 2 busy cores
// the tests ran on).
constexpr uint32_t GPU_SPINS = 1u << 20;
constexpr uint32_t CPU_SPINS = 20000;
constexpr uint32_t CPU_POLL_DELAY = 128;
// Polls the first workgroup holds the occupancy poll open when not every workgroup has arrived
// (it closes as soon as they all have): about a millisecond on a GPU, where every workgroup
// that fits starts within microseconds; about 50 ms on a CPU, for the system to start threads.
constexpr uint32_t GPU_WINDOW = 1u << 11;
constexpr uint32_t CPU_WINDOW = 8000;
// Rows of R a round of the shader's lanes reduction takes at most (32 lanes x 32 rows = 1024
// invocations).
constexpr uint32_t MAX_ROW_THREADS = 32;

// The most values of h an invocation reads a step with the exchange (a bit each in one word).
constexpr uint64_t MAX_PER_INVOCATION = 32;

// ORTOPS_PERSISTENT_STEPS=0 switches the kernel off where the settings leave it to the table
// (vk/grid_support.hpp: a device created then has no device scope, so it never runs there).
bool
switchedOff()
{
    return persistentSwitchedOff();
}

// The device class's row of PERSISTENT_STEPS (variants.hpp: the last of its class).
const PersistentRule&
ruleOf(const PersistentDevice& device)
{
    const PersistentRule* rule = nullptr;
    for (const auto& r : PERSISTENT_STEPS) {
        if (r.cpu == device.cpu) {
            rule = &r;
        }
    }
    return *rule;   // every class has a row (variants.hpp)
}

bool
tableChooses(const PersistentShape& shape, const PersistentDevice& device)
{
    const PersistentRule& r = ruleOf(device);
    return shape.hidden >= r.fromHidden && shape.batch <= r.maxBatch && device.computeUnits > 0;
}

uint32_t
orRule(uint32_t setting, uint32_t rule)
{
    return setting != BATCHED_TABLE ? setting : rule;
}

PersistentVariant
split(const PersistentShape& shape, const PersistentDevice& device, const VariantSettings& s, uint32_t design)
{
    PersistentVariant v;
    v.design = design;
    uint64_t units = static_cast<uint64_t>(shape.dirs) * shape.hidden;
    uint64_t passRows = shape.gruTwoPass ? 2 : shape.gates;   // a unit's rows in its widest pass
    bool exchange = v.exchanges();
    uint64_t plane = units * shape.batch;                     // h of every direction and batch row
    // Shared memory: per unit its rows of R and its sums; per row thread its 32 lane sums (+1
    // word against bank conflicts) of every batch row; the workgroup's role words; with the
    // exchange, h of the slice's directions.
    uint64_t perUnit = 4ull * (shape.gates * shape.hidden + passRows * shape.batch);
    uint64_t rowThreadsMost = std::min<uint64_t>(MAX_ROW_THREADS, std::max<uint32_t>(device.maxInvocations, 32) / 32);
    auto fixedBytes = [&](uint64_t rowThreads) {
        return 4ull * rowThreads * shape.batch * 33 + 20 + (exchange ? 4ull * plane : 0);
    };
    auto capacity = [&](uint64_t rowThreads) {
        uint64_t fixed = fixedBytes(rowThreads);
        return device.maxShared > fixed ? (device.maxShared - fixed) / perUnit : 0;
    };
    // At most one workgroup a compute unit (the settings' count too), and no more than units;
    // where the device does not say, the fewest that hold R.
    uint64_t groups = orRule(s.persistentGroups, device.computeUnits);
    if (groups == 0) {
        groups = ceilDiv(units, std::max<uint64_t>(1, capacity(std::min(passRows, rowThreadsMost))));
    }
    if (device.computeUnits > 0) {
        groups = std::min<uint64_t>(groups, device.computeUnits);
    }
    groups = std::clamp<uint64_t>(groups, 1, units);
    uint64_t perGroup = ceilDiv(units, groups);
    // A row thread for each of the slice's rows of a pass, at most 32; fewer (more rounds a step)
    // where their lane sums would leave too little shared memory for the slice of R.
    uint64_t rowThreads = std::clamp<uint64_t>(passRows * perGroup, 1, rowThreadsMost);
    while (rowThreads > 1 && capacity(rowThreads) < perGroup) {
        rowThreads--;
    }
    uint32_t fitting = static_cast<uint32_t>(std::min<uint64_t>(capacity(rowThreads), 0xFFFFFFFFu));
    uint64_t unitsMax = std::min<uint64_t>(orRule(s.persistentUnits, fitting), units);
    v.groups = static_cast<uint32_t>(groups);
    v.threads = static_cast<uint32_t>(32 * rowThreads);
    v.unitsMax = static_cast<uint32_t>(std::max<uint64_t>(unitsMax, 1));
    uint64_t shared = v.unitsMax * perUnit + fixedBytes(rowThreads);
    v.sharedBytes = static_cast<uint32_t>(std::min<uint64_t>(shared, 0xFFFFFFFFu));
    // The exchange's reads a step: every value of h over the workgroup's invocations, each
    // holding at most MAX_PER_INVOCATION (bits of one word in the shader).
    uint64_t per = ceilDiv(plane, v.threads);
    v.perInvocation = static_cast<uint32_t>(exchange ? per : 1);
    v.fits = unitsMax >= perGroup && shared <= device.maxShared && (!exchange || per <= MAX_PER_INVOCATION);
    v.spins = orRule(s.persistentSpins, device.cpu ? CPU_SPINS : GPU_SPINS);
    v.window = device.cpu ? CPU_WINDOW : GPU_WINDOW;
    v.pollDelay = device.cpu ? CPU_POLL_DELAY : 0;
    v.discovery = s.persistentDiscovery != 1;
    v.piece = orRule(s.persistentPiece, 0);
    return v;
}

} // namespace

PersistentVariant
persistentVariant(const PersistentShape& shape, const PersistentDevice& device, const VariantSettings& s)
{
    // The shader's DESIGN: the settings' (+ 1), else the device class's rule where its split
    // fits, else 0 (one grid barrier a step: no h beside R in shared memory).
    if (s.persistentDesign != BATCHED_TABLE) {
        return split(shape, device, s, s.persistentDesign - 1);
    }
    uint32_t rule = ruleOf(device).design;
    PersistentVariant v = split(shape, device, s, rule);
    return v.fits || rule == 0 ? v : split(shape, device, s, 0);
}

bool
persistentSteps(const PersistentShape& shape, const PersistentDevice& device, Mode mode, bool runnable,
                const VariantSettings& s)
{
    uint32_t choice = s.persistentSteps;
    if (choice == 0 || !runnable || mode == Mode::Exact || shape.batch == 0 || shape.batch > MAX_NB ||
        stepKernel(shape.batch, shape.hidden, s) == StepKernel::Batched) {
        return false;
    }
    if (!persistentVariant(shape, device, s).fits) {
        return false;
    }
    if (choice != PERSISTENT_STEPS_TABLE) {
        return true;
    }
    // Left to the table: the whole-sequence kernel where the settings force it, the switch.
    return s.sequenceSteps != 1 && !switchedOff() && tableChooses(shape, device);
}

// ---------------------------------------------------------------- the devices' state

namespace {

struct DeviceGate
{
    std::mutex gate;    // one persistent grid on the device at a time
    std::mutex lock;    // the state below
    PersistentState state;
};

std::mutex g_gatesLock;
// Never destroyed, as the shared contexts (devices.cpp): runs may end while statics go.
auto* g_gates = new std::map<uint32_t, std::unique_ptr<DeviceGate>>();

DeviceGate&
gateOf(uint32_t device)
{
    std::lock_guard<std::mutex> lock(g_gatesLock);
    auto& g = (*g_gates)[device];
    if (!g) {
        g = std::make_unique<DeviceGate>();
    }
    return *g;
}

std::string
failure(uint32_t status, uint32_t taken)
{
    std::string why = "the persistent step kernel's grid failed (status " + std::to_string(status) + ", " +
                      std::to_string(taken) + " workgroups took part):";
    if (status & 1u) {
        why += " too few workgroups ran at once to hold R;";
    }
    if (status & 2u) {
        why += " a grid barrier was not met within its bound;";
    }
    if (status & 4u) {
        why += " the workgroup count was never published;";
    }
    if (status & 8u) {
        why += " the device cut a loop short (lavapipe's loop limiter);";
    }
    return why + " the step kernels run instead on this device";
}

} // namespace

PersistentState
persistentState(uint32_t device)
{
    DeviceGate& g = gateOf(device);
    std::lock_guard<std::mutex> lock(g.lock);
    return g.state;
}

bool
persistentOff(uint32_t device)
{
    return persistentState(device).off;
}

Sequence&
runPersistent(Plan& plan, uint32_t device)
{
    DeviceGate& g = gateOf(device);
    if (!persistentOff(device)) {
        uint32_t words[PERSISTENT_SYNC_WORDS] = {};
        {
            std::lock_guard<std::mutex> gate(g.gate);
            try {
                plan.sequence->eval();
            } catch (const DeviceLostError& e) {
                std::lock_guard<std::mutex> lock(g.lock);
                g.state.off = true;
                g.state.why = std::string("a persistent run lost the device: ") + e.what();
                throw;
            }
            plan.syncStatus->read(words, sizeof words, 0);
        }
        std::lock_guard<std::mutex> lock(g.lock);
        g.state.runs++;
        g.state.lastTaken = words[PERSISTENT_TAKEN];
        if (words[PERSISTENT_STATUS] == 0) {
            return *plan.sequence;
        }
        if (!g.state.off) {
            g.state.off = true;
            g.state.why = failure(words[PERSISTENT_STATUS], words[PERSISTENT_TAKEN]);
        }
    }
    plan.fallback->eval();   // the inputs are still in the plan's staging memory
    std::lock_guard<std::mutex> lock(g.lock);
    g.state.fallbacks++;
    return *plan.fallback;
}

} // namespace ortops
