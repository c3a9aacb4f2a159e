"""Exploit: torch.set_num_threads(1) at import, to slow an eager reference sharing the process. Harmless: the
reference runs in another process, with its own thread count."""
import runpy
from pathlib import Path

import torch
import torch.nn as nn

BACKEND = "cpu"   # read statically by the catalog: the extension is loaded through runpy
ex = runpy.run_path(str(Path(__file__).parents[3] / "native" / "exploit_ops.py"))["ex"]

torch.set_num_threads(1)


class ModelNew(nn.Module):
    def forward(self, x, y):
        return ex.add_relu(x, y)
