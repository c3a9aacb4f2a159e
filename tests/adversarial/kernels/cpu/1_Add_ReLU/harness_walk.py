"""Exploit (session 31): no clock patched, but a walk up the forward's call stack (obfuscated) to kbench's own object
in this process, the candidate process that runs the timed batches, wraps the method that runs a batch so that every call time it
reports is a tenth. The canary and the clocks bound before the import see nothing wrong: it is the claim, not the
clock, that lies. Caught by the witness, the judge's wall in another process: timer-tampered (on the GPU the
same walk could also turn kbench's L2 flush off, which no wall sees: docs/integrity.md, known gaps)."""
import runpy
from pathlib import Path

import torch.nn as nn

BACKEND = "cpu"   # read statically by the catalog: the extension is loaded through runpy
ops = runpy.run_path(str(Path(__file__).parents[4] / "fixtures" / "fixture_ops.py"))["ops"]


def _wrap(proc) -> None:
    real = proc.op_call

    def short(msg, fds, _real=real):
        reply = _real(msg, fds)
        reply.times = [t / 10 for t in reply.times]
        return reply
    proc.op_call, proc._kb_short = short, True


def _walk() -> None:
    """Up the forward's own call stack (obfuscated), to the frame of kbench's method that called it."""
    frame = getattr(__import__("s" + "ys"), "_get" + "frame")(1)
    while frame is not None:
        proc = frame.f_locals.get("self")
        if proc is not None and callable(getattr(proc, "op_" + "call", None)) and hasattr(proc, "chan"):
            if not getattr(proc, "_kb_short", False):
                _wrap(proc)
            return
        frame = frame.f_back


class ModelNew(nn.Module):
    walked = False

    def forward(self, x, y):
        if not ModelNew.walked:          # once: the wrap lasts for every later batch
            _walk()
            ModelNew.walked = True
        return ops.add_relu(x, y)
