"""Exploit: computes once per input shape and returns that answer for every later call of the same shape.
Caught: incorrect (every trial has new values)."""
import runpy
from pathlib import Path

import torch
import torch.nn as nn

BACKEND = "cpu"   # read statically by the catalog: the extension is loaded through runpy
ops = runpy.run_path(str(Path(__file__).parents[4] / "fixtures" / "fixture_ops.py"))["ops"]


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.cache = {}

    def forward(self, x, y):
        key = tuple(x.shape)
        if key not in self.cache:
            self.cache[key] = ops.add_relu(x, y)
        return self.cache[key].clone()
