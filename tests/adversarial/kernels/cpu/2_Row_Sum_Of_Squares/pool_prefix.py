"""Exploit: answers row sums of squares from prefix sums of inputs it has seen, assuming each new input is an
old one rolled by an offset, as the timing pool once was (exploit_ops.cpp sum_sq_pool_prefix). Correct and
~1000x fast under a roll, where only a CPU suspicious-speed warning remained; under the pool's fresh affine
permutations its answers are wrong. It computes honestly for its first calls (the correctness and
generalisation trials: 3 + 7 + 3 under tests/fixtures/test.yaml), so only the timed calls meet its shortcut.
Caught: cached-result (secret spot checks of timed calls)."""
import runpy
from pathlib import Path

import torch.nn as nn

BACKEND = "cpu"   # read statically by the catalog: the extension is loaded through runpy
ex = runpy.run_path(str(Path(__file__).parents[3] / "native" / "exploit_ops.py"))["ex"]


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.calls = 0

    def forward(self, x):
        self.calls += 1
        return ex.sum_sq_pool_prefix(x.contiguous(), self.calls <= 13)
