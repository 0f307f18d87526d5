"""Test switch for Vulkan synchronization validation.

``pytest --vk-validation`` (or ORTOPS_VALIDATION=1 in the environment) creates every ortops
Vulkan context under the Khronos validation layer with synchronization validation
(tests/vk_layer_settings.txt, a copy of the project's shared settings). Any validation
message a test causes fails that test, naming the message. A test that provokes messages on
purpose takes them itself through ortops.device.validation_messages().
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


def pytest_configure(config):
    if config.getoption("--vk-validation"):
        os.environ["ORTOPS_VALIDATION"] = "1"
    if os.environ.get("ORTOPS_VALIDATION", "") not in ("", "0"):
        os.environ.setdefault("VK_LAYER_SETTINGS_PATH", str(HERE))


def pytest_report_header(config):
    on = os.environ.get("ORTOPS_VALIDATION", "") not in ("", "0")
    return f"ortops: Vulkan synchronization validation {'ON' if on else 'off'}"


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
