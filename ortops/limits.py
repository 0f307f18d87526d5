"""The error a layer that does not fit its device raises.

The limits themselves (maxStorageBufferRange per binding, maxComputeWorkGroupCount per
dispatch) are checked by the native core while a layer uploads its weights and records a plan
(``src/core/rnn/limits.cpp``, ``Limits``), before any device memory for the run is allocated; the
Python door raises its refusal as this error, and ``ortops.ort.customop.check_node`` has the
core check the weights' bindings (``ortops.validation.check_bindings``, the same message) before
a node is rewritten.
"""

from __future__ import annotations


class UnsupportedLayerError(ValueError):
    """The layer is valid ONNX but does not fit this device (e.g. a storage binding limit)."""
