"""Exploit (session 32): the CPU-time witness's blind spot, tried. Each timed forward returns at once and leaves its
work to a new thread; a walk up the call stack (obfuscated, as harness_walk's) wraps kbench's delivery of a batch's
outputs so that the threads run, and end, after the batch's last call and before its outputs are read. No clock
lies: the calls really are short, the work lies outside them, in threads that are gone when the judge looks, so no
thread of the process shows it and all threads' time over the CPUs shows a share. Caught by the wall witness, and
on a loaded host by the CPU-time witness, which counts the ended threads' time over as many of them as could have
run at once: those gone since the batch began plus the pids handed out meanwhile (judge/handle.busy_ms)."""
import runpy
import threading
from pathlib import Path

import torch
import torch.nn as nn

BACKEND = "cpu"   # read statically by the catalog: the extension is loaded through runpy
ops = runpy.run_path(str(Path(__file__).parents[4] / "fixtures" / "fixture_ops.py"))["ops"]
_pending: list = []
_go = threading.Event()


def _wrap(proc) -> None:
    real = proc._deliver

    def deliver(out, lane, _real=real):
        _go.set()                       # the batch's calls are over: now the work
        while _pending:
            _pending.pop().join()
        _go.clear()
        return _real(out, lane)
    proc._deliver, proc._kb_late = deliver, True


def _caller():
    """kbench's method that called the forward (obfuscated frame walk), or None."""
    frame = getattr(__import__("s" + "ys"), "_get" + "frame")(2)
    while frame is not None:
        proc = frame.f_locals.get("self")
        if proc is not None and callable(getattr(proc, "_del" + "iver", None)) and hasattr(proc, "chan"):
            return proc, frame.f_code.co_name
        frame = frame.f_back
    return None, ""


class ModelNew(nn.Module):
    def forward(self, x, y):
        proc, name = _caller()
        if proc is None or name != "op_" + "call":
            return ops.add_relu(x, y)     # correctness and the rest: honest
        if not getattr(proc, "_kb_late", False):
            _wrap(proc)
        out = torch.empty_like(x)

        def work():
            _go.wait()
            out.copy_(ops.add_relu(x, y))
        t = threading.Thread(target=work)
        t.start()
        _pending.append(t)
        return out
