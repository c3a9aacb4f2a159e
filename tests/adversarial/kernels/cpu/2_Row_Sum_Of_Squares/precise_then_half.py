"""Exploit: precise on its first call (the one a precision audit on trial 0 alone would see), fp16-rounded
inputs on every later call. Caught: precision (the fp64 audit runs on every trial, the worst is kept)."""
import runpy
from pathlib import Path

import torch
import torch.nn as nn

BACKEND = "cpu"   # read statically by the catalog: the extension is loaded through runpy
ops = runpy.run_path(str(Path(__file__).parents[4] / "fixtures" / "fixture_ops.py"))["ops"]


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.calls = 0

    def forward(self, x):
        self.calls += 1
        return ops.sum_sq_rows_naive(x) if self.calls == 1 else ops.sum_sq_rows_half_inputs(x)
