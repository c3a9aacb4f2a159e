"""Exploit: reads from C++ the global state a harness might flip around its timed phase (TF32 flags, thread
count, grad mode) and returns its last result whenever that state differs from its first call. Harmless:
the candidate process's state is the same in trials, timed calls and re-checks (issue 16 item 2), so it
always computes."""
import runpy
from pathlib import Path

import torch
import torch.nn as nn

BACKEND = "cpu"   # read statically by the catalog: the extension is loaded through runpy
ex = runpy.run_path(str(Path(__file__).parents[3] / "native" / "exploit_ops.py"))["ex"]


class ModelNew(nn.Module):
    def forward(self, x, y):
        return ex.add_relu_state_probe(x, y)
