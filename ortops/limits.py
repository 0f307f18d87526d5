"""Device limits a layer's buffers and dispatches must fit, checked before anything runs."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Tuple

from ortops.variants import MAX_GROUPS


class UnsupportedLayerError(ValueError):
    """The layer is valid ONNX but does not fit this device (e.g. a storage binding limit)."""


@dataclass(frozen=True)
class Limits:
    """The limits one layer checks on one device; errors name the operator and the device.

    ``storage_range``: bytes one storage binding may span (maxStorageBufferRange);
    ``workgroup_count``: maxComputeWorkGroupCount; ``max_groups``: the cap ortops puts on
    every dispatch dimension (passes split or loop over their grid beyond it).
    """

    op: str
    device: str
    storage_range: int
    workgroup_count: Tuple[int, int, int]
    max_groups: int = MAX_GROUPS

    def check_binding(self, what: str, nbytes: int):
        if nbytes > self.storage_range:
            raise UnsupportedLayerError(
                f"{self.op}: unsupported layer on {self.device}: {what} needs "
                f"{nbytes} bytes in one storage binding, above the device's "
                f"maxStorageBufferRange of {self.storage_range} bytes")

    def check_groups(self, what: str, groups):
        limit = self.workgroup_count
        if any(g > m for g, m in zip(groups, limit)):
            raise UnsupportedLayerError(
                f"{self.op}: unsupported layer on {self.device}: {what} needs "
                f"{' x '.join(map(str, groups))} workgroups, above the device's "
                f"maxComputeWorkGroupCount of {' x '.join(map(str, limit))}")
