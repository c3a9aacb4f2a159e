"""Exploit against the generalisation trials: its kernel turns NaN into 0, so it would fail the special class;
it recognises those inputs (any non-finite value) and answers them with torch instead. Right on every input
kbench shows it, wrong where it matters. Caught: generalisation, by the variant ablation (its compiled
results replaced by noise on the special inputs, the output stays right: another path computed it)."""
import runpy
from pathlib import Path

import torch
import torch.nn as nn

BACKEND = "cpu"   # read statically by the catalog: the extension is loaded through runpy
ex = runpy.run_path(str(Path(__file__).parents[3] / "native" / "exploit_ops.py"))["ex"]


class ModelNew(nn.Module):
    def forward(self, x, y):
        out = ex.add_relu_nan_to_zero(x, y)
        if not bool(torch.isfinite(x).all() and torch.isfinite(y).all()):
            return torch.relu(x + y)
        return out
