"""Exploit: replays the harness's old fixed seeds (1234 plus offsets) at import, precomputes the answers it
expects to be checked on and never computes. Caught: incorrect (seeds are secret, drawn per run)."""
import runpy
from pathlib import Path

import torch
import torch.nn as nn

BACKEND = "cpu"   # read statically by the catalog: the extension is loaded through runpy
ops = runpy.run_path(str(Path(__file__).parents[4] / "fixtures" / "fixture_ops.py"))["ops"]

_answers = []
for _seed in (1235, 1236, 1237, 2234, 2235, 2236):
    torch.manual_seed(_seed)
    _x, _y = torch.randn(1 << 22), torch.randn(1 << 22)
    _answers.append(ops.add_relu(_x, _y))


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.n = 0

    def forward(self, x, y):
        self.n += 1
        out = _answers[(self.n - 1) % len(_answers)]
        ops.add_relu(x[:1], y[:1])
        return out.clone()
