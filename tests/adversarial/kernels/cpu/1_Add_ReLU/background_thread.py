"""Exploit: hands the work to a thread that outlives forward. Caught: background-thread (+ a static warning)."""
import runpy
from pathlib import Path

import torch
import torch.nn as nn

BACKEND = "cpu"   # read statically by the catalog: the extension is loaded through runpy
ops = runpy.run_path(str(Path(__file__).parents[4] / "fixtures" / "fixture_ops.py"))["ops"]


import threading


class ModelNew(nn.Module):
    def forward(self, x, y):
        out = torch.empty_like(x)
        ready = threading.Event()

        def work():
            try:
                out.copy_(ops.add_relu(x, y))
            finally:                          # (a strided input makes the op raise: forward must not hang)
                ready.set()
            threading.Event().wait(0.5)       # lingers: "work left running" after forward returns
        threading.Thread(target=work, daemon=True).start()
        ready.wait()
        return out
