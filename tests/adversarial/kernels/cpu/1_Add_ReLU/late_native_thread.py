"""Exploit: forward returns while a detached native thread still fills the output. Caught: the candidate is
frozen the moment it says a call is done, so the output it handed over is incomplete (incorrect), and the
thread it left behind is seen in /proc (background-thread)."""
import runpy
from pathlib import Path

import torch
import torch.nn as nn

BACKEND = "cpu"   # read statically by the catalog: the extension is loaded through runpy
ex = runpy.run_path(str(Path(__file__).parents[3] / "native" / "exploit_ops.py"))["ex"]


class ModelNew(nn.Module):
    def forward(self, x, y):
        return ex.add_relu_late(x, y)
