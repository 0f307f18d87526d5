// The layer's settings for Python: LayerSettings and its VariantSettings (layer.hpp,
// variants.hpp) as classes whose fields are bound by name, once. Each class's FIELDS lists
// those names (ortops.layer and ortops.variants read them from it; equality and repr go
// through it), so adding a setting is one line here beside its field in the core.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <string>
#include <vector>

#include "rnn/layer.hpp"
#include "rnn/variants.hpp"

namespace py = pybind11;

namespace ortops {

namespace {

// Binds a struct's fields by name and keeps their names for FIELDS, __eq__ and __repr__.
template<typename S>
class Fields
{
  public:
    explicit Fields(py::class_<S>& cls)
      : cls_(cls)
    {
    }

    template<typename T>
    Fields& operator()(const char* name, T S::*member, const char* doc)
    {
        cls_.def_readwrite(name, member, doc);
        names_.push_back(name);
        return *this;
    }

    // FIELDS, and equality and repr field by field (a nested settings struct compares by its own).
    void finish()
    {
        std::vector<std::string> names = names_;
        cls_.attr("FIELDS") = py::tuple(py::cast(names));
        cls_.def("__eq__", [names](const py::object& a, const py::object& b) -> py::object {
            if (!py::isinstance(b, py::type::handle_of(a))) {
                return py::reinterpret_borrow<py::object>(Py_NotImplemented);
            }
            for (const std::string& n : names) {
                if (!a.attr(n.c_str()).equal(b.attr(n.c_str()))) {
                    return py::bool_(false);
                }
            }
            return py::bool_(true);
        });
        cls_.def("__repr__", [names](const py::object& self) {
            std::string out = std::string(py::str(py::type::handle_of(self).attr("__name__"))) + "(";
            for (size_t i = 0; i < names.size(); i++) {
                out += (i ? ", " : "") + names[i] + "=" + std::string(py::repr(self.attr(names[i].c_str())));
            }
            return out + ")";
        });
    }

  private:
    py::class_<S>& cls_;
    std::vector<std::string> names_;
};

void
bindVariantSettings(py::module_& m)
{
    py::class_<VariantSettings> cls(m, "VariantSettings",
                                    "The kernel-variant tunables (variants.hpp); 0 in a batched field: the "
                                    "table's value.");
    cls.def(py::init([]() { return variantSettings(); }), "The defaults in force (the tables').")
      .def(py::init<const VariantSettings&>(), py::arg("other"));
    Fields<VariantSettings>{ cls }
      ("batched_from", &VariantSettings::batchedFrom, "batch from which a batched step kernel runs")
      ("batched_upt_float32", &VariantSettings::batchedUptFloat32, "units per thread, float32")
      ("batched_upt_float16", &VariantSettings::batchedUptFloat16, "units per thread, float16")
      ("batched_by_float32", &VariantSettings::batchedByFloat32, "unit groups per workgroup, float32")
      ("batched_by_float16", &VariantSettings::batchedByFloat16, "unit groups per workgroup, float16")
      ("batched_prefetch", &VariantSettings::batchedPrefetch, "positions loaded at once")
      ("batched_ksplit", &VariantSettings::batchedKsplit, "threads sharing a sum's class walk")
      ("batched_rows_float32", &VariantSettings::batchedRowsFloat32, "batch rows per thread, float32")
      ("batched_rows_float16", &VariantSettings::batchedRowsFloat16, "batch rows per thread, float16")
      ("coopmat_steps_from", &VariantSettings::coopmatStepsFrom, "batch from which the matrix-unit steps run")
      ("coopmat_blocks", &VariantSettings::coopmatBlocks, "16-row batch blocks a matrix-unit workgroup")
      ("sequence_steps", &VariantSettings::sequenceSteps, "whole-sequence kernel: table, 0 never, 1 where it fits")
      ("sequence_rows", &VariantSettings::sequenceRows, "batch rows a whole-sequence workgroup")
      ("sequence_broadcast", &VariantSettings::sequenceBroadcast, "h by subgroup broadcast: 0 rule, 1 no, 2 yes")
      ("sequence_units", &VariantSettings::sequenceUnits, "units a whole-sequence thread with the broadcast")
      ("persistent_steps", &VariantSettings::persistentSteps, "persistent kernel: table, 0 never, 1 where it runs")
      ("persistent_groups", &VariantSettings::persistentGroups, "persistent workgroups dispatched (0: the rule's)")
      ("persistent_units", &VariantSettings::persistentUnits, "units a persistent workgroup holds (0: the rule's)")
      ("persistent_spins", &VariantSettings::persistentSpins, "polls before a persistent wait gives up (0: rule)")
      ("persistent_discovery", &VariantSettings::persistentDiscovery, "occupancy discovery: 0 rule, 1 off, 2 on")
      ("persistent_piece", &VariantSettings::persistentPiece, "0 the whole kernel, 1 its barriers only")
      ("persistent_design", &VariantSettings::persistentDesign, "the persistent shader's DESIGN bits + 1 (0: rule)")
      ("cpu_projection", &VariantSettings::cpuProjection, "CPU projection: table, 0 never, 1 always")
      ("cpu_projection_rows", &VariantSettings::cpuProjectionRows, "Xw rows a CPU-projection walk")
      ("cpu_projection_w_regs", &VariantSettings::cpuProjectionWRegs, "W in registers: 0 rule, 1 no, 2 yes")
      ("cpu_projection_columns", &VariantSettings::cpuProjectionColumns, "columns a CPU-projection invocation")
      ("projection_kt", &VariantSettings::projectionKt, "k a projection slice: 0 (16), 16, 32")
      ("projection_stages", &VariantSettings::projectionStages, "projection slices in shared memory: 0 (1), 1, 2")
      ("large_projection", &VariantSettings::largeProjection, "projection outputs from which the 128 x 128 tile")
      ("max_groups", &VariantSettings::maxGroups, "cap on every dispatch dimension")
      .finish();
}

void
bindLayerSettings(py::module_& m)
{
    py::class_<LayerSettings> cls(m, "LayerSettings",
                                  "A layer's settings (layer.hpp): variant tunables, plan cache, limits, "
                                  "concurrency, timestamps, coalescing.");
    cls.def(py::init<>(), "The defaults (the environment's ORTOPS_COOPMAT, ORTOPS_COALESCE_ROWS, ORTOPS_COALESCE_IN_FLIGHT).")
      .def(py::init<const LayerSettings&>(), py::arg("other"));
    Fields<LayerSettings>{ cls }
      ("variants", &LayerSettings::variants, "the kernel-variant tunables (VariantSettings)")
      ("plan_cache", &LayerSettings::planCache, "shapes whose plans the layer keeps")
      ("storage_range", &LayerSettings::storageRange, "storage-binding limit (None: the device's)")
      ("workgroup_count", &LayerSettings::workgroupCount, "dispatch limit (None: the device's)")
      ("max_concurrent", &LayerSettings::maxConcurrent, "runs of one shape in flight at once")
      ("timestamps", &LayerSettings::timestamps, "plans record GPU timestamps")
      ("coopmat", &LayerSettings::coopmat, "mode fast may record the matrix-unit projection")
      ("coalesce_rows", &LayerSettings::coalesceRows, "batch rows concurrent runs coalesce into")
      ("coalesce_in_flight", &LayerSettings::coalesceInFlight, "runs in flight while requests wait")
      .finish();
}

} // namespace

void
bindSettings(py::module_& m)
{
    bindVariantSettings(m);
    bindLayerSettings(m);
}

} // namespace ortops
