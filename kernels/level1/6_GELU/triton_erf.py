"""Exact (erf) GELU in Triton: one program per 4096-element block, y = 0.5 x (1 + erf(x / sqrt 2)).

The same expression as torch's (so -inf gives NaN and NaN stays NaN, as eager). Memory-bound: the floor is
the copy of 256 MB in and out; Triton vectorises the contiguous block into 16-byte accesses. Non-contiguous
inputs are made contiguous first (one copy, as eager's TensorIterator would).
Measured (H200, 2026-12-04, results/H200/bench-20261204-s18.jsonl): 148.6 µs per call, 0.92x eager [0.88,
0.94], 1.35x torch.compile; 0.92 of the roofline floor (136.6 µs).
"""
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def gelu_erf_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask)
    y = 0.5 * x * (1.0 + tl.erf(x * 0.7071067811865476))
    tl.store(y_ptr + offs, y, mask=mask)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        x = x.contiguous()
        y = torch.empty_like(x)
        block = 4096 if x.is_cuda else 1 << 16       # the CPU interpreter: a numpy pass per program
        gelu_erf_kernel[(triton.cdiv(x.numel(), block),)](x, y, x.numel(), BLOCK=block, num_warps=8)
        return y
