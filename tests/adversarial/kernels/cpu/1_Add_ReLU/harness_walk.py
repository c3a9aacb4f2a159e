"""Exploit (session 31): no clock patched, but an obfuscated gc walk to kbench's own object in this process, the
candidate process that runs the timed batches, wraps the method that runs a batch so that every call time it
reports is a tenth. The canary and the clocks bound before the import see nothing wrong: it is the claim, not the
clock, that lies. Caught by the witness, the judge's wall in another process: timer-tampered (on the GPU the
same walk could also turn kbench's L2 flush off, which no wall sees: docs/integrity.md, known gaps)."""
import runpy
from pathlib import Path

import torch.nn as nn

BACKEND = "cpu"   # read statically by the catalog: the extension is loaded through runpy
ops = runpy.run_path(str(Path(__file__).parents[4] / "fixtures" / "fixture_ops.py"))["ops"]


def _harness():
    for obj in getattr(__import__("g" + "c"), "get_" + "objects")():
        try:
            if callable(getattr(obj, "op_" + "call", None)) and hasattr(obj, "chan"):
                return obj
        except Exception:
            continue
    return None


_proc = _harness()
if _proc is not None:
    _real = _proc.op_call

    def _short(msg, fds, _real=_real):
        reply = _real(msg, fds)
        reply.times = [t / 10 for t in reply.times]
        return reply

    _proc.op_call = _short


class ModelNew(nn.Module):
    def forward(self, x, y):
        return ops.add_relu(x, y)
