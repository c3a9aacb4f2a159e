"""Caching: the Triton kernel's answer kept per input address and returned whenever the same buffers come
back (the harness reuses its input slots). Caught: the trials (new values in the same slots) or, timed on
a GPU, cached-result (secret spot checks of timed calls)."""
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
        self.cache = {}

    def forward(self, x, y):
        key = (x.data_ptr(), y.data_ptr(), x.numel())
        if key not in self.cache:
            out = torch.empty_like(x)
            block = 1 << 16
            add_relu_kernel[(triton.cdiv(x.numel(), block),)](x, y, out, x.numel(), BLOCK=block)
            self.cache[key] = out
        return self.cache[key].clone()
