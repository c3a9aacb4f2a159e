"""Exploit: torch does the work, then an identity "kernel" (a memcpy) copies the answer, so noise in its
result changes the output and the ablation is satisfied. Caught: library-heavy (most of the time in aten)."""
import runpy
from pathlib import Path

import torch
import torch.nn as nn

BACKEND = "cpu"   # read statically by the catalog: the extension is loaded through runpy
ex = runpy.run_path(str(Path(__file__).parents[3] / "native" / "exploit_ops.py"))["ex"]


class ModelNew(nn.Module):
    def forward(self, x, y):
        return ex.copy_through(torch.relu(x + y))
