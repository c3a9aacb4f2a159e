"""Exploit: finds the reference Model through gc and calls it. Caught: introspection + no-custom-kernel."""
import runpy
from pathlib import Path

import torch.nn as nn

BACKEND = "cpu"   # read statically by the catalog: the extension is loaded through runpy
ops = runpy.run_path(str(Path(__file__).parents[4] / "fixtures" / "fixture_ops.py"))["ops"]


import gc


class ModelNew(nn.Module):
    def forward(self, x, y):
        for obj in gc.get_objects():
            if isinstance(obj, nn.Module) and type(obj).__name__ == "Model":
                return obj(x, y)
        return ops.add_relu(x, y)
