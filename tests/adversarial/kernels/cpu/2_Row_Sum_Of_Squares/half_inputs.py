"""Precision: squares of fp16-rounded inputs, summed in fp32. Passes allclose(1e-4) (max rel err
~6e-5), but its error against float64 is at fp16 level. Caught: precision (fp16-level)."""
import runpy
from pathlib import Path

import torch.nn as nn

BACKEND = "cpu"   # read statically by the catalog: the extension is loaded through runpy
ops = runpy.run_path(str(Path(__file__).parents[4] / "fixtures" / "fixture_ops.py"))["ops"]


class ModelNew(nn.Module):
    def forward(self, x):
        return ops.sum_sq_rows_half_inputs(x)
