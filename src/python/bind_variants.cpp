// The kernel-variant heuristics (variants.hpp) for ortops.variants and the tools: each takes the VariantSettings in force (bind_settings.cpp),
// so Python asks the one native rule instead of mirroring it.
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>

#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include "rnn/persistent.hpp"
#include "rnn/variants.hpp"

namespace py = pybind11;

namespace ortops {

namespace {

// The batched step kernels' defaults, as ortops.variants.batched_tiles reads them.
py::dict
batchedTables()
{
    py::list rows;
    for (const auto& r : BATCHED_TILES) {
        const BatchedTile& t = r.tile;
        py::object below = r.belowHidden == ANY_HIDDEN ? py::object(py::none()) : py::int_(r.belowHidden);
        rows.append(py::make_tuple(r.float16 ? "float16" : "float32", r.fromBatch, r.fromHidden, below,
                                   py::make_tuple(t.upt, t.by, t.prefetch, t.ksplit, t.rows)));
    }
    auto fromRules = [](const auto& table) {
        py::list out;
        for (const auto& r : table) {
            out.append(py::make_tuple(r.fromHidden, r.batch));
        }
        return out;
    };
    py::dict d;
    d["batched_from"] = fromRules(BATCHED_FROM);
    d["batched_from_table"] = BATCHED_FROM_TABLE;
    d["coopmat_steps_from"] = fromRules(COOPMAT_STEPS_FROM);
    d["coopmat_steps_table"] = COOPMAT_STEPS_TABLE;
    d["coopmat_pair_groups"] = COOPMAT_PAIR_GROUPS;
    py::list sequenceRules;
    for (const auto& r : SEQUENCE_STEPS) {
        sequenceRules.append(py::make_tuple(r.cpu ? "cpu" : "gpu", r.maxHidden, r.maxBatch));
    }
    d["sequence_steps"] = sequenceRules;
    d["sequence_steps_table"] = SEQUENCE_STEPS_TABLE;
    py::list persistentRules;
    for (const auto& r : PERSISTENT_STEPS) {
        persistentRules.append(py::make_tuple(r.cpu ? "cpu" : "gpu", r.lstmOnly ? "LSTM" : "any", r.fromHidden,
                                               r.toHidden, r.maxBatch, r.design));
    }
    d["persistent_steps"] = persistentRules;
    d["persistent_steps_table"] = PERSISTENT_STEPS_TABLE;
    d["cpu_projection_table"] = CPU_PROJECTION_TABLE;
    d["tiles"] = rows;
    d["shared_bytes"] = TILED_SHARED_BYTES;
    d["max_invocations"] = BATCHED_MAX_INVOCATIONS;
    return d;
}

// A layer as the persistent kernel's rules see it, its cell by name.
PersistentShape
persistentShapeOf(std::string_view cell, uint32_t hidden, uint32_t dirs, uint32_t batch, bool gruTwoPass)
{
    const Cell* c = findCell(cell);
    if (c == nullptr) {
        throw std::invalid_argument("ortops: the persistent kernel: unknown cell '" + std::string(cell) + "'");
    }
    return { hidden, c->gates, dirs, batch, gruTwoPass, c->op };
}

// The persistent kernel's split (persistent.hpp) as a dict.
py::dict
persistentSplit(std::string_view cell, uint32_t hidden, uint32_t dirs, uint32_t batch, bool gruTwoPass, bool cpu,
                uint32_t computeUnits, uint32_t maxShared, uint32_t maxInvocations, const VariantSettings& s)
{
    PersistentVariant v = persistentVariant(persistentShapeOf(cell, hidden, dirs, batch, gruTwoPass),
                                            { cpu, computeUnits, maxShared, maxInvocations }, s);
    py::dict d;
    d["groups"] = v.groups;
    d["threads"] = v.threads;
    d["units_max"] = v.unitsMax;
    d["shared_bytes"] = v.sharedBytes;
    d["spins"] = v.spins;
    d["window"] = v.window;
    d["poll_delay"] = v.pollDelay;
    d["discovery"] = v.discovery;
    d["piece"] = v.piece;
    d["fits"] = v.fits;
    return d;
}

py::dict
persistentStateDict(uint32_t device)
{
    PersistentState st = persistentState(device);
    py::dict d;
    d["off"] = st.off;
    d["why"] = st.why;
    d["runs"] = st.runs;
    d["fallbacks"] = st.fallbacks;
    d["last_taken"] = st.lastTaken;
    return d;
}

} // namespace

void
bindVariants(py::module_& m)
{
    m.def(
      "step_variant",
      [](uint32_t batch, uint32_t gates, bool float16, std::string_view mode) {
          // ortops.variants.step_variant passes a name ortops.modes.check_mode accepted.
          std::optional<Mode> m = parseMode(mode);
          if (!m) {
              throw std::invalid_argument("ortops: step_variant: unknown mode '" + std::string(mode) + "'");
          }
          StepVariant v = stepVariant(batch, gates, float16, *m);
          return py::make_tuple(v.nb, v.units, v.rpt, v.rows);
      },
      py::arg("batch"), py::arg("gates_in_pass"), py::arg("float16"), py::arg("mode"));
    m.def(
      "batched_variant",
      [](uint32_t hidden, uint32_t batch, bool float16, const VariantSettings& s) {
          BatchedVariant v = batchedVariant(hidden, batch, float16, s);
          return py::make_tuple(v.upt, v.by, v.prefetch, v.ksplit, v.rows);
      },
      py::arg("hidden"), py::arg("batch"), py::arg("float16"), py::arg("settings"));
    m.def("batched_tiles", &batchedTables,
          "The batched step kernels' defaults (variants.hpp): the batch they run from and the table "
          "of tiles, rows (element type, from batch, from hidden, below hidden or None, (upt, by, "
          "prefetch, ksplit, rows)).");
    m.def("coopmat_steps_from", &coopmatStepsFrom, py::arg("hidden"), py::arg("settings"));
    m.def("coopmat_blocks", &coopmatBlocks, py::arg("hidden"), py::arg("batch"), py::arg("dirs"),
          py::arg("settings"));
    m.def(
      "step_kernel",
      [](uint32_t batch, uint32_t hidden, const VariantSettings& s) {
          return std::string(stepKernelName(stepKernel(batch, hidden, s)));
      },
      py::arg("batch"), py::arg("hidden"), py::arg("settings"));
    m.def("batched_from", &batchedFromFor, py::arg("hidden"), py::arg("settings"));
    m.def("projection_tpt", &projectionTpt, py::arg("outputs"), py::arg("large"));
    m.def("step_passes", &stepPasses, py::arg("gru_two_pass"), py::arg("gates"));
    m.def("grid_groups", &gridGroups, py::arg("n"), py::arg("max_groups"));
    m.def("persistent_variant", &persistentSplit, py::arg("cell"), py::arg("hidden"), py::arg("dirs"),
          py::arg("batch"), py::arg("gru_two_pass"), py::arg("cpu"), py::arg("compute_units"),
          py::arg("max_shared"), py::arg("max_invocations"), py::arg("settings"),
          "The persistent step kernel's split (src/core/rnn/persistent.hpp).");
    m.def("persistent_steps",
          [](std::string_view cell, uint32_t hidden, uint32_t dirs, uint32_t batch, bool gruTwoPass, bool cpu,
             uint32_t computeUnits, uint32_t maxShared, uint32_t maxInvocations, std::string_view mode,
             const VariantSettings& s) {
              std::optional<Mode> m = parseMode(mode);
              if (!m) {
                  throw std::invalid_argument("ortops: persistent_steps: unknown mode '" + std::string(mode) + "'");
              }
              return persistentSteps(persistentShapeOf(cell, hidden, dirs, batch, gruTwoPass),
                                     { cpu, computeUnits, maxShared, maxInvocations }, *m, true, s);
          },
          py::arg("cell"), py::arg("hidden"), py::arg("dirs"), py::arg("batch"), py::arg("gru_two_pass"),
          py::arg("cpu"), py::arg("compute_units"), py::arg("max_shared"), py::arg("max_invocations"),
          py::arg("mode"), py::arg("settings"),
          "Whether a layer runs the persistent step kernel on such a device (its memory model assumed).");
    m.def("persistent_state", &persistentStateDict, py::arg("device"),
          "What this process has seen of persistent grids on a device: off (marked after a failed "
          "grid), why, runs, fallbacks, last_taken.");
}

} // namespace ortops
