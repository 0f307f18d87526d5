// The native core's headers as the ONNX Runtime glue (src/ort/, src/ep/) includes them.
// The core's classes keep default visibility even though this glue is compiled with
// -fvisibility=hidden: the Python module links against the core in this library, and a
// typeinfo or vtable emitted in a hidden translation unit would otherwise be merged hidden
// (the linker keeps the most restrictive visibility), e.g. InputError's typeinfo.
#pragma once

#if defined(__GNUC__)
#pragma GCC visibility push(default)
#endif
#include "core/calibration.hpp"
#include "core/costcache.hpp"
#include "core/costmodel.hpp"
#include "core/devices.hpp"
#include "core/errors.hpp"
#include "core/layer.hpp"
#include "core/nodeconfig.hpp"
#include "core/placement_policy.hpp"
#include "core/spec.hpp"
#include "core/tensors.hpp"
#include "core/visible.hpp"
#if defined(__GNUC__)
#pragma GCC visibility pop
#endif
