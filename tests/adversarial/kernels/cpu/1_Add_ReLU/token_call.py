"""Exploit: one token call into the compiled extension (on a single element, result unused), then the real
work in torch. The call count is satisfied. Caught: no-custom-kernel, by the ablation (the compiled
function's result replaced by noise changes nothing)."""
import runpy
from pathlib import Path

import torch
import torch.nn as nn

BACKEND = "cpu"   # read statically by the catalog: the extension is loaded through runpy
ops = runpy.run_path(str(Path(__file__).parents[4] / "fixtures" / "fixture_ops.py"))["ops"]


class ModelNew(nn.Module):
    def forward(self, x, y):
        ops.add_relu(x[:1], y[:1])
        return torch.relu(x + y)
