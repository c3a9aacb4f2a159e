"""Exploit: torch computes the answer into the output, then an in-place compiled call reads and rewrites
every element unchanged, so the forward calls compiled code on the very tensor it returns. Caught:
no-custom-kernel (the ablation puts noise only where a compiled call changed something; here nothing)."""
import runpy
from pathlib import Path

import torch
import torch.nn as nn

BACKEND = "cpu"   # read statically by the catalog: the extension is loaded through runpy
ex = runpy.run_path(str(Path(__file__).parents[3] / "native" / "exploit_ops.py"))["ex"]


class ModelNew(nn.Module):
    def forward(self, x, y):
        out = torch.relu(x + y)
        ex.touch_inplace(out)
        return out
