"""Names removed from the public API, kept for one release as deprecated aliases
(CHANGELOG.md, "Removed"): each module lists its own in a table and answers them from its
module-level ``__getattr__`` with a ``DeprecationWarning`` saying what to use instead."""

from __future__ import annotations

import importlib
import warnings
from typing import Any, Callable

#: A module's deprecated names: name -> (what to use instead, a function returning the value).
Table = dict[str, tuple[str, Callable[[], Any]]]


def module_getattr(module: str, table: Table) -> Callable[[str], Any]:
    """A module-level ``__getattr__`` for ``module`` that answers the names of ``table``."""

    def __getattr__(name: str) -> Any:
        if name in table:
            instead, value = table[name]
            warnings.warn(f"{module}.{name} is deprecated and will be removed in the next release; "
                          f"use {instead}", DeprecationWarning, stacklevel=2)
            return value()
        raise AttributeError(f"module {module!r} has no attribute {name!r}")

    return __getattr__


def attribute(module: str, name: str) -> Callable[[], Any]:
    """The value of ``module.name``, imported when the deprecated alias is read (the module
    that defines the alias may be imported by ``module``)."""
    return lambda: getattr(importlib.import_module(module), name)
