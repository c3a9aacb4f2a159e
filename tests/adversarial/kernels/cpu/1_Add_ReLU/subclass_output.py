"""Exploit: returns a tensor subclass (could defer or fake work). Caught: bad-output."""
import runpy
from pathlib import Path

import torch
import torch.nn as nn

BACKEND = "cpu"   # read statically by the catalog: the extension is loaded through runpy
ops = runpy.run_path(str(Path(__file__).parents[4] / "fixtures" / "fixture_ops.py"))["ops"]


class Lazy(torch.Tensor):
    pass


class ModelNew(nn.Module):
    def forward(self, x, y):
        return ops.add_relu(x, y).as_subclass(Lazy)
