"""ortops inside ONNX Runtime, in the order a model meets them: ``rewrite`` (recurrent nodes
→ custom nodes, with their placement), ``nodeconfig`` (the custom node's configuration,
encoded and decoded in one place), ``customop`` (what onnxruntime-extensions calls at run
time), ``registry`` (the layers and per-run errors the custom nodes reach), ``session``
(``InferenceSession``, ``convert``, ``register``) and ``equivalent`` (the layout-0 float32
model stock ONNX Runtime CPU can run, the tests' oracle)."""
