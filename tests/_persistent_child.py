"""The child process of tests/test_persistent_kernel.py: runs layers on the persistent step
kernel in a process whose lavapipe has as many threads as the test asks (LP_NUM_THREADS is read
once, when the driver starts), and prints one line ``RESULT <json>``.

    python -P -c "import _persistent_child; _persistent_child.main()" '<json request>'

A request is {"kind": "cases", "cases": [...]} (each case: against the step kernels, see
run_case), {"kind": "fallback", ...} (a grid that must fail) or {"kind": "threads", ...}.
"""

from __future__ import annotations

import json
import sys
import threading

import numpy as np

import ortops
from ortops import _vk, variants
from _cases import activation_params, layer_case, rotation, same_bits, seed_of


def _options(op: str, direction: str, options: dict) -> dict:
    kw = dict(options)
    if kw.pop("activations", None):
        names = rotation(op, 3, 2 if direction == "bidirectional" else 1)
        alpha, beta = activation_params(names)
        kw.update(activations=names, activation_alpha=alpha or None, activation_beta=beta or None)
    return kw


def _arrays(case: dict):
    dtype = np.dtype(case["dtype"])
    arrays, lens = layer_case(seed_of("persistent", case["op"], case["direction"], case["hidden"], case["batch"],
                                      case["dtype"]), case["op"], case["direction"], case["hidden"], case["batch"],
                              dtype, case.get("seq", 5), zero_row=True)
    if case["options"].get("layout") == 1:
        arrays["X"] = np.ascontiguousarray(arrays["X"].transpose(1, 0, 2))
        for k in ("initial_h", "initial_c"):
            arrays[k] = np.ascontiguousarray(arrays[k].transpose(1, 0, 2))
    return arrays, lens


def _layer(case: dict, arrays: dict, persistent: bool, **tunables):
    variants.PERSISTENT_STEPS = persistent
    for name, value in tunables.items():
        setattr(variants, name, value)
    weights = {k: arrays[k] for k in ("W", "R", "B", "P") if k in arrays}
    return ortops.RecurrentLayer(case["op"], **weights, direction=case["direction"], mode=case["mode"],
                                 **_options(case["op"], case["direction"], case["options"]))


def _run(layer, arrays: dict, lens):
    states = {k: arrays[k] for k in ("initial_h", "initial_c") if k in arrays}
    return [np.array(y) for y in layer(arrays["X"], lens, **states)]


def _kernels(layer) -> list:
    return sorted({plan.steps for pool in layer._plans.values() for plan in pool.free})


def _state(layer) -> dict:
    return _vk.persistent_state(layer.device.index)


def run_case(case: dict) -> dict:
    """The case on the step kernels and then forced onto the persistent kernel with
    case["groups"] workgroups: with sequence lengths, without, and again (run to run)."""
    arrays, lens = _arrays(case)
    steps = _layer(case, arrays, False)
    want = [_run(steps, arrays, lens), _run(steps, arrays, None)]
    pers = _layer(case, arrays, True, PERSISTENT_GROUPS=case["groups"], **case.get("tunables", {}))
    before = _state(pers)
    got = [_run(pers, arrays, lens), _run(pers, arrays, None)]
    again = _run(pers, arrays, lens)
    after = _state(pers)
    same = all(same_bits(a, b) for a, b in zip(want, got)) and same_bits(got[0], again)
    ran = (_kernels(pers) == ["step_persistent"] and after["runs"] - before["runs"] == 3
           and after["fallbacks"] == before["fallbacks"])
    return dict(id=case["id"], same=same, ran=ran, kernels=_kernels(pers), steps_kernels=_kernels(steps),
                taken=after["last_taken"], why=after["why"])


def run_fallback(request: dict) -> dict:
    """A grid that cannot succeed (request["tunables"]): the run gives the step kernels' bits,
    the device is marked, and a new layer records the step kernels."""
    case = request["case"]
    arrays, lens = _arrays(case)
    want = _run(_layer(case, arrays, False), arrays, lens)
    pers = _layer(case, arrays, True, **request["tunables"])
    before = _state(pers)
    got = _run(pers, arrays, lens)
    after = _state(pers)
    fresh = _layer(case, arrays, True, **request["tunables"])
    again = _run(fresh, arrays, lens)
    return dict(same=same_bits(want, got) and same_bits(want, again), recorded=_kernels(pers),
                fresh=_kernels(fresh), runs=after["runs"] - before["runs"],
                fallbacks=after["fallbacks"] - before["fallbacks"], off=after["off"], why=after["why"],
                taken=after["last_taken"])


def run_threads(request: dict) -> dict:
    """Several layers forced onto the persistent kernel, run from several threads at once (the
    device's gate lets one grid run at a time): each run gives its serial bits."""
    cases = request["cases"]
    layers, inputs, want = [], [], []
    for case in cases:
        arrays, lens = _arrays(case)
        want.append(_run(_layer(case, arrays, False), arrays, lens))
        layers.append(_layer(case, arrays, True, PERSISTENT_GROUPS=case["groups"]))
        inputs.append((arrays, lens))
    before = _state(layers[0])
    got: list = [None] * (len(cases) * request["repeats"])
    errors: list = []

    def work(i: int) -> None:
        try:
            k = i % len(cases)
            got[i] = (k, _run(layers[k], *inputs[k]))
        except Exception as exc:   # reported, not lost in the thread
            errors.append(repr(exc))

    threads = [threading.Thread(target=work, args=(i,)) for i in range(len(got))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    after = _state(layers[0])
    same = not errors and all(same_bits(want[k], ys) for k, ys in got)
    return dict(same=same, errors=errors, runs=after["runs"] - before["runs"],
                fallbacks=after["fallbacks"] - before["fallbacks"], why=after["why"],
                kernels=sorted({k for layer in layers for k in _kernels(layer)}))


def main() -> None:
    request = json.loads(sys.argv[1])
    if request["kind"] == "cases":
        result: object = [run_case(c) for c in request["cases"]]
    elif request["kind"] == "fallback":
        result = run_fallback(request)
    else:
        result = run_threads(request)
    print("RESULT " + json.dumps(result), flush=True)
