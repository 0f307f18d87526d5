"""Fresh value names for nodes and initializers a pass adds to a model (one rule everywhere)."""

from __future__ import annotations


def unique_name(names: set, base: str) -> str:
    """``base``, or ``base_1``, ``base_2`` … : the first not in ``names`` (which it joins)."""
    name, i = base, 1
    while name in names:
        name, i = f"{base}_{i}", i + 1
    names.add(name)
    return name
