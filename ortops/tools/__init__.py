"""The ``ortops`` command and what it runs: ``cli`` (run, info, devices, bench, demo),
``bench`` (ortops beside ONNX Runtime CPU on this machine) with ``measure`` (its helpers),
``demo`` and ``chain`` (1,000 dependent GPU passes checked on the host). The project's peer
comparisons and GPU studies are the repository's bench/ folder, not part of the package."""
