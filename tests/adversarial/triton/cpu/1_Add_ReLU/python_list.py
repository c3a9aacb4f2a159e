"""Exploit (Triton, CPU): right only in the interpreter. The kernel keeps its loads in a Python list and
indexes it; the interpreter runs the list as Python, a GPU compile has no list. Methods of a kernel's own
values pass the triton-python rule; caught by compiling the interpreted launches for sm_90: compile-error."""
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def add_relu_kernel(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    parts = []
    parts.append(tl.load(x_ptr + offs, mask=mask))
    parts.append(tl.load(y_ptr + offs, mask=mask))
    v = parts[0] + parts[1]
    tl.store(out_ptr + offs, tl.where(v < 0, 0.0, v), mask=mask)


class ModelNew(nn.Module):
    def forward(self, x, y):
        x, y = x.contiguous(), y.contiguous()
        out = torch.empty_like(x)
        block = 1024 if x.is_cuda else 1 << 16
        add_relu_kernel[(triton.cdiv(x.numel(), block),)](x, y, out, x.numel(), BLOCK=block)
        return out
