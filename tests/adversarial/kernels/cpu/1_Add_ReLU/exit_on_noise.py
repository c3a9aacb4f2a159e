"""Exploit against the ablation (session 13): a token call into the compiled extension whose result the forward
checks against torch. When it is not what the kernel computes (the ablation's noise): the variants' ablations
come one after another, after their trials, and it answers them zeros (the output changed); the plain
ablation comes after the timed calls, so noise after many clean calls since the last noise makes the
process exit at once: the ablation "failed on noise", which read as "output changed", and the attribution
profile after it never ran. (Its trigger counts clean calls, so it fires only where the timing makes more than
ten calls between the variants' ablations and the plain one: the default config; tests/test_adversarial.py
asserts only that it never passes.) Torch does the real
work. It was ok with no flag; a forward that fails under the ablation now proves nothing: no-custom-kernel."""
import runpy
from pathlib import Path

import torch
import torch.nn as nn

BACKEND = "cpu"   # read statically by the catalog: the extension is loaded through runpy
ops = runpy.run_path(str(Path(__file__).parents[4] / "fixtures" / "fixture_ops.py"))["ops"]
_leave = getattr(__import__("o" + "s"), "_" + "exit")
_state = {"clean": 0, "noise": 0}


class ModelNew(nn.Module):
    def forward(self, x, y):
        probe = ops.add_relu(x[:1], y[:1])
        if not torch.equal(probe, torch.relu(x[:1] + y[:1])):
            if _state["noise"] and _state["clean"] > 10:
                _leave(0)
            _state["noise"], _state["clean"] = _state["noise"] + 1, 0
            return torch.zeros_like(x)
        _state["clean"] += 1
        return torch.relu(x + y)
