// ortops._vk: the Python door to the native core (src/core/). Each binding forwards to the
// class that owns the state, where the checks live; the bindings convert Python objects and
// release the GIL around copies and runs. One file a concept:
//   bind_device.cpp      devices, contexts, programs, sequences, validation messages
//   bind_memory.cpp      buffers' mapped memory (the host copies on their own: testing build)
//   bind_settings.cpp    LayerSettings and VariantSettings, their fields bound by name once
//   bind_variants.cpp    the kernel-variant heuristics
//   bind_layer.cpp       ortops::Layer, and the door's one check of a layer (check_layer)
//   bind_nodeconfig.cpp  the node-config decoder
//   bind_nodecheck.cpp   the node checker (the EP's question), the EP's recorded decisions,
//                        DynamicQuantizeLSTM's dequantization
//   bind_visible.cpp     CUDA_VISIBLE_DEVICES / NVIDIA_VISIBLE_DEVICES -> Vulkan devices
//   bind_costmodel.cpp   placement "auto"'s cost model, its decision and its cache
//   bind_rows.cpp        ortops.serve's stacking of requests' rows and splitting them back
//   bind_testing.cpp     what only the tests use (fault injection, coalesced runs, weight
//                        layouts, the tables, the encoder, the host copies on their own):
//                        bound only when ORTOPS_TESTING is
//                        defined (scripts/setup.sh's build), never in the wheel's module.
#include <pybind11/pybind11.h>

#include "base/errors.hpp"
#include "rnn/layer.hpp"

namespace ortops {
void bindDevice(pybind11::module_& m);       // bind_device.cpp
void bindMemory(pybind11::module_& m);       // bind_memory.cpp
void bindSettings(pybind11::module_& m);     // bind_settings.cpp
void bindVariants(pybind11::module_& m);     // bind_variants.cpp
void bindLayer(pybind11::module_& m);        // bind_layer.cpp
void bindNodeConfig(pybind11::module_& m);   // bind_nodeconfig.cpp
void bindNodeCheck(pybind11::module_& m);    // bind_nodecheck.cpp
void bindVisible(pybind11::module_& m);      // bind_visible.cpp
void bindCostModel(pybind11::module_& m);    // bind_costmodel.cpp
void bindRows(pybind11::module_& m);         // bind_rows.cpp
#ifdef ORTOPS_TESTING
void bindTesting(pybind11::module_& m);      // bind_testing.cpp
#endif
} // namespace ortops

namespace py = pybind11;

PYBIND11_MODULE(_vk, m)
{
    m.doc() = "ortops' native half: Vulkan context, Kompute buffers and pipelines, recorded "
              "sequences with full barriers, range copies and timestamps, and the native layer";
    py::register_exception<ortops::DeviceLostError>(m, "DeviceLostError", PyExc_RuntimeError);
    py::register_exception<ortops::InputError>(m, "InputError", PyExc_ValueError);
    py::register_exception<ortops::UnsupportedLayerError>(m, "UnsupportedLayerError", PyExc_ValueError);
    ortops::bindDevice(m);
    ortops::bindMemory(m);
    ortops::bindSettings(m);
    ortops::bindVariants(m);
    ortops::bindLayer(m);
    ortops::bindNodeConfig(m);
    ortops::bindNodeCheck(m);
    ortops::bindVisible(m);
    ortops::bindCostModel(m);
    ortops::bindRows(m);
#ifdef ORTOPS_TESTING
    ortops::bindTesting(m);
#endif
}
