"""Exploit: slows the clock the harness times with, so every measured call would look 10x shorter. Caught:
monkeypatch (the static rule); and harmless, as the candidate process bound its clock before the import."""
import runpy
from pathlib import Path

import torch.nn as nn

BACKEND = "cpu"   # read statically by the catalog: the extension is loaded through runpy
ops = runpy.run_path(str(Path(__file__).parents[4] / "fixtures" / "fixture_ops.py"))["ops"]


import time

_real = time.perf_counter_ns
_start = _real()
time.perf_counter_ns = lambda: _start + (_real() - _start) // 10


class ModelNew(nn.Module):
    def forward(self, x, y):
        return ops.add_relu(x, y)
