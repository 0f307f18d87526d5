// The native core's headers as the ONNX Runtime glue (src/ort/, src/ep/) includes them.
// The core's classes keep default visibility even though this glue is compiled with
// -fvisibility=hidden: the Python module links against the core in this library, and a
// typeinfo or vtable emitted in a hidden translation unit would otherwise be merged hidden
// (the linker keeps the most restrictive visibility), e.g. InputError's typeinfo.
#pragma once

#if defined(__GNUC__)
#pragma GCC visibility push(default)
#endif
#include "core/placement/calibration.hpp"
#include "core/placement/costcache.hpp"
#include "core/placement/costmodel.hpp"
#include "core/vk/devices.hpp"
#include "core/base/errors.hpp"
#include "core/base/test_counts.hpp"
#include "core/config/quantized.hpp"
#include "core/rnn/layer.hpp"
#include "core/config/nodeconfig.hpp"
#include "core/placement/decisions.hpp"
#include "core/placement/node_check.hpp"
#include "core/placement/placement_policy.hpp"
#include "core/rnn/spec.hpp"
#include "core/rnn/tensors.hpp"
#include "core/vk/visible.hpp"
#if defined(__GNUC__)
#pragma GCC visibility pop
#endif
