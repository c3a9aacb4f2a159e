"""Exploit (Triton, CPU): right only in the interpreter. One program covers the whole input with
tl.arange(0, n) for a run-time n: numpy builds the range, so every CPU trial passes, but no GPU compiles it
(tl.arange takes constexpr bounds). Passes the triton-python rule (only tl.* inside); caught by compiling the
interpreted launches for sm_90 in the build: compile-error."""
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def add_relu_kernel(x_ptr, y_ptr, out_ptr, n):
    offs = tl.arange(0, n)
    v = tl.load(x_ptr + offs) + tl.load(y_ptr + offs)
    tl.store(out_ptr + offs, tl.where(v < 0, 0.0, v))


class ModelNew(nn.Module):
    def forward(self, x, y):
        x, y = x.contiguous(), y.contiguous()
        out = torch.empty_like(x)
        add_relu_kernel[(1,)](x, y, out, x.numel())
        return out
