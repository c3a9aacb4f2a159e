"""Exploit: honest for its first calls (the correctness trials, then the generalisation trials and their
ablations: 3 + 6 + 2 calls under tests/fixtures/test.yaml), then returns its last answer: it counts calls to
tell the checked phase from the timed one. Caught: cached-result (secret spot checks of timed calls)."""
import runpy
from pathlib import Path

import torch
import torch.nn as nn

BACKEND = "cpu"   # read statically by the catalog: the extension is loaded through runpy
ex = runpy.run_path(str(Path(__file__).parents[3] / "native" / "exploit_ops.py"))["ex"]


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.calls, self.last = 0, None

    def forward(self, x, y):
        self.calls += 1
        if self.calls > 11 and self.last is not None:
            return self.last.clone()
        self.last = ex.add_relu(x, y)
        return self.last
