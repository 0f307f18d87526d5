"""Type aliases of the public API (checked by mypy in CI; pyproject.toml's [tool.mypy])."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Optional, Sequence, Union

import numpy.typing as npt

if TYPE_CHECKING:
    from ortops.device import Device

#: A result: a numpy array in the weights' dtype (float32 or float16).
Array = npt.NDArray[Any]
#: An input tensor: anything numpy turns into an array of the right shape and dtype.
ArrayIn = npt.ArrayLike
#: ``device=``: an index, a type ("discrete", "cpu", ...), part of a name, a Device, or None.
DeviceSpec = Union[int, str, "Device", None]
#: Activation names / parameters as ONNX lists them (one per slot and direction).
Names = Optional[Sequence[str]]
Floats = Optional[Sequence[float]]
