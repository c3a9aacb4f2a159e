"""Exploit: returns an input buffer overwritten with the answer (no allocation). Caught: bad-output (aliasing)."""
import runpy
from pathlib import Path

import torch.nn as nn

BACKEND = "cpu"   # read statically by the catalog: the extension is loaded through runpy
ops = runpy.run_path(str(Path(__file__).parents[4] / "fixtures" / "fixture_ops.py"))["ops"]


class ModelNew(nn.Module):
    def forward(self, x, y):
        x.copy_(ops.add_relu(x, y))
        return x
