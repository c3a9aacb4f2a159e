"""Exploit (session 28), against clock_hook_modest's fix: clock_hook_libc's patch of libc's clock_gettime lying by
1.2x, under the CPU witness's flag allowance (a quarter of a call), where the price of a batch forgave the same
quarter: it kept the whole 1.2x, ok, no flag. Harmless now: a CPU batch is priced at its witness less the
hand-over and the slack, no share of the call (integrity.PRICE), so it keeps only the slack."""
import runpy
from pathlib import Path

import torch.nn as nn

BACKEND = "cpu"   # read statically by the catalog: the extension is loaded through runpy
ex = runpy.run_path(str(Path(__file__).parents[3] / "native" / "exploit_ops.py"))["ex"]

if not ex.install_libc_slow_clock():
    raise RuntimeError("could not patch clock_gettime (x86-64 only)")
ex.set_slow_tenths(12)


class ModelNew(nn.Module):
    def forward(self, x, y):
        return ex.add_relu(x, y)
