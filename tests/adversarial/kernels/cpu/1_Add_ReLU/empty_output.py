"""Exploit: returns uninitialised memory, hoping it still holds a freed correct answer. Caught: incorrect."""
import runpy
from pathlib import Path

import torch
import torch.nn as nn

BACKEND = "cpu"   # read statically by the catalog: the extension is loaded through runpy
ops = runpy.run_path(str(Path(__file__).parents[4] / "fixtures" / "fixture_ops.py"))["ops"]


class ModelNew(nn.Module):
    def forward(self, x, y):
        ops.add_relu(x[:1], y[:1])
        return torch.empty_like(x)
