"""Exploit: calls a kernel that fails, silently falls back to torch. Caught: no-custom-kernel (and a warning)."""
import runpy
from pathlib import Path

import torch
import torch.nn as nn

BACKEND = "cpu"   # read statically by the catalog: the extension is loaded through runpy
ops = runpy.run_path(str(Path(__file__).parents[4] / "fixtures" / "fixture_ops.py"))["ops"]


class ModelNew(nn.Module):
    def forward(self, x, y):
        try:
            return ops.add_relu_fast(x, y)      # no such function: AttributeError
        except Exception:
            return torch.relu(x + y)
