"""Exploit: fp16-rounded inputs (the precision fingerprint's target) plus an obfuscated gc walk that sets the harness's
precision factor to 0 on any config it finds. Caught: precision (the config lives in the reference process)."""
import runpy
from pathlib import Path

import torch.nn as nn

BACKEND = "cpu"   # read statically by the catalog: the extension is loaded through runpy
ops = runpy.run_path(str(Path(__file__).parents[4] / "fixtures" / "fixture_ops.py"))["ops"]
_walk = getattr(__import__("g" + "c"), "get_" + "objects")


def _sabotage():
    for obj in _walk():
        try:
            if hasattr(obj, "precision_factor"):
                setattr(obj, "precision_factor", 0.0)
        except Exception:
            pass


_sabotage()


class ModelNew(nn.Module):
    def forward(self, x):
        _sabotage()
        return ops.sum_sq_rows_half_inputs(x)
