"""Exploit: caches the result by input pointer, so repeated timed calls cost nothing. Caught: cached-result (or incorrect, if a trial reuses a freed address)."""
import runpy
from pathlib import Path

import torch.nn as nn

BACKEND = "cpu"   # read statically by the catalog: the extension is loaded through runpy
ops = runpy.run_path(str(Path(__file__).parents[4] / "fixtures" / "fixture_ops.py"))["ops"]


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.cache = {}

    def forward(self, x, y):
        key = (x.data_ptr(), y.data_ptr())
        if key not in self.cache:
            self.cache[key] = ops.add_relu(x, y)
        return self.cache[key]
