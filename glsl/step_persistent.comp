#version 450
#extension GL_GOOGLE_include_directive : require
// Loops over the batch rows and the 32 lane sums must unroll so that acc[] and v[] stay in registers.
#extension GL_EXT_control_flow_attributes : enable
// The Vulkan memory model (vulkanMemoryModel, vulkanMemoryModelDeviceScope, enabled at device
// creation where offered: src/core/vk/grid_support.cpp): device-scope atomics and fences for the
// grid barrier, and a nonprivate state buffer (which those fences order).
#extension GL_KHR_memory_scope_semantics : require
// The module against the Vulkan memory model throughout (glslang then also declares
// VulkanMemoryModelDeviceScope for the device-scope atomics and fences, which it does not when
// the model is only implied by their use, and honours nonprivate).
#pragma use_vulkan_memory_model
// DESIGN's shuffle tree (a row's lane sums joined in registers).
#extension GL_KHR_shader_subgroup_shuffle_relative : require
// DESIGN's exchange: h and its step in one 64-bit word, read and written by relaxed atomics
// (shaderInt64 and shaderBufferInt64Atomics, enabled at device creation where offered).
#extension GL_EXT_shader_explicit_arithmetic_types_int64 : require
#extension GL_EXT_shader_atomic_int64 : require
// Pass 3 as one persistent dispatch (issue 45; Diamos et al., "Persistent RNNs: Stashing
// Recurrent Weights On-Chip", 2016; docs/design.md, "Passes"). Every time step of a layer run
// in one grid whose workgroups each keep a slice of R in shared memory for the whole run and meet
// at one grid-wide barrier a step (two for a GRU with linear_before_reset = 0). h goes through
// the state buffer, declared nonprivate here (cell.glsl's STATE_COHERENCE): the barrier's
// device-scope release and acquire fences (with availability and visibility) order its accesses
// across workgroups, so every load of h sees what the other workgroups wrote before the barrier.
//
// Same sums as the step kernels, bit for bit: a workgroup computes glsl/step.comp's lanes
// reduction for its rows (lane l sums k = l, l + 32, ... in increasing order from +0, the 32
// lane sums joined by the fixed halving tree 16, 8, 4, 2, 1), from R held in shared memory
// instead of read from R, and updates its cells with cell.glsl's code.
//
// Vulkan promises no progress between workgroups and has no cooperative launch, so the kernel
// finds out which of its workgroups run at once (occupancy discovery, Sorensen et al., OOPSLA
// 2016): each workgroup takes a ticket from a counter while a poll is open; the first holds it
// open until every dispatched workgroup has arrived or WINDOW polls have passed, then closes it.
// Those that arrived are running, and a running workgroup runs to its end, so they can wait for
// each other; those that come later exit. The units are split over the workgroups that
// arrived; where so few arrived that a slice would not fit the shared memory (UNITS_MAX units),
// the dispatch ends with a status the host reads. Every wait is bounded (SPINS polls): a
// barrier not met ends the dispatch with a status too, and every other workgroup ends at its
// next poll of the status. The host then runs the layer again on the step kernels (same bits)
// and uses the persistent kernel no more on that device (src/core/rnn/persistent.cpp).
//
// The sync words (binding 6, zeroed by the run's upload before the dispatch):
//   POLL    tickets taken; bit 31 once the poll is closed
//   COUNT   workgroups that took part + 1, published by the first (0: not yet)
//   ARRIVE  arrivals at grid barriers, over the whole run (words 32 and 64: DESIGN)
//   STATUS  0, or the failures' bits (FEW, LATE, COUNTLESS, CUT)
//   TAKEN   workgroups that took part (the host's diagnostics)
//   DELAYED the polls' delay chain (kept, see POLL_DELAY)
#define GENERAL_ACTIVATIONS
#define STATE_COHERENCE nonprivate
#include "common.glsl"
#include "cell.glsl"

layout(local_size_x_id = 40) in;

layout(constant_id = 40) const uint THREADS = 32;      // invocations: 32 lanes x TY row threads
layout(constant_id = 41) const uint UNITS_MAX = 1;     // units whose rows of R a workgroup holds
layout(constant_id = 42) const uint SPINS = 1048576;   // polls before a wait gives up
layout(constant_id = 43) const uint WINDOW = 2048;     // polls the first workgroup holds the poll open
// 0: every dispatched workgroup takes part without a poll (a test hook: a grid larger than the
// device runs at once then meets its bounded waits).
layout(constant_id = 44) const uint DISCOVERY = 1;
// 1: the barriers and the set-up only, no arithmetic (a profile piece, bench/persistent.py).
layout(constant_id = 45) const uint PIECE = 0;
// How the grid meets (bits): 1 thread 0's release atomic and acquire fence with workgroup-scope
// barriers around them (GPUs: the fences of one invocation instead of every invocation's),
// else device-scope fences in every invocation's barriers (lavapipe, see load()); 2 one arrival
// counter a direction where the slices do not cross directions (a direction's workgroups need
// only its own h), else one for the grid; 4 the cell's inputs of a step loaded before its
// products, so that their latency overlaps the reads of h; 8 a row's lane sums joined by subgroup
// shuffles (the same tree, in registers) where a subgroup is a row thread's 32 lanes (the host
// sets it where the subgroup size is 32; the shader checks gl_SubgroupSize too); 16 no grid
// barrier: each cell's new h (a GRU's r * h) goes to the exchange buffer (binding 7) with its
// step in the same 64-bit word, and a workgroup reads the h it multiplies with R from there,
// polling each word until it holds that step's value, into shared memory (bits 1 and 2 then
// mean nothing). One word a value cannot be read half written, so no fence is needed; two
// slots by the step's parity, since a workgroup writes a step's h only after every workgroup of
// its direction wrote the step before, which each did only after reading the one before that.
layout(constant_id = 47) const uint DESIGN = 0;
// With EXCHANGE: the values of h an invocation reads into shared memory at a step, at most
// (the host's ceil(DIRS * BATCH * HIDDEN / THREADS), at most 32).
layout(constant_id = 48) const uint PER_INVOCATION = 1;
// Dependent integer divisions a poll computes before its load (0 on a GPU). Lavapipe (Mesa 22.3)
// ends every loop of an invocation once its loops have taken 65,535 iterations in all (gallivm's
// loop limiter), and its workgroups' threads may start milliseconds apart on a loaded machine:
// a poll of some microseconds there makes that budget a fraction of a second of waiting. The
// check at the kernel's end (CUT) turns a budget spent into a failed grid instead of a loop cut
// short. (Integers: no float arithmetic outside the layer's, which exact mode's build checks.)
layout(constant_id = 46) const uint POLL_DELAY = 0;

// Read and written by atomics alone.
layout(std430, binding = 6) buffer SyncBuf { uint sync[]; };
// EXCHANGE's words, zeroed by the run's upload: [slot][parity][direction][batch row][unit], slot
// 0 h, 1 a GRU's r * h; the value's bits low, its step (from 1) high. Read and written by
// relaxed atomics alone.
layout(std430, binding = 7) buffer ExchangeBuf { uint64_t exchange[]; };

const uint POLL = 0u, COUNT = 1u, STATUS = 3u, TAKEN = 4u, DELAYED = 5u;
// The arrival counters, each on a 128-byte line of its own (the polls of one do not meet the
// atomics on the other or the status words): the grid's or direction 0's, and direction 1's.
const uint ARRIVE = 32u, ARRIVE1 = 64u;
const bool THREAD0_ATOMICS = (DESIGN & 1u) != 0u;
const bool BY_DIRECTION = (DESIGN & 2u) != 0u;
const bool PREFETCH = (DESIGN & 4u) != 0u;
const bool SHUFFLE_TREE = (DESIGN & 8u) != 0u;
const bool EXCHANGE = (DESIGN & 16u) != 0u;
const uint CLOSED = 0x80000000u;
const uint NONE = 0xFFFFFFFFu;
// STATUS bits: too few arrived, a barrier not met, no count published, a loop cut short.
const uint FEW = 1u, LATE = 2u, COUNTLESS = 4u, CUT = 8u;
const uint TY = THREADS / 32u;
const uint UNITS = DIRS * HIDDEN;                  // (direction, unit) pairs of the layer
const bool TWO_PASS = CELL == 1u && LBR == 0u;
const uint PASS_GATES = TWO_PASS ? 2u : GATES;     // rows a unit has in its widest pass

// The workgroup's rows of R, [unit of the slice][gate][k], as float32 values (float16 ones
// unpacked as step.comp's loads unpack them).
shared float rs[UNITS_MAX * GATES * HIDDEN];
// Lane sums of one round of TY rows: (row of the round, batch row) pair p at [p * 33 + lane] (as
// step.comp's partial), and the reduced sums of the pass, [gate of the pass][unit][batch row].
shared float partial[TY * BATCH * 33u];
shared float sums[PASS_GATES * UNITS_MAX * BATCH];
// EXCHANGE: the h (or r * h) of the step for the directions of the slice, [direction of the
// slice][batch row][unit].
shared float hs[EXCHANGE ? DIRS * BATCH * HIDDEN : 1u];
// EXCHANGE: set when a wait of the workgroup was not met (every invocation then ends).
shared uint missed;
// What thread 0 found out for the workgroup: its ticket (NONE: it takes no part), the workgroups
// that took part, and whether the last barrier was met.
shared uint role[3];

// The sync words are read and written by relaxed device-scope atomics; the ordering of the state
// around a grid barrier comes from the device-scope fences of the workgroup barriers every
// invocation meets before and after thread 0's atomics (gridBarrier). Why not thread 0's own
// acquire and release atomics: lavapipe (Mesa 22.3) makes any operation with memory semantics a
// point where a workgroup's subgroups take turns, and a subgroup that passes more such points
// than the others (thread 0's, polling) is abandoned when the others end. Fences met by every
// invocation keep the points equal, and on any device they order what an acquire and a release
// atomic of thread 0 would.
uint load(uint word)
{
    return atomicLoad(sync[word], gl_ScopeDevice, gl_StorageSemanticsNone, gl_SemanticsRelaxed);
}

void fail(uint bits)
{
    atomicOr(sync[STATUS], bits, gl_ScopeDevice, gl_StorageSemanticsNone, gl_SemanticsRelaxed);
}

// A poll: POLL_DELAY's divisions (their result kept in DELAYED after each wait), then the load.
uint delay = 1u;

void pollDelay()
{
    [[unroll]] for (uint j = 0u; j < POLL_DELAY; j++) delay = (delay * 2654435761u + 12345u) / ((delay & 7u) + 3u);
}

// The chain's result kept after a wait, so that the compiler keeps the divisions.
void keepDelay()
{
    if (POLL_DELAY != 0u) {
        atomicStore(sync[DELAYED], delay, gl_ScopeDevice, gl_StorageSemanticsNone, gl_SemanticsRelaxed);
    }
}

uint poll(uint word)
{
    pollDelay();
    return load(word);
}

// Poll `word` until it reaches `target`: false (and STATUS's `why` bit set) after `bound` polls,
// or at once when another workgroup has failed.
bool waitFor(uint word, uint target, uint why, uint bound)
{
    bool met = false;
    for (uint i = 0u; i < bound && !met; i++) {
        met = poll(word) >= target;
        if (!met && (i & 63u) == 63u && load(STATUS) != 0u) {
            break;
        }
    }
    keepDelay();
    if (!met && load(STATUS) == 0u) {
        fail(why);
    }
    return met;
}

// Whether this invocation's loops still run in full: a loop of a length the compiler does not
// know (the grid's height, 1) must take 2 iterations (see POLL_DELAY).
bool loopsWhole()
{
    uint n = 0u;
    for (uint i = 0u; i <= gl_NumWorkGroups.y; i++) n++;
    return n == gl_NumWorkGroups.y + 1u;
}

// Thread 0: the ticket and the number of workgroups that take part (role[0], role[1]).
void discover()
{
    uint old = atomicAdd(sync[POLL], 1u, gl_ScopeDevice, gl_StorageSemanticsNone, gl_SemanticsRelaxed);
    role[0] = NONE;
    missed = 0u;
    if ((old & CLOSED) != 0u) {
        return;   // arrived after the poll closed: the others may already be waiting
    }
    uint count;
    if (DISCOVERY == 0u) {
        count = gl_NumWorkGroups.x;
    } else if (old == 0u) {
        // The first: the poll stays open until every workgroup has arrived or WINDOW polls.
        uint seen = 1u;
        for (uint i = 0u; i < WINDOW && seen < gl_NumWorkGroups.x; i++) {
            seen = poll(POLL) & ~CLOSED;
        }
        keepDelay();
        count = atomicOr(sync[POLL], CLOSED, gl_ScopeDevice, gl_StorageSemanticsNone, gl_SemanticsRelaxed) & ~CLOSED;
        atomicStore(sync[TAKEN], count, gl_ScopeDevice, gl_StorageSemanticsNone, gl_SemanticsRelaxed);
        atomicStore(sync[COUNT], count + 1u, gl_ScopeDevice, gl_StorageSemanticsNone, gl_SemanticsRelaxed);
    } else {
        if (!waitFor(COUNT, 1u, COUNTLESS, WINDOW + SPINS)) {   // the first's window, then a wait
            return;
        }
        count = load(COUNT) - 1u;
    }
    role[0] = old;
    role[1] = count;
}

// Every workgroup that takes part reaches it the same number of times; `epoch` counts them.
// The workgroup's state writes happen before its first barrier, a device-scope release fence
// (and the state is devicecoherent: each write available at device scope), sequenced before
// thread 0's arrival; whichever thread 0 sees the last arrival meets its second barrier, a
// device-scope acquire fence, before its workgroup loads the state.
const int FENCE_STORAGE = gl_StorageSemanticsBuffer | gl_StorageSemanticsShared;
const int FENCE = gl_SemanticsAcquireRelease | gl_SemanticsMakeAvailable | gl_SemanticsMakeVisible;

// With THREAD0_ATOMICS, the same order by another chain: every invocation's state writes
// happen before thread 0's release (a workgroup barrier with workgroup-scope availability), whose
// device-scope availability extends the chain; thread 0's acquire fence after its wait makes
// them visible at device scope, and the workgroup barrier after it passes that on to every
// invocation. Only thread 0 meets a device-scope fence.
const int WG_FENCE = gl_SemanticsAcquireRelease | gl_SemanticsMakeAvailable | gl_SemanticsMakeVisible;

bool gridBarrier(inout uint epoch, uint members, uint word)
{
    epoch++;
    if (THREAD0_ATOMICS) {
        controlBarrier(gl_ScopeWorkgroup, gl_ScopeWorkgroup, FENCE_STORAGE, WG_FENCE);
        if (gl_LocalInvocationIndex == 0u) {
            atomicAdd(sync[word], 1u, gl_ScopeDevice, gl_StorageSemanticsBuffer,
                      gl_SemanticsRelease | gl_SemanticsMakeAvailable);
            bool met = waitFor(word, epoch * members, LATE, SPINS);
            memoryBarrier(gl_ScopeDevice, gl_StorageSemanticsBuffer, gl_SemanticsAcquire | gl_SemanticsMakeVisible);
            role[2] = met ? 1u : 0u;
        }
        controlBarrier(gl_ScopeWorkgroup, gl_ScopeWorkgroup, FENCE_STORAGE, WG_FENCE);
        return role[2] != 0u;
    }
    controlBarrier(gl_ScopeWorkgroup, gl_ScopeDevice, FENCE_STORAGE, FENCE);
    if (gl_LocalInvocationIndex == 0u) {
        atomicAdd(sync[word], 1u, gl_ScopeDevice, gl_StorageSemanticsNone, gl_SemanticsRelaxed);
        role[2] = waitFor(word, epoch * members, LATE, SPINS) ? 1u : 0u;
    }
    controlBarrier(gl_ScopeWorkgroup, gl_ScopeDevice, FENCE_STORAGE, FENCE);
    return role[2] != 0u;
}

// The slice: units first .. first + mine - 1 of the layer's DIRS * HIDDEN, (direction, unit) =
// (gu / HIDDEN, gu % HIDDEN) for gu = first + i.
struct Slice
{
    uint first, mine;
};

// Every loop that touches shared memory takes the same number of iterations in every invocation
// of the workgroup (the bound uniform, the work guarded inside): under the Vulkan memory model
// each shared access makes its workgroup-scope availability or visibility, which lavapipe
// (Mesa 22.3) turns into a point where a workgroup's subgroups take turns, and a subgroup that
// passes more of them than the others is abandoned when the others end.
void loadR(Slice sl)
{
    for (uint e0 = 0u; e0 < sl.mine * GATES * HIDDEN; e0 += THREADS) {
        uint e = e0 + gl_LocalInvocationIndex;
        if (e < sl.mine * GATES * HIDDEN) {
            uint gu = sl.first + e / (GATES * HIDDEN);
            uint gk = e % (GATES * HIDDEN);   // gate * HIDDEN + k
            uint d = gu / HIDDEN, u = gu % HIDDEN;
            rs[e] = LOADR(R, (d * GH + (gk / HIDDEN) * HIDDEN + u) * HIDDEN + gk % HIDDEN);
        }
    }
}

// The state a pass multiplies with R for direction d at step s (cell.glsl's stateBase, by pass).
uint stateAt(uint pass, uint d, uint s)
{
    return pass == 2u ? G_BASE + PLANE + d * BATCH * HIDDEN : STATE_OFFSET + s * PLANE + d * BATCH * HIDDEN;
}

// The pass's recurrent sums of the slice into sums[]: rounds of TY rows (row = gate of the pass
// * mine + unit of the slice), each row's lane sums as step.comp takes them, then its tree.
void products(uint pass, uint s, Slice sl)
{
    uint lane = gl_LocalInvocationIndex % 32u, ty = gl_LocalInvocationIndex / 32u;
    uint firstGate = pass == 2u ? 2u : 0u;
    uint rows = (pass == 1u ? 2u : (pass == 2u ? 1u : GATES)) * sl.mine;
    bool shuffled = SHUFFLE_TREE && gl_SubgroupSize == 32u;
    for (uint r0 = 0u; r0 < rows; r0 += TY) {
        uint row = r0 + ty;
        float acc[BATCH];
        [[unroll]] for (uint j = 0u; j < BATCH; j++) acc[j] = 0.0;
        {
            // Every row thread takes the loop, one past the pass's rows (the last round where
            // they are not a multiple of TY) on the last row, its sums not kept: the loop's reads
            // are points where lavapipe's subgroups take turns (see loadR), and a subgroup of row
            // threads that skipped it ran ahead of the workgroup's barriers by a few points a
            // step. Without a grid barrier (EXCHANGE) the lag grew until its products of the next
            // rounds read hs[] before stage() wrote it (an LSTM of hidden 20, 80 rows: from step
            // 3, every unit but 12-15, whose rows lie outside those subgroups' rows 16-31, 48-63).
            uint rr = min(row, rows - 1u);
            uint g = rr / sl.mine, lu = rr % sl.mine;
            uint rAt = (lu * GATES + firstGate + g) * HIDDEN;
            uint d = (sl.first + lu) / HIDDEN;
            uint hAt = EXCHANGE ? (d - sl.first / HIDDEN) * BATCH * HIDDEN : stateAt(pass, d, s);
            // Lane l: k = l, l + 32, ... in increasing order (the loop's bound is the lanes').
            for (uint k0 = 0u; k0 < HIDDEN; k0 += 32u) {
                uint k = k0 + lane;
                if (k < HIDDEN) {
                    float w = rs[rAt + k];
                    [[unroll]] for (uint j = 0u; j < BATCH; j++)
                        acc[j] = ADD(acc[j], MUL(w, EXCHANGE ? hs[hAt + j * HIDDEN + k] : LOADF(S, hAt + j * HIDDEN + k)));
                }
            }
        }
        if (shuffled) {
            // Lane l takes lane l + stride's value: v[l] + v[l + stride] for l < stride, the
            // tree below; every lane of the subgroup takes part (rows past the pass too).
            [[unroll]] for (uint j = 0u; j < BATCH; j++) {
                float v = acc[j];
                [[unroll]] for (uint stride = 16u; stride > 0u; stride >>= 1u)
                    v = ADD(v, subgroupShuffleDown(v, stride));
                if (lane == 0u && row < rows) sums[row * BATCH + j] = v;
            }
            continue;
        }
        if (row < rows) {
            [[unroll]] for (uint j = 0u; j < BATCH; j++) partial[(ty * BATCH + j) * 33u + lane] = acc[j];
        }
        barrier();
        uint t = gl_LocalInvocationIndex;
        if (t < TY * BATCH && r0 + t / BATCH < rows) {
            float v[32];
            [[unroll]] for (uint l = 0u; l < 32u; l++) v[l] = partial[t * 33u + l];
            [[unroll]] for (uint stride = 16u; stride > 0u; stride >>= 1u)
                [[unroll]] for (uint l = 0u; l < stride; l++) v[l] = ADD(v[l], v[l + stride]);
            sums[(r0 + t / BATCH) * BATCH + t % BATCH] = v[0];
        }
        barrier();
    }
    if (shuffled) {
        barrier();
    }
}

// EXCHANGE's word of (slot, parity) for direction d, batch row b, unit u.
uint exchangeAt(uint slot, uint parity, uint d, uint b, uint u)
{
    return ((slot * 2u + parity) * DIRS + d) * BATCH * HIDDEN + b * HIDDEN + u;
}

// What pass `pass` of step s multiplies with R comes from: h of step s (slot 0), or the r * h
// of step s (slot 1); its words carry step s + 1 for r * h, s for h (h of step 0 is the state
// pass's, read from the state buffer).
uint exchangeSlot(uint pass) { return pass == 2u ? 1u : 0u; }
uint exchangeTag(uint pass, uint s) { return pass == 2u ? s + 1u : s; }

// EXCHANGE: the h (r * h) that pass `pass` of step s multiplies with R, for the slice's
// directions, into hs[], after a workgroup barrier. Each invocation reads its words at once, then polls those not yet of
// the step (SPINS polls in all, the status checked every 64); the values go to shared memory
// after the polls, in a loop of the same length in every invocation (see loadR). False when a
// wait of the workgroup was not met.
bool stage(uint pass, uint s, Slice sl)
{
    // Every invocation's cells of the pass before written (and published) before any polls:
    // lavapipe runs a workgroup's subgroups in turn, switching only at such points, and a
    // subgroup polling for another workgroup's values would otherwise keep the subgroups whose
    // cells that workgroup waits for from running.
    barrier();
    uint d0 = sl.first / HIDDEN;
    uint n = ((sl.first + sl.mine - 1u) / HIDDEN - d0 + 1u) * BATCH * HIDDEN;
    uint slot = exchangeSlot(pass), tag = exchangeTag(pass, s);
    bool fromState = pass != 2u && s == 0u;
    uint64_t x[PER_INVOCATION];
    uint pending = 0u;
    [[unroll]] for (uint q = 0u; q < PER_INVOCATION; q++) {
        uint e = q * THREADS + gl_LocalInvocationIndex;
        x[q] = 0ul;
        if (e < n) {
            uint i = d0 * BATCH * HIDDEN + e;   // (direction, batch row, unit)
            if (fromState) {
                x[q] = uint64_t(S[STATE_OFFSET + i]);
            } else {
                x[q] = atomicLoad(exchange[exchangeAt(slot, s % 2u, 0u, 0u, 0u) + i], gl_ScopeDevice,
                                  gl_StorageSemanticsNone, gl_SemanticsRelaxed);
                if (uint(x[q] >> 32) != tag) pending |= 1u << q;
            }
        }
    }
    for (uint p = 0u; pending != 0u && p < SPINS; p++) {
        if ((p & 63u) == 63u && load(STATUS) != 0u) break;
        pollDelay();
        [[unroll]] for (uint q = 0u; q < PER_INVOCATION; q++) {
            if ((pending & (1u << q)) != 0u) {
                uint i = d0 * BATCH * HIDDEN + q * THREADS + gl_LocalInvocationIndex;
                x[q] = atomicLoad(exchange[exchangeAt(slot, s % 2u, 0u, 0u, 0u) + i], gl_ScopeDevice,
                                  gl_StorageSemanticsNone, gl_SemanticsRelaxed);
                if (uint(x[q] >> 32) == tag) pending &= ~(1u << q);
            }
        }
    }
    keepDelay();
    if (pending != 0u) {
        if (load(STATUS) == 0u) fail(LATE);
        missed = 1u;
    }
    [[unroll]] for (uint q = 0u; q < PER_INVOCATION; q++) {
        uint e = q * THREADS + gl_LocalInvocationIndex;
        if (e < n) hs[e] = uintBitsToFloat(uint(x[q]));
    }
    barrier();
    return missed == 0u;
}

// EXCHANGE: a cell's new value (h, or r * h after pass 1) with its step, for the next pass.
void publish(uint pass, uint d, uint u, uint b, uint s, float v)
{
    uint slot = pass == 1u ? 1u : 0u;
    uint parity = pass == 1u ? s % 2u : (s + 1u) % 2u;
    atomicStore(exchange[exchangeAt(slot, parity, d, b, u)], (uint64_t(s + 1u) << 32) | uint64_t(floatBitsToUint(v)),
                gl_ScopeDevice, gl_StorageSemanticsNone, gl_SemanticsRelaxed);
}

// The slice's cell of this invocation in a pass where every cell has its own invocation
// (PREFETCH's case): c = (batch row) * mine + (unit of the slice), as stepPass's loop.
const bool ONE_CELL_EACH = PREFETCH && UNITS_MAX * BATCH <= THREADS;

// One pass of step s: the products, then the cells of the slice (cell.glsl's update, the pass a
// constant where the callers below inline it). With ONE_CELL_EACH the cell's inputs are loaded
// first (cell.glsl's cellLoad: the same values, so the same bits).
bool stepPass(uint pass, uint s, Slice sl)
{
    if (PIECE == 1u) {
        return true;
    }
    if (EXCHANGE && !stage(pass, s, sl)) {
        return false;
    }
    uint gates = pass == 1u ? 2u : (pass == 2u ? 1u : GATES);
    if (ONE_CELL_EACH) {
        uint c = gl_LocalInvocationIndex;
        bool mine = c < sl.mine * BATCH;
        uint lu = mine ? c % sl.mine : 0u, b = mine ? c / sl.mine : 0u;
        uint gu = sl.first + lu;
        CellIn ci;
        if (mine) {
            ci = cellLoad(pass, gu / HIDDEN, gu % HIDDEN, b, s);
        }
        products(pass, s, sl);
        if (mine) {
            vec4 rec = vec4(0.0);
            [[unroll]] for (uint g = 0u; g < 4u; g++)
                if (g < gates) rec[g] = sums[(g * sl.mine + lu) * BATCH + b];
            float v = cellUpdate(pass, gu / HIDDEN, gu % HIDDEN, b, s, rec, ci);
            if (EXCHANGE) publish(pass, gu / HIDDEN, gu % HIDDEN, b, s, v);
        }
        return true;
    }
    products(pass, s, sl);
    for (uint c0 = 0u; c0 < sl.mine * BATCH; c0 += THREADS) {
        uint c = c0 + gl_LocalInvocationIndex;
        if (c >= sl.mine * BATCH) {
            continue;
        }
        uint lu = c % sl.mine, b = c / sl.mine;
        uint gu = sl.first + lu;
        vec4 rec = vec4(0.0);
        [[unroll]] for (uint g = 0u; g < 4u; g++)
            if (g < gates) rec[g] = sums[(g * sl.mine + lu) * BATCH + b];
        float v = updateCellIn(pass, gu / HIDDEN, gu % HIDDEN, b, s, rec);
        if (EXCHANGE) publish(pass, gu / HIDDEN, gu % HIDDEN, b, s, v);
    }
    return true;
}

void main()
{
    if (gl_LocalInvocationIndex == 0u) {
        discover();
    }
    barrier();
    uint ticket = role[0], count = role[1];
    if (ticket == NONE) {
        return;
    }
    uint upw = (UNITS + count - 1u) / count;       // units a workgroup
    uint members = (UNITS + upw - 1u) / upw;        // workgroups that take part
    if (upw > UNITS_MAX) {
        if (gl_LocalInvocationIndex == 0u) fail(FEW);
        return;
    }
    if (ticket >= members) {
        return;
    }
    Slice sl = Slice(ticket * upw, min(upw, UNITS - ticket * upw));
    // BY_DIRECTION: where every slice lies in one direction, a direction's workgroups meet on
    // their own counter.
    uint word = ARRIVE;
    if (BY_DIRECTION && DIRS == 2u && HIDDEN % upw == 0u) {
        members = HIDDEN / upw;
        word = ticket < members ? ARRIVE : ARRIVE1;
    }
    loadR(sl);
    barrier();
    uint epoch = 0u, steps = pc.step;   // cell.glsl's push constant: here the number of steps
    for (uint s = 0u; s < steps; s++) {
        if (TWO_PASS) {
            if (!stepPass(1u, s, sl)) return;
            if (!EXCHANGE && !gridBarrier(epoch, members, word)) return;
            if (!stepPass(2u, s, sl)) return;
        } else {
            if (!stepPass(0u, s, sl)) return;
        }
        // The dispatch's end orders the last step's writes before the output passes.
        if (!EXCHANGE && s + 1u < steps && !gridBarrier(epoch, members, word)) return;
    }
    if (!loopsWhole()) {
        fail(CUT);
    }
}
