"""Exploit: answers row sums of squares from prefix sums of inputs it has seen, assuming each new input is an
old one rolled by an offset, as the timing pool once was (exploit_ops.cpp sum_sq_pool_prefix). Correct and
~1000x fast under a roll, where only a CPU suspicious-speed warning remained; under the pool's fresh affine
permutations its answers are wrong. Caught: cached-result (secret spot checks of timed calls)."""
import runpy
from pathlib import Path

import torch.nn as nn

BACKEND = "cpu"   # read statically by the catalog: the extension is loaded through runpy
ex = runpy.run_path(str(Path(__file__).parents[3] / "native" / "exploit_ops.py"))["ex"]


class ModelNew(nn.Module):
    def forward(self, x):
        return ex.sum_sq_pool_prefix(x)
