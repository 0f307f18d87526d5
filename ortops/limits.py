"""The error a layer that does not fit its device raises.

The limits themselves (maxStorageBufferRange per binding, maxComputeWorkGroupCount per
dispatch) are checked by the native core while a layer uploads its weights and records a plan
(``src/core/rnn/limits.cpp``, ``Limits``), before any device memory for the run is allocated; the
Python door raises its refusal as this error, and the core's node checker
(``src/core/placement/node_check.hpp``) checks each weight's binding with the same message before
a node is rewritten or taken by the execution provider.
"""

from __future__ import annotations


class UnsupportedLayerError(ValueError):
    """The layer is valid ONNX but does not fit this device (e.g. a storage binding limit)."""
