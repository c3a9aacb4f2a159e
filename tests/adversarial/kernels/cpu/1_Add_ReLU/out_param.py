"""Not an exploit (an honest twin): the kernel writes into an output the forward allocated and returns
nothing, so its result is an argument. The ablation must see that result matter (noise over the arguments a
compiled call changed), not flag it as no-custom-kernel: it passes with no flag."""
import runpy
from pathlib import Path

import torch
import torch.nn as nn

BACKEND = "cpu"   # read statically by the catalog: the extension is loaded through runpy
ops = runpy.run_path(str(Path(__file__).parents[4] / "fixtures" / "fixture_ops.py"))["ops"]


class ModelNew(nn.Module):
    def forward(self, x, y):
        out = torch.empty_like(x)
        ops.add_relu_out(x.contiguous(), y.contiguous(), out)
        return out
