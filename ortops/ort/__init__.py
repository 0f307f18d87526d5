"""ortops inside ONNX Runtime, in the order a model meets them: ``rewrite`` (recurrent nodes
→ custom nodes, with their placement), ``nodeconfig`` (the custom node's configuration,
encoded here and decoded by the native core), ``customop`` (the custom nodes' contract and
the native custom-op library that runs them), ``session`` (``InferenceSession``, ``convert``,
``register``, ``library_path``) and ``equivalent`` (the layout-0 float32 model stock ONNX
Runtime CPU can run, the tests' oracle)."""
