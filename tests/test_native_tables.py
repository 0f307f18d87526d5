"""The Python tables that the float64 reference and the argument checks read (ortops.cells,
ortops.activations, ortops.specialization) against the native core's (src/core/config/cells.hpp,
activations.hpp, specialization.cpp), which plan and run every layer: one concept, the same
table in both. Needs the native module, not a device."""

import numpy as np

from ortops import _vk, activations, cells, specialization

TABLES = _vk.tables()


def test_cells_are_the_native_cells():
    native = {c["name"]: c for c in TABLES["cells"]}
    assert list(native) == list(cells.CELLS)
    for name, c in cells.CELLS.items():
        n = native[name]
        assert (n["code"], n["gate_order"], n["inputs"], n["outputs"], n["slots"], n["default_activations"]) == \
            (c.code, c.gate_order, c.inputs, c.outputs, c.slots, c.default_activations), name
        assert n["input_forget"] == ("input_forget" in c.attributes)
        assert n["linear_before_reset"] == ("linear_before_reset" in c.attributes)
        assert n["extra_state_planes"] == (c.extra_state_planes(0), c.extra_state_planes(1))


def test_activations_are_the_native_activations():
    native = TABLES["activations"]
    assert tuple(a[0] for a in native) == activations.ACTIVATIONS   # the index is the shader's code
    for name, takes_alpha, takes_beta, alpha, beta in native:
        act = activations.Activation(name)
        assert (act.takes_alpha, act.takes_beta) == (takes_alpha, takes_beta), name
        want = activations._DEFAULTS.get(name, (0.0, 0.0))
        assert (np.float32(alpha), np.float32(beta)) == (np.float32(want[0]), np.float32(want[1])), name


def test_specialization_layouts_are_the_native_layouts():
    native = TABLES["specialization"]
    assert set(native) == set(specialization.LAYOUTS)
    for shader, layout in specialization.LAYOUTS.items():
        constants, local = native[shader]
        assert {k: tuple(v) for k, v in constants.items()} == layout.constants, shader
        assert local == layout.local_size, shader


def test_batched_defaults_are_the_native_defaults():
    # ortops.variants' BATCHED_FROM is the native default (variants.hpp's BATCHED_FROM table by
    # hidden size, which the custom-op library's layers use); its tiles are the native table's
    # (None: not mirrored).
    from ortops import variants

    assert variants.BATCHED_FROM == variants.TABLE
    assert variants.settings().batched_from == _vk.batched_tiles()["batched_from_table"]
    assert all(getattr(variants, "BATCHED_" + name) is None for name in ("UPT", "BY", "PREFETCH", "KSPLIT", "ROWS"))
