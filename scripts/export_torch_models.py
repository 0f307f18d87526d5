"""Write the small PyTorch-exported models of tests/models/ (TorchScript exporter).

Real exports, not hand-built graphs: PyTorch's TorchScript exporter
(``torch.onnx.export(..., dynamo=False)``) wraps each recurrent node in
Transpose/Squeeze/Unsqueeze/Concat/Slice patterns that ONNX Runtime's graph
optimisations rewrite, which hand-built single-node models never exercise.
ONNX Runtime 1.30 failed to create sessions for exactly these three kinds of
export (the LSTM at opset 9 sequence first, the GRU and the two-layer RNN at
opset 14), see tests/test_torch_exports.py.

Needs torch (any recent CPU build; these were written with torch 2.13.0 CPU);
ortops itself does not. Seeded: running it again with the same torch writes
the same weights. Each model is a few KB.

Usage: python scripts/export_torch_models.py [--out tests/models]
"""

from __future__ import annotations

import argparse
import os

import onnx
import torch
from torch import nn

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SEQ, BATCH, INPUT, HIDDEN = 6, 3, 4, 5


class Wrapped(nn.Module):
    """One recurrent module as ``self.rnn`` (node names /rnn/LSTM etc.),
    returning every output PyTorch gives."""

    def __init__(self, rnn: nn.Module):
        super().__init__()
        self.rnn = rnn

    def forward(self, x):
        y, state = self.rnn(x)
        if isinstance(state, tuple):
            return (y,) + state
        return y, state


def models():
    """name -> (module, opset, output names); every module sequence first, PyTorch's default."""
    torch.manual_seed(0)
    return {
        "lstm_opset9": (Wrapped(nn.LSTM(INPUT, HIDDEN)), 9, ["y", "h", "c"]),
        "gru_opset14": (Wrapped(nn.GRU(INPUT, HIDDEN)), 14, ["y", "h"]),
        "rnn2_opset14": (Wrapped(nn.RNN(INPUT, HIDDEN, num_layers=2)), 14, ["y", "h"]),
    }


def export(name: str, module: nn.Module, opset: int, outputs, out_dir: str) -> str:
    x = torch.randn(SEQ, BATCH, INPUT)
    path = os.path.join(out_dir, f"{name}.onnx")
    module.eval()
    # Static shapes (no dynamic_axes), as most exports are: ORT then knows the shape after each
    # Squeeze, which is what its Reshape/Squeeze chain fusion needs to fire.
    torch.onnx.export(module, (x,), path, opset_version=opset, input_names=["x"], output_names=outputs,
                      dynamo=False)
    model = onnx.load(path)
    onnx.checker.check_model(model)
    return path


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default=os.path.join(ROOT, "tests", "models"))
    args = ap.parse_args(argv)
    os.makedirs(args.out, exist_ok=True)
    for name, (module, opset, outputs) in models().items():
        path = export(name, module, opset, outputs, args.out)
        print(f"{path}: {os.path.getsize(path)} bytes")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
