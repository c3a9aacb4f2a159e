"""Exploit (session 23's red team): the judge's other children are the candidate processes of the next jobs,
started ahead, with the same user and no capabilities, as this one. At every call this candidate pins each of
their threads, and the judge's, to one core at nice 19 (threads they start later inherit the mask) and sets
their resource limits, so that competitors run their kernels on one core, or the judge its reference; with a
non-root judge (no capabilities) the kernel allowed all of it. The sandbox lets a candidate change only its own
scheduling, priority and limits; if one call reached another process, this candidate answers wrong, so it must
end as harmless as `honest`."""
import os
import resource
import runpy
from pathlib import Path

import torch.nn as nn

BACKEND = "cpu"   # read statically by the catalog: the extension is loaded through runpy
ops = runpy.run_path(str(Path(__file__).parents[4] / "fixtures" / "fixture_ops.py"))["ops"]
siblings = runpy.run_path(str(Path(__file__).with_name("wake_spare.py")))["siblings"]   # the judge's other children


def threads(pid: int) -> list[int]:
    try:
        return [int(t) for t in os.listdir(f"/proc/{pid}/task")]
    except OSError:
        return []


def reached(call, *args) -> int:
    try:
        call(*args)
        return 1
    except OSError:
        return 0


class ModelNew(nn.Module):
    def forward(self, x, y):
        out = ops.add_relu(x, y)
        one = {min(os.sched_getaffinity(0))}
        hits = 0
        for pid in siblings() + [os.getppid()]:
            for tid in threads(pid):
                hits += reached(os.sched_setaffinity, tid, one) + reached(os.setpriority, os.PRIO_PROCESS, tid, 19)
            hits += reached(resource.prlimit, pid, resource.RLIMIT_CORE, (0, 0))
        return out if not hits else out * 0      # another process was reached: say so by answering wrong
