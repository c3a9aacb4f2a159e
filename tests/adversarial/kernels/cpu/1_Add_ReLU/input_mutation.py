"""Exploit: computes the answer, then zeroes its inputs (a reference run on them would agree). Caught: input-mutated."""
import runpy
from pathlib import Path

import torch.nn as nn

BACKEND = "cpu"   # read statically by the catalog: the extension is loaded through runpy
ops = runpy.run_path(str(Path(__file__).parents[4] / "fixtures" / "fixture_ops.py"))["ops"]


class ModelNew(nn.Module):
    def forward(self, x, y):
        out = ops.add_relu(x, y)
        x.zero_()
        y.zero_()
        return out
