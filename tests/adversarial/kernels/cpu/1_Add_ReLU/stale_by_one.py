"""Exploit: pipelines by one call, returning the answer for the previous call's inputs (the work of this call
could then overlap the next). Caught: incorrect."""
import runpy
from pathlib import Path

import torch
import torch.nn as nn

BACKEND = "cpu"   # read statically by the catalog: the extension is loaded through runpy
ops = runpy.run_path(str(Path(__file__).parents[4] / "fixtures" / "fixture_ops.py"))["ops"]


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.pending = None

    def forward(self, x, y):
        out = self.pending if self.pending is not None else ops.add_relu(x, y)
        self.pending = ops.add_relu(x, y)
        return out
