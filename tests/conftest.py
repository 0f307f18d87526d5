"""Test switch for Vulkan synchronization validation.

``pytest --vk-validation`` (or ORTOPS_VALIDATION=1 in the environment) creates every ortops
Vulkan context under the Khronos validation layer with synchronization validation
(tests/vk_layer_settings.txt, a copy of the project's shared settings). Any validation
message a test causes fails that test, naming the message. A test that provokes messages on
purpose takes them itself through ortops.device.validation_messages().

The header and the summary name the onnxruntime imported (CI also runs the session tests
against the oldest admitted one). ``--onnxruntime-version V`` refuses to start with another
one; ``--fail-on-skip`` makes a skipped or xfailed test fail the session; ``--cpp-tests=PROGRAM``
runs the core's C++ unit tests as one test of the session (tests/test_cpp.py; the summary says
how many passed).

Markers (registered in pyproject.toml): ``gpu`` on every test that needs a Vulkan device
(lavapipe will do), ``slow`` on those that take more than about 2 s, ``conformance`` on the
suites scripts/ci/conformance.py also runs, ``full`` on the cases of the slow parametrized
matrices beyond their representative subset (:func:`representative`, :data:`QUICK_CAP`) and
on the few whole tests listed in :data:`FULL_ONLY`: scripts/test.sh, the quick command, runs
``not conformance and not full``; scripts/test_full.sh's lane ``matrix`` runs ``full``
(on the GPU machine with the whole suite, and on demand: CI leaves it out for time,
docs/ci.md) and its lane ``tests`` the conformance job, so every case runs once. They are given here, in one place
(:func:`pytest_collection_modifyitems`): a test is ``gpu`` unless its module (or the test
itself) is listed in :data:`NO_DEVICE`, so a new module counts as ``gpu`` until listed (a
module's own ``pytestmark = pytest.mark.gpu`` keeps it ``gpu`` whatever the table says).
The inner loop is ``pytest -m "not gpu"``: when no selected test is ``gpu``, enumerating
Vulkan devices or creating a context in this process (``ortops.device.devices`` /
``context``, through the native module) raises :class:`DeviceUsed`, so a test that needs a
device and is not marked fails instead of quietly running on one. (A subprocess, or an
ONNX Runtime node callback that turns the exception into a node error, can hide it: list a
test in NO_DEVICE only after reading it.)
"""

import os
import pathlib
import re

import pytest

HERE = pathlib.Path(__file__).resolve().parent

# The suite runs the step kernels (one dispatch a time step) wherever the table would pick the
# whole-sequence kernel (src/core/rnn/variants.hpp, SEQUENCE_STEPS: on a CPU implementation such
# as lavapipe, every layer up to hidden 512 and batch 64). Why: lavapipe compiles that kernel's
# fully unrolled walk for each new shape and option set, 2.5 s at hidden 32 and 13-24 s at
# 256-512 (docs/perf.md, "Kernel choices"), and the suite makes hundreds of distinct
# layers: with it on, the quick command's first 170 tests took 7 minutes on the 2-core machine
# (the whole quick run took 3.5 minutes before). What the suite asserts still holds for it: it gives the step kernels' bits, which
# tests/test_sequence_kernel.py checks over every cell, pass, option set, activation set,
# layout, precision, mode, lengths and special values (with the kernel forced on by the
# Python tunable, which wins over this variable), tests/cpp/test_kernel_choice.cpp checks the
# table's choice, and the H200 gate ran the whole suite with the GPU rows of the table.
# ORTOPS_SEQUENCE_STEPS=1 in the environment runs the suite with the kernel wherever it fits.
os.environ.setdefault("ORTOPS_SEQUENCE_STEPS", "0")
# Likewise the input projection for CPU devices (glsl/input_projection_cpu.comp, chosen on
# lavapipe by src/core/rnn/cpu_projection.cpp): its unrolled 4-column chunk body costs lavapipe 1-2 s
# of compiling for each new shape (docs/perf.md, "Kernel choices"), which the
# suite's hundreds of layers would pay on every CI run. It gives the tiled projection's bits,
# which tests/test_cpu_projection.py checks with the kernel forced on (by the Python tunable,
# which wins over this variable), as does the table's choice; ORTOPS_CPU_PROJECTION=1 runs the
# suite with it.
os.environ.setdefault("ORTOPS_CPU_PROJECTION", "0")
#: The kernel switches this file sets for the Python suite (above), which the C++ tests
#: (tests/test_cpp.py) run without: they choose their kernels themselves. They keep
#: --vk-validation's (pytest_configure), and fail on any validation message (tests/cpp/main.cpp).
PYTHON_SUITE_SWITCHES = ("ORTOPS_SEQUENCE_STEPS", "ORTOPS_CPU_PROJECTION")

#: Tests that need no Vulkan device: a module name maps to None (the whole module) or to the
#: names of its device-free tests (parametrized cases share their function's name).
NO_DEVICE = {
    "test_step_kernels": {"test_batched_r_layout"},
    "test_bench": None,
    "test_lab": {"test_sweep_markdown_names_every_mode_and_the_winner",
                 "test_sweep_schema_accepts_the_report_and_names_what_is_wrong",
                 "test_sweep_parts_merge_into_one_grid", "test_parts_with_different_kernels_say_so",
                 "test_write_docs_fills_the_sweep_markers_and_keeps_the_rest",
                 "test_from_json_writes_the_docs_without_measuring",
                 "test_estimate_grows_with_the_grid_and_fits_a_device_call",
                 "test_estimate_option_prints_and_measures_nothing",
                 "test_anchor_table_names_precision_modes_and_divides_by_the_like_peer",
                 "test_memcpy_bandwidth_and_the_host_bound", "test_cudnn_modes_and_absence",
                 "test_cudnn_measure_without_torch_is_none",
                 "test_a_failed_figure_is_recorded_and_the_rest_measured",
                 "test_measuring_helpers_have_one_home_and_no_import_circle",
                 "test_scripts_use_only_public_names_of_the_package",
                 "test_webgpu_reports_through_the_logger"},
    "test_compare": None,
    "test_vocabulary": None,
    "test_configuration": None,
    "test_reference": None,
    "test_validation": None,
    "test_float_controls": None,
    "test_exact_spirv": None,
    "test_exact_weights": {"test_every_half_widens_as_the_kernels_decoded_it",
                           "test_numpy_widens_halves_the_same_way",
                           "test_float32_r_is_flushed_as_the_kernels_flushed_it"},
    "test_modes": None,
    "test_exact_digests": {"test_cases_cover_every_cell_direction_precision_option_and_activation",
                           "test_inputs_are_reproducible"},
    "test_cells": None,
    "test_specialization": None,
    "test_plan_pool": None,
    "test_nodeconfig": None,
    "test_node_config_decoder": None,
    "test_node_check": None,
    "test_native_tables": None,
    "test_fuzz_smoke": {"test_huge_zero_stride_views_are_refused_before_any_copy",
                        "test_activations_of_the_wrong_type_are_a_value_error"},
    "test_packaging": None,
    "test_concurrency": {"test_queue_count_setting"},
    "test_cli": {"test_devices_prints_what_device_module_returns", "test_progress_bar_draws_to_the_end",
                 "test_warmup_runs_once_then_for_the_given_time",
                 "test_median_stops_at_its_budget_after_three_runs", "test_run_threads_refuses_bad_counts",
                 "test_python_dash_m_ortops_is_the_command",
                 "test_info_shows_nodes_left_to_ort", "test_run_refuses_an_unknown_mode",
                 "test_demo_refuses_bad_sizes_in_one_line"},
    "test_conformance": {"test_scaled_error_detects_what_it_must",
                         "test_equivalent_model_is_a_faithful_oracle"},
    "test_devices": {"test_no_device_names_the_package"},
    "test_docs": None,
    "test_doc_examples": {"test_every_block_runs_or_names_its_needs", "test_block_count_did_not_fall"},
    "test_kernels": {"test_activation_runs_cover_every_slot"},
    "test_layer_api": {"test_unknown_op"},
    "test_session": {"test_malformed_model_is_a_clear_error"},
    "test_quantized": {"test_dequantize_is_the_formula_in_ai_onnx_layout",
                       "test_dequantize_errors_name_operator_argument_expected_got",
                       "test_rule_catches_weights_read_otherwise_than_ort",
                       "test_dequantized_model_is_the_float_model_ortops_computes"},
    "test_policy": {"test_small_node_stays_on_cpu_large_goes_to_device",
                    "test_dynamic_dimensions_take_the_stated_defaults", "test_fit_recovers_the_three_costs",
                    "test_unknown_policy_is_refused_by_name", "test_cache_round_trip_relocated_by_the_environment",
                    "test_default_cache_is_in_the_user_cache_dir", "test_corrupt_cache_is_measured_again",
                    "test_concurrent_writers_leave_every_entry"},
    "test_serve_wire": None,
    "test_sizes": None,
    "test_visible": {"test_cuda_order_is_pci_order_for_one_model",
                     "test_cuda_order_refuses_to_guess_fastest_first_across_models",
                     "test_assigned_devices_maps_scheduler_variables", "test_bad_assignment_is_a_clear_error",
                     "test_no_nvidia_device_means_index_is_an_error_and_empty_is_none",
                     "test_assigned_device_by_rank", "test_missing_pci_bus_id_with_several_gpus_asks_for_uuids",
                     "test_select_by_uuid_or_unique_prefix", "test_ambiguous_or_unknown_uuid_lists_the_devices"},
    "test_host_copy": {"test_settings_round_trip_and_clamp", "test_host_copy_gives_identical_bytes",
                       "test_host_copy_float16_at_the_default_threshold",
                       "test_host_copy_refuses_mismatch_and_strides", "test_narrow_to_half_equals_numpy",
                       "test_forked_child_copies_with_a_pool_of_its_own",
                       "test_narrow_to_half_refuses_wrong_types_and_sizes"},
    "test_control_flow": {"test_folder_folds_data_movement_exactly_and_nothing_else",
                          "test_scope_describes_the_path_outermost_first"},
    "test_fast_mode": {"test_fast_is_a_mode_running_the_deterministic_binaries",
                       "test_projection_kernel_choice", "test_device_description_shows_cooperative_matrix",
                       "test_build_step_declares_the_float_control_for_float16"},
    "test_real_models": {"test_tables_name_times_errors_nodes_and_peers_that_do_not_run"},
}

#: Tests that take more than about 2 s on lavapipe under validation (``--durations``), or
#: whole modules that together take tens of seconds: module -> None (all) or test names.
SLOW = {
    "test_kernels": None,          # the kernel matrix (about 60 s), the recognizer shapes
    "test_cpp": None,              # the core's C++ unit tests: 25 s, 42 s with Mesa's cache empty
    "test_step_kernels": {"test_batched_kernel_gives_the_lanes_kernels_bits",   # 24 cases x 5 layers: ~65 s
                          "test_special_values_give_the_lanes_kernels_bits",   # exact-mode pipelines
                          "test_every_tiling_gives_the_same_bits",       # 15 tilings, 0.4-1.3 s each: 9 s
                          "test_register_tile_reads_h_at_any_alignment"},  # 6 cases, 1.5 s each
    # Each case compiles the whole-sequence kernel afresh (2.5-10 s on lavapipe, whose disk
    # cache makes a rerun fast) beside the step kernels.
    "test_sequence_kernel": {"test_sequence_kernel_gives_the_step_kernels_bits",
                             "test_special_values_give_the_step_kernels_bits"},
    "test_coalesce": {"test_coalesced_requests_get_their_own_bits",   # 12 cases, 1-1.9 s each: 15 s
                      "test_coalesced_requests_exact_mode",             # 2-4 s each
                      "test_coalesced_requests_fast_mode_matrix_steps"},   # 1.8-3.2 s each
    "test_determinism": {"test_a_rows_bits_do_not_depend_on_its_batch"},   # 8 cases, 0.5-2.2 s each
    "test_torch_exports": {"test_torch_export_runs_on_the_gpu_like_stock_ort",   # 3 x 12 cases
                           "test_converted_torch_export_runs_in_plain_onnxruntime",   # (models x ORT
                           "test_a_failing_node_is_an_ordinary_run_error_at_every_level"},  # levels): 7 s
    "test_exact_digests": {"test_exact_digest"},
    "test_exact_functions": None,
    "test_special_values": None,   # the ORT/reference/device matrix, test_placements 2-7 s each
    "test_special_values_exact": None,
    "test_conformance": {"test_backend_suite_all_pass", "test_differential_suite_all_pass"},
    "test_concurrency": {"test_one_session_many_threads_equals_serial",
                         "test_separate_sessions_in_threads_equal_serial"},
    "test_cli": {"test_bench_small_writes_report"},
    "test_lab": {"test_sweep_runs_every_mode_at_tiny_shapes",   # exact-mode pipelines
                 "test_persistent_rule_measures_the_table_beside_the_forced_kernel"},   # 2.9 s
    "test_doc_examples": {"test_block_runs"},   # a fresh interpreter a block: 3-7 s each
    "test_layer_api": {"test_layer_rebuilds_dropped_plans"},
    "test_policy": {"test_concurrent_writers_leave_every_entry",   # 4 spawned interpreters: 5 s
                    "test_placement_script_quick"},
    "test_multi_device": {"test_multi_gpu_script_runs_what_the_devices_allow"},
    "test_serve": None,            # a local Ray instance with two replicas (12-25 s on lavapipe),
                                   # and serve_bench.py --direct in a process of its own (17 s)
    "test_memory_growth": None,    # a fresh process, 25-30 sessions or layers: 3-7 s a test;
                                   # 50 x 4 sessions from threads: 22-39 s
    "test_silero_vad": {"test_streaming_frame_by_frame_equals_ort_cpu",   # 2.2-2.4 s each
                        "test_stream_bench_reports_every_engine"},           # 3 s
    # 4 shapes x 2 modes x 2 precisions, 2.5-9.3 s each with Mesa's cache empty (82 s in all):
    # the quick run keeps one case a shape, the four together every mode and precision.
    "test_cpu_projection": {"test_cpu_projection_gives_the_tiled_bits"},
}

#: Whole tests that only scripts/test_full.sh runs (marker ``full`` on every case): checks of
#: measurement tools outside the package, whose cost in the quick run is mostly their build.
FULL_ONLY = {
    # The fuzzers' smoke tests (43 s together): scripts/test_full.sh's packaging job fuzzes the
    # same entry points for 30 s (fuzz_python.py) and replays the decoder's corpus under ASan.
    "test_fuzz_smoke": {"test_mutated_models_give_clean_errors",
                        "test_mutated_feeds_give_clean_errors_and_leave_the_layers_right"},
    # test_memory_growth: below. Its sessions' loop stays in the quick run; the loop from 4
    # threads (22-39 s), the layers' and the converted models' loops go to the full run.
    # The measurement scripts' own checks (the quick run had grown to 5 min 29 s of
    # tests, 7 min 8 s with set-up, over its 6): each runs a benchmark script end to end in a
    # process of its own, 37 s together; what they measure runs in the quick run's own tests.
    # test_serve's serve_bench --direct check (17.7 s): below, with the whole module.
    "test_lab": {"test_sweep_runs_every_mode_at_tiny_shapes",                             # 5.9 s
                 "test_persistent_rule_measures_the_table_beside_the_forced_kernel"},     # 2.9 s
    "test_multi_device": {"test_multi_gpu_script_runs_what_the_devices_allow"},           # 4.9 s
    "test_silero_vad": {"test_stream_bench_reports_every_engine",                         # 3.7 s
                        "test_stream_bench_rounds_and_breakdown"},
    "test_cli": {"test_bench_small_writes_report"},                                       # 3.3 s
    "test_fast_mode": {"test_coopmat_steps_script"},                                      # 2.5 s
    # Still 6 min 27 s on a fresh clone of 015b343 after the above (tests 4 min 49 s): the
    # exact-mode placements of special values (13.4 s for the one case the quick run kept;
    # test_special_values runs every placement in the default mode, test_step_kernels and
    # test_special_values_exact's activations run special values in exact mode) and the
    # converted-models growth loop (6.8 s; the sessions' loop runs the same release path).
    "test_special_values_exact": {"test_placements"},
    # Mode "fast"'s placements (with the matrix-unit steps): on a device without
    # matrix units (lavapipe, CI) they run the deterministic kernels test_placements runs,
    # so only a device with them learns something; 4-7 s a layer.
    "test_special_values": {"test_placements_fast"},
    "test_memory_growth": {"test_sessions_made_in_threads_release_their_memory",
                           "test_converted_models_in_plain_sessions_release_their_memory",
                           "test_dropped_layers_release_their_memory"},   # 3.8 s
    # And 6 min 4 s at 871e1fa (set-up 104 s): Ray Serve, the optional `serve` extra, whose
    # module starts a local Ray first (13 s in all); the Batcher that decides how requests
    # become runs is tested without Ray in test_serve_wire, which stays.
    "test_serve": None,
}

#: Slow matrices whose cases are so long (tens of seconds each on lavapipe under validation)
#: that the quick run keeps fewer than one per value: module -> {test: cases kept}, the
#: greedy's first picks (those covering the most values). The full run has the rest.
QUICK_CAP = {
    # 13-28 s a case in exact mode; test_special_values runs the same placements in the
    # default mode, and the exact arithmetic has its own tests (test_exact_*).
    "test_special_values_exact": {"test_placements": 1, "test_activations": 4},
    "test_special_values": {"test_placements": 3},                            # 4-7 s a case
    "test_step_kernels": {"test_batched_kernel_gives_the_lanes_kernels_bits": 5,   # 3-9 s a case
                          "test_special_values_give_the_lanes_kernels_bits": 2,   # 1.2-6.4 s
                          "test_every_tiling_gives_the_same_bits": 4,             # 0.5-1.6 s
                          "test_register_tile_reads_h_at_any_alignment": 2},      # 1.8 s
    "test_kernels": {"test_odd_hidden_and_large_batch": 5},                       # 0.5-3.6 s
    "test_sequence_kernel": {"test_sequence_kernel_gives_the_step_kernels_bits": 4,   # 10-30 s cold
                             "test_special_values_give_the_step_kernels_bits": 2},
    "test_exact_functions": {"test_float16_rounding_is_round_to_nearest_even_for_every_half": 2},  # 1 s
    # 2.9-5.4 s a case; test_coalesced_requests_get_their_own_bits covers every cell.
    "test_coalesce": {"test_coalesced_requests_exact_mode": 1,
                      # 1.8-3.2 s a case on lavapipe, where they run the portable kernels
                      # (test_coalesced_requests_get_their_own_bits covers every cell there).
                      "test_coalesced_requests_fast_mode_matrix_steps": 1},
}

#: The suites scripts/ci/conformance.py runs too (scripts/test_full.sh runs that job; it and
#: scripts/test.sh deselect these with -m "not conformance", so that each suite runs once).
CONFORMANCE = {
    "test_conformance": {"test_backend_suite_all_pass", "test_differential_suite_all_pass"},
}


def _listed(table, item) -> bool:
    module = item.module.__name__.rpartition(".")[2] if item.module else ""
    if module not in table:
        return False
    names = table[module]
    return names is None or item.originalname in names or item.name in names


def _features(item) -> set:
    """What a case varies, read from its id: one feature per parameter's id part (its
    position and text), each split at "+" and "," (option sets, activation lists), so a case
    object whose id lists its cell, direction, precision, options, ... counts each of them."""
    parts = item.callspec.id.split("-")
    positional = len(parts) == len(item.callspec.params)
    return {(i if positional else None, t) for i, part in enumerate(parts)
            for t in re.split(r"[+,]", part)}


def representative(items, cap: int | None = None) -> set:
    """The cases of one parametrized test that the quick run keeps: greedily the case that
    adds the most features not yet seen (:func:`_features`; ties in collection order) until
    every value of every parameter (each cell, direction, precision, mode, option,
    activation, shape, ...) has run at least once, or ``cap`` cases are kept."""
    feats = {item.nodeid: _features(item) for item in items}
    order = [item.nodeid for item in items]
    seen: set = set()
    kept: list = []
    while cap is None or len(kept) < cap:
        best = max(order, key=lambda n: (len(feats[n] - seen), -order.index(n)), default=None)
        if best is None or not feats[best] - seen:
            break
        kept.append(best)
        seen |= feats[best]
        order.remove(best)
    return set(kept)


def _mark_matrix_rest(items) -> None:
    """Mark ``full`` the cases of the slow parametrized matrices beyond their representative
    subset (:func:`representative`): scripts/test.sh, the quick command, runs ``not full``;
    scripts/test_full.sh's lane ``matrix`` runs ``full``. Together they run every case once."""
    groups: dict = {}
    for item in items:
        if _listed(SLOW, item) and getattr(item, "callspec", None) is not None:
            groups.setdefault((item.module.__name__, item.originalname), []).append(item)
    for (module, name), group in groups.items():
        caps = QUICK_CAP.get(module.rpartition(".")[2], {})
        kept = representative(group, caps.get(name))
        for item in group:
            if item.nodeid not in kept:
                item.add_marker(pytest.mark.full)


@pytest.hookimpl(tryfirst=True)  # before -m deselects by marker
def pytest_collection_modifyitems(config, items):
    for item in items:
        if not _listed(NO_DEVICE, item):
            item.add_marker(pytest.mark.gpu)
        if _listed(SLOW, item):
            item.add_marker(pytest.mark.slow)
        if _listed(CONFORMANCE, item):
            item.add_marker(pytest.mark.conformance)
        if _listed(FULL_ONLY, item):
            item.add_marker(pytest.mark.full)
    _mark_matrix_rest(items)
    _longest_first(items)


#: The quick command's longest tests (tens of seconds each on lavapipe with Mesa's cache empty),
#: by node id prefix. They go first, so that pytest-xdist, which deals the first tests round
#: robin, starts them on different processes rather than leaving one to end the run alone.
LONGEST = ("tests/test_persistent_kernel.py::test_forced_on_it_gives_the_step_kernels_bits_at_every_shape",
           "tests/test_cpp.py::test_the_cores_cpp_unit_tests_pass")


def _longest_first(items) -> None:
    def rank(item):
        return next((i for i, prefix in enumerate(LONGEST) if item.nodeid.startswith(prefix)), len(LONGEST))

    items.sort(key=rank)   # stable: every other test keeps its place


class DeviceUsed(BaseException):
    """A test not marked gpu reached Vulkan (a BaseException, so that no pytest.raises(...)
    or except Exception in the code under test can swallow it)."""


class _NoDevice:
    """Stands in for the native module while no selected test is marked gpu: reading
    validation messages is allowed, enumerating devices and creating a context are not."""

    def __init__(self, real):
        self._real = real

    def __getattr__(self, name):
        if name in ("Context", "enumerate_devices"):
            raise DeviceUsed(f"ortops._vk.{name}: this test needs a Vulkan device; mark it gpu "
                             "(tests/conftest.py, NO_DEVICE)")
        return getattr(self._real, name)


def pytest_collection_finish(session):
    if any(item.get_closest_marker("gpu") for item in session.items):
        return
    try:
        import ortops.device as device
    except Exception:
        return
    real = device._native
    cached = []

    def guarded():
        if not cached:
            cached.append(_NoDevice(real()))
        return cached[0]

    device._native = guarded


def pytest_addoption(parser):
    parser.addoption(
        "--vk-validation",
        action="store_true",
        help="run GPU-path tests under the Khronos validation layer with synchronization validation",
    )
    parser.addoption(
        "--onnxruntime-version",
        metavar="VERSION",
        help="refuse to start unless the onnxruntime imported is this version (CI's run against "
        "the oldest admitted onnxruntime, from a pip --target layer on PYTHONPATH)",
    )
    parser.addoption(
        "--shipping-build",
        action="store_true",
        help="the ortops installed is a wheel's (no test hooks): check that its native module has none "
        "(scripts/test_packaging.sh) instead of requiring them",
    )
    parser.addoption(
        "--cpp-tests",
        metavar="PROGRAM",
        help="also run the core's C++ unit tests, the doctest program PROGRAM (scripts/cpp_tests.sh plain "
        "--build-only builds it and prints its path), as one test of this session (tests/test_cpp.py; "
        "collected only with this option): scripts/test.sh's quick command passes it. Give it as "
        "--cpp-tests=PROGRAM: pytest finds this file from the paths on its command line before it knows "
        "this option, so PROGRAM as a separate word would be taken for a path to test",
    )
    parser.addoption(
        "--fail-on-skip",
        action="store_true",
        help="a skipped or xfailed test fails the session (exit status 1): nothing counts as passed unless it ran",
    )


def pytest_ignore_collect(collection_path, config):
    if collection_path.name == "test_cpp.py" and not config.getoption("--cpp-tests"):
        return True
    return None


def pytest_configure(config):
    if config.getoption("--vk-validation"):
        os.environ["ORTOPS_VALIDATION"] = "1"
    if os.environ.get("ORTOPS_VALIDATION", "") not in ("", "0"):
        os.environ.setdefault("VK_LAYER_SETTINGS_PATH", str(HERE))
    wanted = config.getoption("--onnxruntime-version")
    if wanted:
        import onnxruntime

        if onnxruntime.__version__ != wanted:
            raise pytest.UsageError(
                f"--onnxruntime-version {wanted}: the onnxruntime imported is {onnxruntime.__version__} "
                f"({os.path.dirname(onnxruntime.__file__)})"
            )
    _check_test_hooks(config)


_REBUILD = "rebuild with scripts/setup.sh (ORTOPS_TESTING=ON)"


def _hook(vk, name: str):
    """A test hook of the native module by its TEST_HOOKS name ("inject_fault",
    "Layer.run_coalesced"), or None."""
    owner = vk
    for part in name.split("."):
        owner = getattr(owner, part, None)
    return owner


def _check_test_hooks(config) -> None:
    """The suite runs against the testing build of ortops._vk (scripts/setup.sh builds it with
    ORTOPS_TESTING=ON): its test hooks (fault injection, coalesced runs, weight layouts, the
    native tables, the config encoder) are bound only there, and tests that need them must not
    meet a shipping module halfway through. With --shipping-build (a wheel's module) it is the
    other way round: none of them may be there."""
    try:
        from ortops import _vk
    except ImportError as e:
        raise pytest.UsageError(f"ortops._vk cannot be imported ({e}): {_REBUILD}") from None
    hooks = getattr(_vk, "TEST_HOOKS", None)
    if config.getoption("--shipping-build"):
        found = [n for n in ("TEST_HOOKS", "inject_fault", "Layer.run_coalesced") if _hook(_vk, n) is not None]
        if found:
            raise pytest.UsageError(f"--shipping-build: ortops._vk ({_vk.__file__}) has test hooks {found}")
        return
    if hooks is None:
        raise pytest.UsageError(f"ortops._vk ({_vk.__file__}) has no test hooks (TEST_HOOKS): {_REBUILD}")
    missing = [n for n in hooks if _hook(_vk, n) is None]
    if missing:
        raise pytest.UsageError(f"ortops._vk lacks the test hooks {missing}: {_REBUILD}")


def _onnxruntime_line() -> str:
    try:
        import onnxruntime
    except ImportError as e:
        return f"ortops: onnxruntime not importable ({e})"
    return f"ortops: onnxruntime {onnxruntime.__version__} from {os.path.dirname(onnxruntime.__file__)}"


def pytest_report_header(config):
    on = os.environ.get("ORTOPS_VALIDATION", "") not in ("", "0")
    return [f"ortops: Vulkan synchronization validation {'ON' if on else 'off'}", _onnxruntime_line()]


_NOT_RUN = []  # (nodeid, outcome) of skipped and xfailed tests, for --fail-on-skip


def pytest_runtest_logreport(report):
    if report.skipped:
        _NOT_RUN.append((report.nodeid, "xfailed" if hasattr(report, "wasxfail") else "skipped"))


def pytest_sessionfinish(session, exitstatus):
    if session.config.getoption("--fail-on-skip") and _NOT_RUN and exitstatus == pytest.ExitCode.OK:
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


def pytest_terminal_summary(terminalreporter, exitstatus, config):
    terminalreporter.write_line(_onnxruntime_line())  # also under -q, which hides the header
    for report in terminalreporter.stats.get("passed", []) + terminalreporter.stats.get("failed", []):
        summary = dict(getattr(report, "user_properties", ())).get("cpp_summary")
        if summary and report.when == "call":
            terminalreporter.write_line(f"ortops: the core's C++ unit tests: {summary}")
    if config.getoption("--fail-on-skip") and _NOT_RUN:
        terminalreporter.write_line(
            f"--fail-on-skip: {len(_NOT_RUN)} test(s) did not run, the session fails: "
            + ", ".join(f"{n} ({o})" for n, o in _NOT_RUN[:10]),
            red=True,
        )


@pytest.fixture(autouse=True)
def _fail_on_validation_messages():
    """Fail the test that caused any validation-layer warning or error."""
    try:
        from ortops.device import validation_messages
    except Exception:  # pure-Python tests on a machine without the native module
        yield
        return
    try:
        validation_messages()  # drop what a previous test left behind
    except RuntimeError:
        yield
        return
    yield
    messages = validation_messages()
    if messages:
        shown = "\n".join(m[:600] for m in messages[:5])
        pytest.fail(f"{len(messages)} Vulkan validation message(s):\n{shown}", pytrace=False)


@pytest.fixture
def inject_fault():
    """``inject_fault(kind, value)``: every run of the native core fails ("fail") or has its
    float outputs scaled ("scale") or shifted ("add") until the test ends (both doors: the
    custom-op library and ortops._vk share the core)."""
    from ortops import _vk

    yield lambda kind, value=0.0: _vk.inject_fault(kind, value)
    _vk.inject_fault("")


@pytest.fixture
def build_counter():
    """The native core's layer constructions (each one a weight upload: ``builds``) and runs
    (``calls``) since the test began, counted by the core for both doors (_vk.core_counters)."""
    from ortops import _vk

    start = _vk.core_counters()
    names = {"builds": "layers_created", "calls": "runs"}

    class Counts:
        def __getitem__(self, key):
            return _vk.core_counters()[names[key]] - start[names[key]]

    return Counts()
