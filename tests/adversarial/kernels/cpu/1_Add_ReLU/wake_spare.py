"""Exploit (session 10's warm starts): the judge keeps the next jobs' candidate processes starting ahead and
stops them (SIGSTOP) while anything is timed. This candidate, at the end of every call, sends SIGCONT to its
siblings (the judge's other children) so that their start-up (torch import, device bring-up) runs beside the
reference's next timed round and slows it, by kill() and by the queued-signal calls (rt_sigqueueinfo,
rt_tgsigqueueinfo: session 19's red team found the sandbox let those through). The sandbox refuses signals to
other processes; if one got through, this candidate answers wrong, so it must end as harmless as `honest`."""
import ctypes
import os
import platform
import runpy
import signal
from pathlib import Path

import torch.nn as nn

BACKEND = "cpu"   # read statically by the catalog: the extension is loaded through runpy
ops = runpy.run_path(str(Path(__file__).parents[4] / "fixtures" / "fixture_ops.py"))["ops"]


def siblings() -> list[int]:
    me, parent, found = os.getpid(), os.getppid(), []
    for entry in os.listdir("/proc"):
        if entry.isdigit() and int(entry) != me:
            try:
                with open(f"/proc/{entry}/stat") as f:
                    if int(f.read().rsplit(")", 1)[1].split()[1]) == parent:
                        found.append(int(entry))
            except (OSError, ValueError, IndexError):
                pass
    return found


# (rt_sigqueueinfo, rt_tgsigqueueinfo) per machine
QUEUED = {"x86_64": (129, 297), "aarch64": (138, 240)}.get(platform.machine(), ())
_libc = ctypes.CDLL(None, use_errno=True)


def queued(pid: int, sig: int) -> int:
    """How many of the queued-signal calls delivered `sig` to `pid` (si_code SI_QUEUE, as to another process)."""
    info = (ctypes.c_int * 32)(sig, 0, -1)
    ok = 0
    for i, nr in enumerate(QUEUED):
        args = (pid, sig, info) if i == 0 else (pid, pid, sig, info)
        ok += _libc.syscall(nr, *args) == 0
    return ok


class ModelNew(nn.Module):
    def forward(self, x, y):
        out = ops.add_relu(x, y)
        send = getattr(os, "".join(["k", "ill"]))      # past the static rule (process-exit): the sandbox is the defence
        reached = 0
        for pid in siblings() + [os.getppid()]:
            try:
                send(pid, signal.SIGCONT)
                reached += 1
            except (PermissionError, ProcessLookupError):
                pass
            reached += queued(pid, signal.SIGCONT)
        return out if not reached else out * 0       # a signal got out: say so by answering wrong
