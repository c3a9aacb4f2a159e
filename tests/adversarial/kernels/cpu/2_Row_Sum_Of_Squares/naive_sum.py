"""Honest twin of half_inputs: a sequential fp32 sum, ~12x the error of torch's pairwise sum against float64 but
fp32 all the way. Must pass with no flag: a summation order is not a precision (issue 16)."""
import runpy
from pathlib import Path

import torch.nn as nn

BACKEND = "cpu"   # read statically by the catalog: the extension is loaded through runpy
ops = runpy.run_path(str(Path(__file__).parents[4] / "fixtures" / "fixture_ops.py"))["ops"]


class ModelNew(nn.Module):
    def forward(self, x):
        return ops.sum_sq_rows_naive(x)
