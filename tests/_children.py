"""Run Python code in a child process that never imports ortops: plain onnxruntime and the
library only, as a C, C++, C# or Java host has them (the EP's tests: tests/test_ep.py,
tests/test_ep_placement.py)."""

import os
import subprocess
import sys

#: What the validation layer prints; any of it in a child's output fails the test under
#: ORTOPS_VALIDATION (the child's Vulkan instance is the library's, with the parent's settings).
VALIDATION_WORDS = ("Validation Error", "Validation Warning", "SYNC-HAZARD", "VUID-")


def run_child(code: str, *args: str, cwd, env: dict | None = None, timeout: float = 600) -> str:
    """``python -P -c code args...`` in ``cwd`` with ``env`` (default: this process's, less
    PYTHONSTARTUP); asserts exit status 0 and, under validation, no validation message.
    Returns stdout and stderr together."""
    env = dict(os.environ if env is None else env)
    env.pop("PYTHONSTARTUP", None)
    proc = subprocess.run([sys.executable, "-P", "-c", code, *args], cwd=str(cwd), env=env,
                          capture_output=True, text=True, timeout=timeout)
    assert proc.returncode == 0, f"child failed ({proc.returncode}):\n{proc.stdout[-4000:]}\n{proc.stderr[-4000:]}"
    output = proc.stdout + proc.stderr
    if os.environ.get("ORTOPS_VALIDATION", "") not in ("", "0"):
        for word in VALIDATION_WORDS:
            assert word not in output, f"validation message in the child's output:\n{output[-4000:]}"
    return output
