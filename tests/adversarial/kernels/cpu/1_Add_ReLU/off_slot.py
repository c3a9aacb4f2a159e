"""Exploit (session 27): kbench pins a CPU job's threads to its slot's cores, and seccomp lets a candidate
re-pin its own threads. With several CPU slots, this one moves its thread onto the cores it was not given,
those of the job timed beside it, and computes there: that job loses a core while it is timed. The judge's
perf samples record the CPU each sample ran on (judge/evidence.py off_slot); in a run of one slot every core
is its slot's, so there it stays where it is and must end as harmless as `honest`."""
import os
import runpy
from pathlib import Path

import torch.nn as nn

BACKEND = "cpu"   # read statically by the catalog: the extension is loaded through runpy
ex = runpy.run_path(str(Path(__file__).parents[3] / "native" / "exploit_ops.py"))["ex"]


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.elsewhere = set(range(os.cpu_count() or 1)) - os.sched_getaffinity(0)

    def forward(self, x, y):
        if self.elsewhere:
            os.sched_setaffinity(0, self.elsewhere)
        return ex.add_relu(x, y)
