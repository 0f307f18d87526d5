"""The ``ortops`` command and what it runs: ``cli`` (run, info, devices, bench, demo),
``bench`` (the benchmark harness), ``demo`` and ``chain`` (1,000 dependent GPU passes checked
on the host)."""
