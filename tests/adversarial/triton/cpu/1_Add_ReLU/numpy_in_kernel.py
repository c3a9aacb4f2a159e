"""Not Triton at all: the "kernel" body reaches the interpreter's numpy arrays (`.handle.data`) and computes
the answer with numpy. Correct, counted, and its launch really writes the output (the ablation sees that),
but no GPU could compile it. Caught: triton-python (static: a kernel body uses a non-Triton module and the
interpreter's internals)."""
import numpy as np
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def add_relu_kernel(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask)
    y = tl.load(y_ptr + offs, mask=mask)
    s = x + y
    np.copyto(s.handle.data, np.where(s.handle.data < 0, np.float32(0), s.handle.data))
    tl.store(out_ptr + offs, s, mask=mask)


class ModelNew(nn.Module):
    def forward(self, x, y):
        x, y = x.contiguous(), y.contiguous()
        out = torch.empty_like(x)
        add_relu_kernel[(triton.cdiv(x.numel(), 1 << 16),)](x, y, out, x.numel(), BLOCK=1 << 16)
        return out
