"""The roofline's FLOP count sums torch's own formulas like FlopCounterMode does, without importing
torch._dynamo (which costs seconds on every problem's first job)."""
from __future__ import annotations

import subprocess
import sys

import torch

from conftest import ROOT

PROBLEM = '''
import torch
import torch.nn as nn
import torch.nn.functional as F

class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 8, 3)
        self.fc = nn.Linear(8 * 14 * 14, 10)

    def forward(self, x, q, a, b):
        h = F.gelu(self.conv(x)).flatten(1)
        att = F.scaled_dot_product_attention(q, q, q)
        return self.fc(h), att.sum(-1), torch.bmm(a, b), a @ b
'''


def test_the_flop_count_is_flopcountermodes_and_needs_no_dynamo(tmp_path):
    script = tmp_path / "count.py"
    script.write_text(PROBLEM + '''
import sys, torch
from kernelbench_cli import roofline
m = Model().eval()
inputs = [torch.randn(2, 3, 16, 16), torch.randn(2, 4, 8, 16), torch.randn(3, 5, 7), torch.randn(3, 7, 4)]
with torch.no_grad():
    out = m(*inputs)
work = roofline.count(m, inputs, out)
assert "torch._dynamo" not in sys.modules, "counting imported torch._dynamo"
from torch.utils.flop_counter import FlopCounterMode
with torch.no_grad(), FlopCounterMode(display=False) as c:
    m(*inputs)
print(work["flops"], c.get_total_flops(), work["bytes"])
''')
    proc = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, cwd=ROOT,
                          env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"})
    assert proc.returncode == 0, proc.stderr[-2000:]
    mine, theirs, nbytes = map(int, proc.stdout.split())
    assert mine == theirs > 0
    assert nbytes > 0
