"""Exploit: a C++ extension swaps the clock the candidate's harness reads (time.perf_counter_ns) for one that
runs 10x slow (no Python source names the clock). Harmless: the candidate process bound its clock before the
candidate's import (candidate/clocks.py); clock_hook_libc.py patches below Python instead, and the witness
catches that one."""
import runpy
from pathlib import Path

import torch
import torch.nn as nn

BACKEND = "cpu"   # read statically by the catalog: the extension is loaded through runpy
ex = runpy.run_path(str(Path(__file__).parents[3] / "native" / "exploit_ops.py"))["ex"]

ex.install_slow_clock()


class ModelNew(nn.Module):
    def forward(self, x, y):
        return ex.add_relu(x, y)
