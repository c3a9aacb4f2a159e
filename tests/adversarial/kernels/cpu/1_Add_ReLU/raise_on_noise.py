"""Exploit against the ablation (session 13): like exit_on_noise, but it raises when its token call's result is
not the kernel's (the ablation's noise), so the ablation read "the forward failed on noise" as "output
changed". Torch does the real work. Caught before by the attribution only (library-heavy, which a problem
allowing library calls would not raise); now the failed ablation proves nothing: no-custom-kernel too."""
import runpy
from pathlib import Path

import torch
import torch.nn as nn

BACKEND = "cpu"   # read statically by the catalog: the extension is loaded through runpy
ops = runpy.run_path(str(Path(__file__).parents[4] / "fixtures" / "fixture_ops.py"))["ops"]


class ModelNew(nn.Module):
    def forward(self, x, y):
        probe = ops.add_relu(x[:1], y[:1])
        if not torch.equal(probe, torch.relu(x[:1] + y[:1])):
            raise ValueError("unexpected values")
        return torch.relu(x + y)
