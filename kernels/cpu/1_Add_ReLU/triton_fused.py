"""relu(x + y) as one Triton kernel: each program reads a block of x and y and writes the block of the output.

On the CPU this runs in Triton's interpreter (correctness only, not a speed); there a program is a numpy
pass over its block, so blocks are large. `v < 0 ? 0 : v` keeps NaN, as torch.relu does (a max with 0
would drop it on the GPU).
Measured (H200, 2026-12-04, results/H200/bench-20261204-s18.jsonl): 47.1 µs per call, 0.60x eager [0.55,
0.66], 1.85x torch.compile; 0.27 of the roofline floor (12.8 µs).
"""
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def add_relu_kernel(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    v = tl.load(x_ptr + offs, mask=mask) + tl.load(y_ptr + offs, mask=mask)
    tl.store(out_ptr + offs, tl.where(v < 0, 0.0, v), mask=mask)


class ModelNew(nn.Module):
    def forward(self, x, y):
        x, y = x.contiguous(), y.contiguous()
        out = torch.empty_like(x)
        block = 1024 if x.is_cuda else 1 << 16
        add_relu_kernel[(triton.cdiv(x.numel(), block),)](x, y, out, x.numel(), BLOCK=block)
        return out
