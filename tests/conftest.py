"""Test switch for Vulkan synchronization validation.

``pytest --vk-validation`` (or ORTOPS_VALIDATION=1 in the environment) creates every ortops
Vulkan context under the Khronos validation layer with synchronization validation
(tests/vk_layer_settings.txt, a copy of the project's shared settings). Any validation
message a test causes fails that test, naming the message. A test that provokes messages on
purpose takes them itself through ortops.device.validation_messages().

The header and the summary name the onnxruntime imported (CI also runs the session tests
against the oldest admitted one). ``--onnxruntime-version V`` refuses to start with another
one; ``--fail-on-skip`` makes a skipped or xfailed test fail the session.
"""

import os
import pathlib

import pytest

HERE = pathlib.Path(__file__).resolve().parent


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
        "--fail-on-skip",
        action="store_true",
        help="a skipped or xfailed test fails the session (exit status 1): nothing counts as passed unless it ran",
    )


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
