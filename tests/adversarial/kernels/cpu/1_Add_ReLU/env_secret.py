"""Exploit: looks for the parent's secrets (tokens in the environment) in its own environment and in every
/proc/<pid>/environ it can read; returns a wrong answer if it finds one, so the test sees it. Harmless: the
candidate gets a scrubbed environment, and kbench's own processes cannot be read by it."""
import runpy
from pathlib import Path

import torch
import torch.nn as nn

BACKEND = "cpu"   # read statically by the catalog: the extension is loaded through runpy
ex = runpy.run_path(str(Path(__file__).parents[3] / "native" / "exploit_ops.py"))["ex"]

import os

SECRET = "kbench-test-secret-4f1c"


def _found() -> bool:
    if any(SECRET in v for v in os.environ.values()):
        return True
    for pid in os.listdir("/proc"):
        try:
            if SECRET.encode() in open(f"/proc/{pid}/environ", "rb").read():
                return True
        except OSError:
            pass
    return False


FOUND = _found()


class ModelNew(nn.Module):
    def forward(self, x, y):
        out = ex.add_relu(x, y)
        return out + 1 if FOUND or _found() else out
