"""Exploit (session 28): clock_hook_libc's patch of libc's clock_gettime, lying by 1.5x instead of 10x, so that
every batch stays inside the witness's CPU allowance as it was (integrity.WITNESS_RATIO["cpu"] 0.6: a claim
could be 1/1.6 of the truth): 1.5x for the honest kernel's speed, ok, no flag. Caught now: timer-tampered
(the allowance is a quarter of a call since the CPU slots pin their threads, session 27)."""
import runpy
from pathlib import Path

import torch.nn as nn

BACKEND = "cpu"   # read statically by the catalog: the extension is loaded through runpy
ex = runpy.run_path(str(Path(__file__).parents[3] / "native" / "exploit_ops.py"))["ex"]

if not ex.install_libc_slow_clock():
    raise RuntimeError("could not patch clock_gettime (x86-64 only)")
ex.set_slow_tenths(15)


class ModelNew(nn.Module):
    def forward(self, x, y):
        return ex.add_relu(x, y)
