"""The core's C++ unit tests (tests/cpp, doctest: the core alone, no ONNX Runtime or Python, on
the first Vulkan device) as one test of this session, collected only with ``--cpp-tests
PROGRAM`` (the program scripts/cpp_tests.sh builds; scripts/test.sh passes it; named without
it, this file fails saying so). Why a pytest
test: in the quick command they run in one of pytest-xdist's processes beside the Python tests,
instead of alone before them with a core idle (each compiles its pipelines on one core).

The program runs in the environment the session started with, less the kernel switches
tests/conftest.py sets for the Python suite (:data:`conftest.PYTHON_SUITE_SWITCHES`): the C++
tests choose their kernels themselves (tests/cpp/support.hpp), and check the table's choice where
it is their subject. Under --vk-validation it runs under the validation layer too, and any
validation message fails it (tests/cpp/main.cpp names the case that caused it). Two rounds of
the race test's sweep, as scripts/test.sh always ran them
(ORTOPS_TEST_ROUNDS; the ThreadSanitizer job runs 32). The summary it records carries the
program's count of persistent grids a device ran and of those that went to the step kernels.
"""

import os
import re
import subprocess
import time

import conftest


def test_the_cores_cpp_unit_tests_pass(request, record_property):
    program = request.config.getoption("--cpp-tests")
    assert program, ("tests/test_cpp.py runs the core's C++ unit tests: pass --cpp-tests PROGRAM, the path "
                     "`scripts/cpp_tests.sh plain --build-only` prints (scripts/test.sh does)")
    env = {k: v for k, v in os.environ.items() if k not in conftest.PYTHON_SUITE_SWITCHES}
    env.setdefault("ORTOPS_TEST_ROUNDS", "2")
    start = time.monotonic()
    r = subprocess.run([program], env=env, capture_output=True, text=True, timeout=1200)
    seconds = time.monotonic() - start
    out = r.stdout + r.stderr
    cases = re.search(r"\[doctest\] test cases:\s*(\d+) \|\s*(\d+) passed \|\s*(\d+) failed", out)
    assertions = re.search(r"\[doctest\] assertions:\s*(\d+)", out)
    record_property("cpp_summary", f"{cases.group(2) if cases else '?'} of {cases.group(1) if cases else '?'} "
                                   f"test cases passed, {assertions.group(1) if assertions else '?'} assertions, "
                                   f"{seconds:.0f} s ({program})"
                                   + "".join(f"; {line}" for line in re.findall(r"^persistent grids on .*$", out, re.M)))
    assert r.returncode == 0 and cases is not None and cases.group(3) == "0", \
        f"{program} exited with status {r.returncode}:\n{out[-6000:]}"
