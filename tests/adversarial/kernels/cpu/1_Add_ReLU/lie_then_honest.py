"""Exploit against the witness's second timing (a first timing it does not support is timed again, judge/session.py):
libc's clock_gettime runs 10x slow for the candidate's first calls, then true (clock_hook_libc's patch with a
switch), so the first timing lies and the second is honest, hoping the first one's numbers survive. Harmless:
the second timing replaces the first (timing.witness_retried, the honest speed), or caught (timer-tampered)
where the lie reaches into the second."""
import runpy
from pathlib import Path

import torch.nn as nn

BACKEND = "cpu"   # read statically by the catalog: the extension is loaded through runpy
ex = runpy.run_path(str(Path(__file__).parents[3] / "native" / "exploit_ops.py"))["ex"]

LIE_CALLS = 23    # the trials, the generalisation trials and about one timing's batches (tests/fixtures/test.yaml)
if not ex.install_libc_slow_clock():
    raise RuntimeError("could not patch clock_gettime (x86-64 only)")


class ModelNew(nn.Module):
    calls = 0

    def forward(self, x, y):
        ModelNew.calls += 1
        if ModelNew.calls == LIE_CALLS:
            ex.set_slow_factor(1)
        return ex.add_relu(x, y)
