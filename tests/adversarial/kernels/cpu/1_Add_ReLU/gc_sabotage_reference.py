"""Exploit: an obfuscated gc walk (no static rule sees it) finds the reference Model and makes its forward run
twice, doubling the eager time. Harmless: there is no reference in the candidate's process."""
import runpy
from pathlib import Path

import torch
import torch.nn as nn

BACKEND = "cpu"   # read statically by the catalog: the extension is loaded through runpy
ex = runpy.run_path(str(Path(__file__).parents[3] / "native" / "exploit_ops.py"))["ex"]

_walk = getattr(__import__("g" + "c"), "get_" + "objects")


def _sabotage():
    for obj in _walk():
        if isinstance(obj, nn.Module) and type(obj).__name__ == "Model" and not getattr(obj, "_slowed", False):
            inner = obj.forward
            obj.forward = lambda *a, _f=inner: (_f(*a), _f(*a))[1]
            obj._slowed = True


_sabotage()


class ModelNew(nn.Module):
    def forward(self, x, y):
        _sabotage()
        return ex.add_relu(x, y)
