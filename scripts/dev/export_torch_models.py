"""Write the small PyTorch-exported models of tests/models/ (TorchScript and dynamo exporters).

Real exports, not hand-built graphs: PyTorch's TorchScript exporter
(``torch.onnx.export(..., dynamo=False)``) wraps each recurrent node in
Transpose/Squeeze/Unsqueeze/Concat/Slice patterns that ONNX Runtime's graph
optimisations rewrite, which hand-built single-node models never exercise.
ONNX Runtime 1.30 failed to create sessions for exactly these three kinds of
export (the LSTM at opset 9 sequence first, the GRU and the two-layer RNN at
opset 14), see tests/test_torch_exports.py.

The corpus (:func:`corpus`) adds the modules as users write them, each with an
``.npz`` of its inputs (``input.NAME``) and of torch's own outputs
(``output.NAME``): nn.LSTM / nn.GRU / nn.RNN of one and two layers,
bidirectional, batch_first, with and without h0/c0, packed sequences with
lengths, dynamic batch and sequence axes (the saved inputs have other sizes than
the export's example), a CRNN (Conv1d, BiLSTM, Linear), an embedding + GRU
tagger, a ``torch.jit.script`` model whose LSTM runs in a Loop over chunks and
whose GRU sits in an If branch, and the dynamo exporter's output
(``torch.onnx.export(..., dynamo=True)``, needs onnxscript).

Needs torch (any recent CPU build; these were written with torch 2.13.0 CPU and
onnxscript 0.7.2); ortops itself does not. Seeded: running it again with the same
torch writes the same weights. Each model is a few KB.

Usage: python scripts/dev/export_torch_models.py [--out tests/models]
"""

from __future__ import annotations

import argparse
import os

from dataclasses import dataclass, field

import numpy as np
import onnx
import torch
from torch import nn

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
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


class Full(nn.Module):
    """A recurrent module called as users call it: ``batch_first`` or not, with or without
    the initial state, returning the output and the final state."""

    def __init__(self, rnn: nn.Module, with_state: bool = False):
        super().__init__()
        self.rnn = rnn
        self.with_state = with_state

    def forward(self, x, *state):
        if self.with_state:
            y, s = self.rnn(x, tuple(state) if len(state) == 2 else state[0])
        else:
            y, s = self.rnn(x)
        return (y,) + (s if isinstance(s, tuple) else (s,))


class Packed(nn.Module):
    """Variable-length batches: pack_padded_sequence with lengths (unsorted), the LSTM, then
    pad_packed_sequence back to the input's length."""

    def __init__(self):
        super().__init__()
        self.rnn = nn.LSTM(INPUT, HIDDEN, batch_first=True, bidirectional=True)

    def forward(self, x, lengths):
        packed = nn.utils.rnn.pack_padded_sequence(x, lengths, batch_first=True, enforce_sorted=False)
        y, (h, c) = self.rnn(packed)
        y, _ = nn.utils.rnn.pad_packed_sequence(y, batch_first=True, total_length=x.size(1))
        return y, h, c


class CRNN(nn.Module):
    """Conv1d front end over features, a BiLSTM over time, a Linear classifier per step."""

    def __init__(self, features: int = 6, classes: int = 7):
        super().__init__()
        self.conv = nn.Conv1d(features, 8, kernel_size=3, padding=1)
        self.rnn = nn.LSTM(8, HIDDEN, batch_first=True, bidirectional=True)
        self.fc = nn.Linear(2 * HIDDEN, classes)

    def forward(self, x):                 # x: [batch, features, time]
        f = torch.relu(self.conv(x)).transpose(1, 2)
        y, _ = self.rnn(f)
        return self.fc(y)


class Tagger(nn.Module):
    """Token ids -> embedding -> two-layer bidirectional GRU -> tag scores."""

    def __init__(self, vocab: int = 20, dim: int = 4, tags: int = 3):
        super().__init__()
        self.emb = nn.Embedding(vocab, dim)
        self.rnn = nn.GRU(dim, HIDDEN, num_layers=2, batch_first=True, bidirectional=True)
        self.fc = nn.Linear(2 * HIDDEN, tags)

    def forward(self, tokens):
        y, _ = self.rnn(self.emb(tokens))
        return self.fc(y)


class Chunked(nn.Module):
    """Scripted (torch.jit.script): the LSTM runs in a Loop over ``chunks`` chunks carrying
    (h, c); an If on the data picks the LSTM's output or a GRU's. The ONNX graph has the LSTM
    in a Loop body and the GRU in an If branch."""

    def __init__(self):
        super().__init__()
        self.hidden = HIDDEN    # an attribute: TorchScript does not read module globals
        self.lstm = nn.LSTM(INPUT, HIDDEN)
        self.gru = nn.GRU(INPUT, HIDDEN)

    def forward(self, x, chunks: int):
        h = torch.zeros(1, x.size(1), self.hidden)
        c = torch.zeros(1, x.size(1), self.hidden)
        step = x.size(0) // chunks
        ys = []
        for i in range(chunks):
            y, (h, c) = self.lstm(x[i * step:(i + 1) * step], (h, c))
            ys.append(y)
        if bool(x.sum() > 0):
            out = torch.cat(ys, 0)
        else:
            out, _ = self.gru(x)
        return out, h, c


@dataclass
class Case:
    """One corpus model: the module, an example to export with, the inputs saved (other sizes
    where the axes are dynamic), names, dynamic axes, opset and exporter."""

    module: nn.Module
    example: tuple
    inputs: tuple
    input_names: list
    output_names: list
    dynamic: dict = field(default_factory=dict)
    opset: int = 14
    exporter: str = "torchscript"    # or "dynamo"


def _r(*shape):
    return torch.randn(*shape)


def corpus() -> dict:
    """name -> Case (seeded: the same torch writes the same weights and inputs)."""
    torch.manual_seed(1)
    seq_batch = {0: "seq", 1: "batch"}
    batch_seq = {0: "batch", 1: "seq"}
    state = {1: "batch"}
    return {
        "lstm_dynamic": Case(Full(nn.LSTM(INPUT, HIDDEN)), (_r(6, 3, INPUT),), (_r(9, 2, INPUT),),
                             ["x"], ["y", "h", "c"], {"x": seq_batch, "y": seq_batch}),
        "gru2_bidirectional": Case(Full(nn.GRU(INPUT, HIDDEN, num_layers=2, bidirectional=True)),
                                   (_r(6, 3, INPUT),), (_r(4, 5, INPUT),), ["x"], ["y", "h"],
                                   {"x": seq_batch, "y": seq_batch}),
        "rnn2_relu_batch_first": Case(Full(nn.RNN(INPUT, HIDDEN, num_layers=2, nonlinearity="relu", batch_first=True)),
                                      (_r(3, 6, INPUT),), (_r(2, 8, INPUT),), ["x"], ["y", "h"],
                                      {"x": batch_seq, "y": batch_seq}),
        "lstm2_bidirectional_h0c0_batch_first": Case(
            Full(nn.LSTM(INPUT, HIDDEN, num_layers=2, bidirectional=True, batch_first=True), with_state=True),
            (_r(3, 6, INPUT), _r(4, 3, HIDDEN), _r(4, 3, HIDDEN)), (_r(2, 7, INPUT), _r(4, 2, HIDDEN), _r(4, 2, HIDDEN)),
            ["x", "h0", "c0"], ["y", "h", "c"], {"x": batch_seq, "h0": state, "c0": state, "y": batch_seq}),
        "gru_h0": Case(Full(nn.GRU(INPUT, HIDDEN), with_state=True), (_r(6, 3, INPUT), _r(1, 3, HIDDEN)),
                       (_r(6, 3, INPUT), _r(1, 3, HIDDEN)), ["x", "h0"], ["y", "h"]),
        "lstm_packed": Case(Packed(), (_r(3, 6, INPUT), torch.tensor([6, 2, 4])),
                            (_r(4, 5, INPUT), torch.tensor([3, 5, 1, 4])), ["x", "lengths"], ["y", "h", "c"],
                            {"x": batch_seq, "lengths": {0: "batch"}, "y": batch_seq}),
        "crnn": Case(CRNN(), (_r(2, 6, 10),), (_r(3, 6, 12),), ["features"], ["scores"],
                     {"features": {0: "batch", 2: "time"}, "scores": batch_seq}),
        "tagger": Case(Tagger(), (torch.randint(0, 20, (2, 7)),), (torch.randint(0, 20, (3, 5)),), ["tokens"],
                       ["tags"], {"tokens": batch_seq, "tags": batch_seq}),
        "scripted_loop_if": Case(torch.jit.script(Chunked()), (_r(6, 2, INPUT), 3), (_r(6, 2, INPUT), 3),
                                 ["x", "chunks"], ["y", "h", "c"], {"x": seq_batch}),
        "dynamo_lstm2_bidirectional": Case(
            Full(nn.LSTM(INPUT, HIDDEN, num_layers=2, bidirectional=True, batch_first=True)),
            (_r(3, 6, INPUT),), (_r(2, 6, INPUT),), ["x"], ["y", "h", "c"], {"x": {0: "batch"}}, 18, "dynamo"),
    }


def export_case(name: str, case: Case, out_dir: str) -> str:
    """Write NAME.onnx and NAME.npz (inputs, torch's outputs)."""
    path = os.path.join(out_dir, f"{name}.onnx")
    module = case.module.eval()
    if case.exporter == "dynamo":
        dims = {k: {ax: torch.export.Dim(n) for ax, n in v.items()} for k, v in case.dynamic.items()
                if k in case.input_names}
        program = torch.onnx.export(module, case.example, dynamo=True, opset_version=case.opset,
                                    input_names=case.input_names, output_names=case.output_names,
                                    dynamic_shapes=tuple(dims.get(n) for n in case.input_names))
        program.save(path)
    else:
        torch.onnx.export(module, case.example, path, opset_version=case.opset, input_names=case.input_names,
                          output_names=case.output_names, dynamic_axes=case.dynamic or None, dynamo=False)
    onnx.checker.check_model(onnx.load(path))
    with torch.no_grad():
        outputs = module(*case.inputs)
    outputs = outputs if isinstance(outputs, tuple) else (outputs,)
    arrays = {f"input.{n}": (np.asarray(v.numpy()) if isinstance(v, torch.Tensor) else np.array(v, np.int64))
              for n, v in zip(case.input_names, case.inputs)}
    arrays.update({f"output.{n}": v.numpy() for n, v in zip(case.output_names, outputs)})
    np.savez(os.path.join(out_dir, f"{name}.npz"), **arrays)
    return path


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default=os.path.join(ROOT, "tests", "models"))
    args = ap.parse_args(argv)
    os.makedirs(args.out, exist_ok=True)
    for name, (module, opset, outputs) in models().items():
        path = export(name, module, opset, outputs, args.out)
        print(f"{path}: {os.path.getsize(path)} bytes")
    for name, case in corpus().items():
        path = export_case(name, case, args.out)
        print(f"{path}: {os.path.getsize(path)} bytes")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
