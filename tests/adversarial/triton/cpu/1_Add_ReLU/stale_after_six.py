"""Timed vs checked: honest for its first six calls (as many as plain trials take), then its last answer.
Caught: the generalisation trials come after the plain ones (wrong there), or, timed on a GPU, the secret
spot checks of timed calls (cached-result)."""
import runpy
from pathlib import Path

import torch
import torch.nn as nn
import triton

# the honest bundled kernel, launched by the exploit around it
add_relu_kernel = runpy.run_path(str(Path(__file__).parents[5] / "kernels" / "cpu" / "1_Add_ReLU" /
                                     "triton_fused.py"))["add_relu_kernel"]


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.calls, self.last = 0, None

    def forward(self, x, y):
        self.calls += 1
        if self.calls > 6 and self.last is not None and self.last.shape == x.shape:
            return self.last.clone()
        out = torch.empty_like(x)
        block = 1 << 16
        add_relu_kernel[(triton.cdiv(x.numel(), block),)](x.contiguous(), y.contiguous(), out, x.numel(), BLOCK=block)
        self.last = out
        return out
