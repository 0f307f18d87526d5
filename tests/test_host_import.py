"""The host-pointer import measurement (experiments/host_import/host_import_bench.cpp, issue 21 item 4) on the
local device: its check mode (sizes 12340 B, 80 KiB, 1 MiB; 2 runs after 1 warm-up) must round-trip
the data bit for bit in every variant it can run, in both directions, and a copy at the wrong
offset into the imported page range must be caught.

The tool is built by experiments/host_import/host_import_bench.sh (its own CMake project, experiments/host_import/CMakeLists.txt,
outside the package's build) and runs in a subprocess, so the suite's validation switch reaches it
through the environment: under ``--vk-validation`` (ORTOPS_VALIDATION=1, VK_LAYER_SETTINGS_PATH
set by tests/conftest.py) it runs under the Khronos validation layer with synchronization
validation and must report no message. A device without VK_EXT_external_memory_host is not a
skip: the tool must say so, and today's path must still round-trip.
"""

import json
import os
import subprocess

import pytest

from _scripts import ROOT

pytestmark = pytest.mark.gpu

SCRIPT = ROOT / "experiments" / "host_import" / "host_import_bench.sh"
NOT_OFFERED = "VK_EXT_external_memory_host: not offered by"
VARIANTS = ("a_today", "b_import_per_run", "c_import_cached")


def _run(*args, out=None):
    cmd = ["bash", str(SCRIPT), "--check", *args]
    if out is not None:
        cmd += ["--out", str(out)]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=600, cwd=str(ROOT), env=dict(os.environ))


def _validation_on() -> bool:
    return os.environ.get("ORTOPS_VALIDATION", "") not in ("", "0")


def test_check_mode_round_trips_bit_exactly_in_every_variant(tmp_path):
    proc = _run(out=tmp_path)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert "ROUND TRIP FAILED" not in proc.stdout + proc.stderr
    assert "round trip: bit-exact in every variant" in proc.stdout
    report = json.loads((tmp_path / "host_import.json").read_text())
    offered = report["external_memory_host"]["offered"]
    variants = VARIANTS if offered else ("a_today",)
    if offered:
        ext = report["external_memory_host"]
        assert NOT_OFFERED not in proc.stdout
        assert "VK_EXT_external_memory_host: offered; minImportedHostPointerAlignment" in proc.stdout
        assert ext["min_imported_host_pointer_alignment"] > 64   # so the 64-byte offset is exercised
        assert ext["importable_memory_types"]
    else:
        assert NOT_OFFERED in proc.stdout
    sizes = [12340, 80 * 1024, 1 << 20]
    got = {(r["bytes"], r["direction"], r["variant"]): r for r in report["results"]}
    assert set(got) == {(n, d, v) for n in sizes for d in ("in", "out") for v in variants}
    for r in got.values():
        assert r["verified_runs"] == 3             # the warm-up run is checked too
        assert len(r["runs_ms"]) == 2 and r["median_ms"] > 0
    assert report["settings"]["caller_offset"] == 64
    assert report["validation"] == _validation_on()
    if _validation_on():
        assert "validation: on" in proc.stdout
        assert "validation messages: 0" in proc.stdout, proc.stdout[-3000:]


def test_a_copy_at_the_wrong_offset_is_caught():
    """The import covers the caller's enclosing pages; copying at the range's start instead of
    the caller's offset in it must fail the check loudly (exit status 1)."""
    proc = _run("--sizes", "80K", "--fault-offset")
    if NOT_OFFERED in proc.stdout:
        # Nothing is imported, so nothing can be copied at the wrong offset: today's path ran.
        assert proc.returncode == 0, proc.stderr[-3000:]
        assert "round trip: bit-exact in every variant" in proc.stdout
        return
    assert proc.returncode == 1, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert "ROUND TRIP FAILED: b_import_per_run, in, 80 KiB, run 0" in proc.stderr


def test_bad_arguments_are_refused():
    proc = subprocess.run(["bash", str(SCRIPT), "--sizes", "10"], capture_output=True, text=True, timeout=600,
                          cwd=str(ROOT))
    assert proc.returncode == 2
    assert "multiple of 4" in proc.stderr
