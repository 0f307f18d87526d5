// recordPlan (recording.hpp): one Recording per plan, its stages named after what they record.

#include "rnn/recording.hpp"

#include <algorithm>
#include <array>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "base/errors.hpp"
#include "rnn/kernel_choice.hpp"
#include "rnn/persistent.hpp"
#include "vk/memory.hpp"
#include "vk/program.hpp"
#include "vk/sequence.hpp"
#include "rnn/shaders.hpp"
#include "rnn/specialization.hpp"
#include "rnn/variants.hpp"

namespace ortops {

ScratchSizes
scratchSizes(const Spec& s, uint32_t seq, uint32_t batch, StepKernel kernel)
{
    uint64_t plane = static_cast<uint64_t>(s.dirs) * batch * s.hidden;
    uint64_t extra = s.cell->extraStatePlanes(s.lbr) * plane;
    uint64_t transposed = kernel == StepKernel::Batched
                            ? static_cast<uint64_t>(transposedPlanes(s.gruTwoPass())) * s.dirs * 32 *
                                classesLength(s.hidden) * paddedBatch(batch)
                            : 0;
    return { 4ull * s.dirs * seq * batch * s.gates * s.hidden, 4 * ((seq + 1) * plane + extra + transposed) };
}

namespace {

using Pass = std::pair<std::shared_ptr<Program>, std::array<uint64_t, 3>>;

Constants
join(Constants a, const Constants& b)
{
    a.insert(a.end(), b.begin(), b.end());
    return a;
}

struct Recording
{
    const RecordingSource& L;
    const Spec& s;
    PlanKey key;
    const RunInputs& in;
    const LayerSettings& settings;
    StepKernel stepKernel;
    StepKernel fallbackKernel;   // a persistent plan's second recording
    Limits limits;
    // The weights as uploaded when recording began (RB included: record() uploads it first);
    // an immutable set, read while another plan's recording may upload (weights.hpp).
    std::shared_ptr<const WeightSet> weights;
    std::shared_ptr<Plan> plan = std::make_shared<Plan>();
    std::shared_ptr<Buffer> xw, st, lensB;
    uint32_t xwOff = 0, stOff = 0;   // in floats
    std::array<std::shared_ptr<Buffer>, 3> outs;
    PersistentVariant persistent;   // the persistent kernel's split, where stepKernel is it

    Recording(const RecordingSource& layer, const PlanKey& k, const RunInputs& inputs, const PlanPool& pool,
              const Limits& l, StepKernel fallback)
      : L(layer)
      , s(layer.spec)
      , key(k)
      , in(inputs)
      , settings(pool.settings)
      , stepKernel(pool.stepKernel)
      , fallbackKernel(fallback)
      , limits(l)
      , weights(layer.weights.snapshot())
    {
    }

    // ---------------------------------------------------------------- buffers and programs

    std::shared_ptr<Buffer> storage(const std::string& what, uint64_t nbytes)
    {
        limits.checkBinding(what, nbytes);
        auto b = std::make_shared<Buffer>(L.ctx, nbytes, "storage");
        plan->keep.push_back(b);
        return b;
    }
    // A scratch region: the caller's (checked: a non-negative multiple of 4 bytes, inside its
    // buffer, whose whole size is bound) or one the plan owns.
    std::shared_ptr<Buffer> scratch(const std::string& what, const std::optional<ScratchRegion>& region,
                                    uint64_t nbytes, uint32_t& offsetFloats)
    {
        if (!region) {
            offsetFloats = 0;
            return storage(what, nbytes);
        }
        const ScratchRegion& r = *region;
        if (!r.buffer) {
            throw InputError(s.op + ": " + what + " region has no buffer");
        }
        if (r.offset % 4) {
            throw InputError(s.op + ": " + what + " offset must be a non-negative multiple of 4 bytes, got " +
                             std::to_string(r.offset));
        }
        if (r.offset + nbytes > r.buffer->bytes) {
            throw InputError(s.op + ": " + what + " needs " + std::to_string(nbytes) + " bytes at offset " +
                             std::to_string(r.offset) + ", but its buffer holds " + std::to_string(r.buffer->bytes));
        }
        if (r.buffer->ctx != L.ctx) {
            throw InputError(s.op + ": " + what + " buffer belongs to another device's context");
        }
        limits.checkBinding(what + " (its whole buffer is bound)", r.buffer->bytes);
        if (r.offset / 4 > 0xFFFFFFFFull) {
            throw UnsupportedLayerError(s.op + ": " + what + " offset is beyond 2^32 floats");
        }
        offsetFloats = static_cast<uint32_t>(r.offset / 4);
        plan->keep.push_back(r.buffer);
        return r.buffer;
    }
    std::shared_ptr<Buffer> io(const std::string& name, uint64_t elements)
    {
        uint64_t nbytes = elements * s.item;
        limits.checkBinding(name, nbytes);
        auto b = std::make_shared<Buffer>(L.ctx, nbytes, "device");
        plan->keep.push_back(b);
        return b;
    }
    std::shared_ptr<Program> program(const std::string& shader, std::vector<std::shared_ptr<Buffer>> buffers,
                                     uint32_t pushWords, const Constants& constants)
    {
        auto p = std::make_shared<Program>(L.ctx, spirv(shader, s.float16, s.mode), buffers,
                                           pack(shader, constants), pushWords);
        plan->keep.push_back(p);
        return p;
    }
    // The weight `name`, or the placeholder for one the layer lacks.
    std::shared_ptr<Buffer> weight(const char* name) const
    {
        auto it = weights->find(name);
        return it == weights->end() ? L.weights.placeholder() : it->second;
    }
    std::shared_ptr<Buffer> orPlaceholder(const std::shared_ptr<Buffer>& b) const
    {
        return b ? b : L.weights.placeholder();
    }

    uint64_t plane() const { return static_cast<uint64_t>(s.dirs) * key.batch * s.hidden; }

    Constants shape() const
    {
        return { { "DIRS", s.dirs }, { "BATCH", key.batch }, { "HIDDEN", s.hidden }, { "SEQ", key.seq },
                 { "LAYOUT", s.layout } };
    }
    Constants transposed() const
    {
        uint32_t extra = s.cell->extraStatePlanes(s.lbr);
        return { { "NI", classesLength(s.hidden) }, { "B32", paddedBatch(key.batch) },
                 { "HT_OFFSET", static_cast<uint32_t>(stOff + (key.seq + 1 + extra) * plane()) } };
    }

    // The scratch regions, the input and output buffers and the readback buffers.
    void allocate()
    {
        ScratchSizes sizes = scratchSizes(s, key.seq, key.batch, stepKernel);
        xw = scratch("the input projection scratch", in.xwScratch, sizes.xw, xwOff);
        st = scratch("the state scratch", in.stateScratch, sizes.state, stOff);
        plan->x = io("X", static_cast<uint64_t>(key.seq) * key.batch * s.input);
        if (key.hasLens) {
            plan->lens = std::make_shared<Buffer>(L.ctx, 4ull * key.batch, "device");
            plan->keep.push_back(plan->lens);
        }
        if (key.hasH0) {
            plan->h0 = io("initial_h", plane());
        }
        if (key.hasC0) {
            plan->c0 = io("initial_c", plane());
        }
        for (uint32_t i = 0; i < s.cell->outputCount; i++) {
            if (!key.outputs[i]) {
                continue;
            }
            uint64_t n = i == 0 ? static_cast<uint64_t>(key.seq) * plane() : plane();
            outs[i] = io(std::string(s.cell->outputs[i]), n);
            plan->readback[i] = std::make_shared<HostBuffer>(L.ctx, outs[i]->bytes, false);
            plan->keep.push_back(plan->readback[i]);
        }
        lensB = orPlaceholder(plan->lens);
        if (stepKernel == StepKernel::Persistent) {
            // The grid's sync words, zeroed by every run's upload, and where the host reads them.
            uint32_t zeros[PERSISTENT_SYNC_WORDS] = {};
            plan->sync = std::make_shared<Buffer>(L.ctx, sizeof zeros, "device");
            plan->sync->write(zeros, sizeof zeros, 0);
            plan->syncStatus = std::make_shared<HostBuffer>(L.ctx, sizeof zeros, false);
            plan->keep.push_back(plan->sync);
            plan->keep.push_back(plan->syncStatus);
            // The exchange's words, zeroed by every run's upload too: two slots (h, a GRU's r * h)
            // by two parities of every (direction, batch row, unit); one unused word for a
            // design without it (its binding stays valid).
            persistent = persistentVariant(persistentShape(s, key.batch), persistentDevice(L.device), settings.variants);
            std::vector<uint64_t> none(persistent.exchanges() ? size_t(4) * plane() : 1, 0);
            plan->exchange = std::make_shared<Buffer>(L.ctx, none.size() * sizeof(uint64_t), "device");
            plan->exchange->write(none.data(), none.size() * sizeof(uint64_t), 0);
            plan->keep.push_back(plan->exchange);
        }
    }

    // ---------------------------------------------------------------- stage 1: projection, state set-up

    // The input projection's program and its tile (rows and columns of Xw a workgroup).
    struct Projection
    {
        std::shared_ptr<Program> program;
        uint32_t rowTile, colTile;
    };
    Projection projectionProgram()
    {
        const uint32_t G = s.gates, H = s.hidden, D = s.dirs;
        Constants constants = { { "N", G * H }, { "K", s.input }, { "SEQ", key.seq }, { "BATCH", key.batch },
                                { "LAYOUT", s.layout }, { "XW_OFFSET", xwOff } };
        if (useCoopmat(s, L.device, *L.ctx, settings.coopmat)) {
            plan->projection = "input_projection_coopmat";
            return { program("input_projection_coopmat", { plan->x, weight("W"), xw }, 2, constants), COOPMAT_TILE,
                     COOPMAT_TILE };
        }
        if (cpuProjection(L.device.type == "cpu", L.device.subgroupSize, settings.variants)) {
            // A column a thread, every row in one workgroup (glsl/input_projection_cpu.comp).
            CpuProjection v = cpuProjectionVariant(s.input, settings.variants);
            plan->projection = "input_projection_cpu";
            auto p = program("input_projection_cpu", { plan->x, weight("W"), xw }, 2,
                             join(constants, { { "MR", v.rows }, { "THREADS", v.threads }, { "W_REGS", v.wRegs },
                                         { "LANES", L.device.subgroupSize }, { "NC", v.columns } }));
            return { p, std::max<uint32_t>(1, key.steps * key.batch), v.threads * v.columns };
        }
        uint32_t tpt = projectionTpt(static_cast<uint64_t>(key.steps) * key.batch * G * H * D,
                                     settings.variants.largeProjection);
        constants.push_back({ "TPT", tpt });
        if (!s.float16 && s.mode != Mode::Exact) {
            // The float32 attempts of issue 32, item 5 (what ships unless asked: 16 x 1).
            ProjectionSlices slices = projectionSlices(tpt, s.input, L.device.maxSharedMemory, settings.variants);
            constants.push_back({ "KT", slices.kt });
            constants.push_back({ "STAGES", slices.stages });
        }
        plan->projection = "input_projection";
        uint32_t tile = projectionTile(tpt);
        return { program("input_projection", { plan->x, weight("W"), xw }, 2, constants), tile, tile };
    }

    std::shared_ptr<Program> stateInitProgram()
    {
        Constants constants = join(shape(), { { "HAS_H0", key.hasH0 }, { "HAS_C0", key.hasC0 },
                                              { "HAS_CELL", s.cell->hasInput("initial_c") },
                                              { "STATE_OFFSET", stOff } });
        if (stepKernel == StepKernel::Batched) {
            constants = join(join(constants, { { "TRANSPOSED", 1 } }), transposed());
        }
        return program("state_init", { orPlaceholder(plan->h0), orPlaceholder(plan->c0), st }, 0, constants);
    }

    // Inputs uploaded, then the projection and the state set-up (timestamps 0 and 1 around).
    void recordProjection(Sequence& seq, const Projection& gemm, const std::shared_ptr<Program>& init)
    {
        // Write-after-read against the previous run's last reads of the input buffers.
        seq.barrier("compute", "transfer");
        std::vector<std::shared_ptr<Buffer>> inputs{ plan->x };
        for (const auto& b : { plan->lens, plan->h0, plan->c0 }) {
            if (b) {
                inputs.push_back(b);
            }
        }
        if (stepKernel == StepKernel::Persistent) {
            inputs.push_back(plan->sync);
            if (persistent.exchanges()) {
                inputs.push_back(plan->exchange);
            }
        }
        seq.upload(inputs);
        seq.barrier("transfer", "compute");
        if (plan->timestamps) {
            seq.timestamp(0);
        }
        uint32_t maxGroups = limits.maxGroups;
        // Row tiles in dispatches of at most maxGroups (the shader offsets by tile0).
        uint64_t rowTiles = ceilDiv(static_cast<uint64_t>(key.steps) * key.batch, gemm.rowTile);
        for (uint64_t tile0 = 0; tile0 < rowTiles; tile0 += maxGroups) {
            seq.dispatch(gemm.program, static_cast<uint32_t>(ceilDiv(s.gates * s.hidden, gemm.colTile)),
                         static_cast<uint32_t>(std::min<uint64_t>(maxGroups, rowTiles - tile0)), s.dirs,
                         { key.steps * key.batch, static_cast<uint32_t>(tile0) });
        }
        seq.dispatch(init, gridGroups(plane(), maxGroups), 1, 1, {});
        seq.barrier("compute", "compute");
        if (plan->timestamps) {
            seq.timestamp(1);
        }
    }

    // ---------------------------------------------------------------- stage 2: steps

    // The constants every step kernel takes.
    Constants stepConstants() const
    {
        Constants common = {
            { "CELL", s.cell->code }, { "HAS_BIAS", s.hasBias }, { "HAS_PEEP", s.hasPeepholes },
            { "HAS_CLIP", s.clip.has_value() }, { "CLIP_BITS", s.clip ? floatBits(*s.clip) : 0u },
            { "INPUT_FORGET", s.inputForget }, { "LBR", s.lbr }, { "HAS_LENS", key.hasLens },
            { "HIDDEN", s.hidden }, { "BATCH", key.batch }, { "SEQ", key.seq }, { "DIRS", s.dirs },
            { "REVERSE0", s.reverse }, { "XW_OFFSET", xwOff }, { "STATE_OFFSET", stOff },
        };
        bool general = activationConstants(s, common);
        common.push_back({ "GENERAL", general });
        return common;
    }

    // 16 units x the pass's gates x 16 NBT batch rows a workgroup, on the matrix units.
    Pass coopmatPass(uint32_t pass, const Constants& common)
    {
        uint32_t nbt = coopmatBlocks(s.hidden, key.batch, s.dirs, settings.variants);
        std::array<uint64_t, 3> groups{ ceilDiv(s.hidden, 16), s.dirs, ceilDiv(key.batch, 16 * nbt) };
        limits.checkGroups("the step pass", groups);
        auto p = program("step_coopmat", { xw, weight("R"), weight("B"), weight("P"), lensB, st }, 1,
                         join(common, { { "PASS", pass }, { "NBT", nbt } }));
        return { p, groups };
    }

    // v4 (step_batched, a batch row a lane) or v5 (step_tiled, TB rows a thread): the same
    // layouts and constants, v5 with its rows per thread; the tile by element type and batch
    // (variants.hpp's table, or the settings' overrides).
    Pass batchedPass(uint32_t pass, const Constants& common)
    {
        BatchedVariant v = batchedVariant(s.hidden, key.batch, s.float16, settings.variants);
        std::array<uint64_t, 3> groups{ ceilDiv(s.hidden, v.units()), s.dirs, ceilDiv(key.batch, 32) };
        limits.checkGroups("the step pass", groups);
        Constants tiling = { { "PASS", pass }, { "UPT", v.upt }, { "BY", v.by }, { "PREFETCH", v.prefetch },
                             { "KSPLIT", v.ksplit } };
        if (v.rows > 1) {
            tiling.push_back({ "TB", v.rows });
        }
        auto p = program(std::string(v.shader()), { xw, weight("RB"), weight("B"), weight("P"), lensB, st }, 1,
                         join(join(common, tiling), transposed()));
        return { p, groups };
    }

    Pass lanesPass(uint32_t pass, uint32_t gatesInPass, const Constants& common)
    {
        StepVariant v = stepVariant(key.batch, gatesInPass, s.float16, s.mode);
        std::array<uint64_t, 3> groups{ ceilDiv(s.hidden, v.units), s.dirs, ceilDiv(key.batch, v.nb) };
        limits.checkGroups("the step pass", groups);
        auto p = program("step", { xw, weight("R"), weight("B"), weight("P"), lensB, st }, 1,
                         join(common, { { "PASS", pass }, { "NB", v.nb }, { "UNITS", v.units },
                                        { "ROWS", v.rows }, { "TY", v.ty() }, { "RPT", v.rpt } }));
        return { p, groups };
    }

    // glsl/step_sequence.comp's one program for every step (and both passes of a GRU step):
    // NB batch rows a workgroup, R as RB.
    Pass sequencePass(const Constants& common)
    {
        SequenceVariant v = sequenceVariant(s.hidden, key.batch, s.gruTwoPass(), L.device.type == "cpu",
                                            L.device.maxWorkgroupInvocations, settings.variants,
                                            L.device.subgroupSize);
        std::array<uint64_t, 3> groups{ ceilDiv(key.batch, v.nb), s.dirs, 1 };
        limits.checkGroups("the whole-sequence step pass", groups);
        auto p = program("step_sequence", { xw, weight("RB"), weight("B"), weight("P"), lensB, st }, 1,
                         join(common, { { "THREADS", v.threads }, { "NB", v.nb }, { "NI", classesLength(s.hidden) },
                                        { "R_REGS", v.rRegs }, { "LANES", v.lanes },
                                        { "UPT", v.units } }));
        return { p, groups };
    }

    // glsl/step_persistent.comp's one program for every step: at most a workgroup a compute unit,
    // R in their shared memory, the sync words at binding 6, the exchange at 7 (persistent.hpp).
    Pass persistentPass(const Constants& common)
    {
        const PersistentVariant& v = persistent;
        std::array<uint64_t, 3> groups{ v.groups, 1, 1 };
        limits.checkGroups("the persistent step pass", groups);
        auto p = program("step_persistent",
                         { xw, weight("R"), weight("B"), weight("P"), lensB, st, plan->sync, plan->exchange }, 1,
                         join(common, { { "THREADS", v.threads }, { "UNITS_MAX", v.unitsMax }, { "SPINS", v.spins },
                                        { "WINDOW", v.window }, { "DISCOVERY", v.discovery },
                                        { "PIECE", v.piece }, { "POLL_DELAY", v.pollDelay },
                                        { "DESIGN", v.design }, { "PER_INVOCATION", v.perInvocation } }));
        return { p, groups };
    }

    // One step pass's program and grid: the one place that knows each step kernel.
    Pass stepProgram(uint32_t pass, uint32_t gatesInPass, const Constants& common)
    {
        switch (stepKernel) {
            case StepKernel::Persistent:
                return persistentPass(common);
            case StepKernel::Sequence:
                return sequencePass(common);
            case StepKernel::Coopmat:
                return coopmatPass(pass, common);
            case StepKernel::Batched:
                return batchedPass(pass, common);
            case StepKernel::Lanes:
                break;
        }
        return lanesPass(pass, gatesInPass, common);
    }

    std::vector<Pass> stepPrograms()
    {
        Constants common = stepConstants();
        plan->steps = stepKernel == StepKernel::Batched
                        ? std::string(batchedVariant(s.hidden, key.batch, s.float16, settings.variants).shader())
                        : std::string(stepKernelName(stepKernel));
        std::vector<Pass> passes;
        for (auto [pass, gatesInPass] : stepPasses(s.gruTwoPass(), s.gates)) {
            passes.push_back(stepProgram(pass, gatesInPass, common));
            if (wholeRun()) {
                break;   // one kernel runs both passes of a GRU step
            }
        }
        return passes;
    }

    // Whether the step kernel walks every step in one dispatch.
    bool wholeRun() const { return stepKernel == StepKernel::Sequence || stepKernel == StepKernel::Persistent; }

    void recordSteps(Sequence& seq, const std::vector<Pass>& passes)
    {
        // The whole-sequence and persistent kernels walk every step in their one dispatch (push
        // constant: the step count); the step kernels take a dispatch per step and pass.
        bool whole = wholeRun();
        for (uint32_t step = 0; step < (whole ? std::min<uint32_t>(key.steps, 1) : key.steps); step++) {
            for (auto& [prog, groups] : passes) {
                seq.dispatch(prog, static_cast<uint32_t>(groups[0]), static_cast<uint32_t>(groups[1]),
                             static_cast<uint32_t>(groups[2]), { whole ? key.steps : step });
                seq.barrier("compute", "compute");
            }
        }
        if (plan->timestamps) {
            seq.timestamp(2);
        }
    }

    // ---------------------------------------------------------------- stage 3: outputs

    // A program for each output asked for (null for the others).
    std::array<std::shared_ptr<Program>, 3> outputPrograms()
    {
        std::array<std::shared_ptr<Program>, 3> progs;
        for (uint32_t i = 0; i < 3; i++) {
            if (!outs[i]) {
                continue;
            }
            Constants c = join(shape(), { { "HAS_LENS", key.hasLens }, { "STATE_OFFSET", stOff } });
            progs[i] = i == 0 ? program("output_sequence", { st, lensB, outs[i] }, 0,
                                        join(c, { { "REVERSE0", s.reverse } }))
                              : program("output_state", { st, lensB, outs[i] }, 1,
                                        join(c, { { "CELL_STATE", i == 2 }, { "ZERO_EMPTY", 1 } }));
        }
        return progs;
    }

    void recordOutputs(Sequence& seq, const std::array<std::shared_ptr<Program>, 3>& progs)
    {
        for (uint32_t i = 0; i < 3; i++) {
            if (!progs[i]) {
                continue;
            }
            if (i == 0) {
                uint64_t words = ceilDiv(static_cast<uint64_t>(key.seq) * plane() * s.item, 4);
                seq.dispatch(progs[i], gridGroups(words, limits.maxGroups), 1, 1, {});
            } else {
                uint64_t words = ceilDiv(plane() * s.item, 4);
                seq.dispatch(progs[i], gridGroups(words, limits.maxGroups), 1, 1, { key.steps });
            }
        }
        if (plan->timestamps) {
            seq.timestamp(3);
        }
        // Results go to host-cached memory (fast to read), then the end-of-run marker that
        // eval() polls; its barriers make the copies visible to the host.
        seq.barrier("compute", "transfer");
        for (uint32_t i = 0; i < 3; i++) {
            if (outs[i]) {
                seq.copy(outs[i], plan->readback[i], 0, 0, outs[i]->bytes);
            }
        }
        if (stepKernel == StepKernel::Persistent) {
            seq.copy(plan->sync, plan->syncStatus, 0, 0, plan->sync->bytes);
        }
        seq.finish();
    }

    // ---------------------------------------------------------------- the sequences

    // Every program of one sequence (for the current stepKernel). All are made before any is
    // recorded: a program whose pipeline is new makes it on a thread of its own (program.hpp),
    // so a plan's shaders compile at the same time, and recording waits for each in turn.
    struct Programs
    {
        Projection gemm;
        std::shared_ptr<Program> init;
        std::vector<Pass> passes;
        std::array<std::shared_ptr<Program>, 3> outputs;
    };
    Programs programs()
    {
        Projection gemm = projectionProgram();
        auto init = stateInitProgram();
        std::vector<Pass> passes = stepPrograms();
        return { gemm, init, std::move(passes), outputPrograms() };
    }

    std::shared_ptr<Sequence> recordSequence(const Programs& p)
    {
        auto seq = std::make_shared<Sequence>(L.ctx, plan->timestamps ? 4 : 0);
        recordProjection(*seq, p.gemm, p.init);
        recordSteps(*seq, p.passes);
        recordOutputs(*seq, p.outputs);
        return seq;
    }

    std::shared_ptr<Plan> run()
    {
        allocate();
        plan->timestamps = settings.timestamps && L.device.timestamps;
        Programs made = programs();
        if (stepKernel != StepKernel::Persistent) {
            plan->sequence = recordSequence(made);
            return plan;
        }
        // And the same run on the step kernels, on the same buffers, for a grid that fails:
        // its programs made before either sequence is recorded, so that they compile beside
        // the persistent kernel's.
        std::string steps = plan->steps;
        stepKernel = fallbackKernel;
        Programs fallbackPrograms = programs();
        plan->fallbackSteps = plan->steps;
        plan->steps = steps;
        stepKernel = StepKernel::Persistent;
        plan->sequence = recordSequence(made);
        // Its waits are bounded: a run still going after the timeout will not end.
        plan->sequence->setFenceTimeout(L.device.type == "cpu" ? PERSISTENT_CPU_FENCE_NS : PERSISTENT_FENCE_NS);
        stepKernel = fallbackKernel;
        plan->fallback = recordSequence(fallbackPrograms);
        stepKernel = StepKernel::Persistent;
        return plan;
    }
};

} // namespace

std::shared_ptr<Plan>
recordPlan(const RecordingSource& layer, const PlanKey& key, const RunInputs& in, const PlanPool& pool,
           const Limits& limits, StepKernel fallback)
{
    return Recording(layer, key, in, pool, limits, fallback).run();
}

} // namespace ortops
