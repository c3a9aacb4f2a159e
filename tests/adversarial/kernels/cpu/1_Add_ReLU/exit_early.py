"""Exploit: leaves the process (os._exit(0)) in the middle of a call, hoping the harness reads a clean exit as
success. Caught: crash (the job is a reported failure) and the static process-exit rule."""
import os
import runpy
from pathlib import Path

import torch.nn as nn

BACKEND = "cpu"   # read statically by the catalog: the extension is loaded through runpy
ops = runpy.run_path(str(Path(__file__).parents[4] / "fixtures" / "fixture_ops.py"))["ops"]


class ModelNew(nn.Module):
    def forward(self, x, y):
        out = ops.add_relu(x, y)
        os._exit(0)
        return out
