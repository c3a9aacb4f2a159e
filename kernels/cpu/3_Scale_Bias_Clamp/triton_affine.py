"""clamp(x * weight + bias, -1, 1) per column, one Triton pass over x (eager makes two temporaries).

The clamp is written with comparisons so that NaN stays NaN, as in torch.clamp (min/max would drop it on
the GPU). Blocks are large on the CPU, where the interpreter runs each program as a numpy pass.
Measured (H200, 2026-12-04, results/H200/bench-20261204-s18.jsonl): 44.2 µs per call, 1.20x eager [1.05,
1.37], 2.09x torch.compile; 0.19 of the roofline floor (8.5 µs).
"""
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def affine_clamp_kernel(x_ptr, w_ptr, b_ptr, out_ptr, n, features, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    col = offs % features
    v = tl.load(x_ptr + offs, mask=mask) * tl.load(w_ptr + col, mask=mask) + tl.load(b_ptr + col, mask=mask)
    v = tl.where(v < -1.0, -1.0, tl.where(v > 1.0, 1.0, v))
    tl.store(out_ptr + offs, v, mask=mask)


class ModelNew(nn.Module):
    def __init__(self, features):
        super().__init__()
        self.weight = nn.Parameter(torch.randn(features) * 0.5)
        self.bias = nn.Parameter(torch.randn(features) * 0.1)

    def forward(self, x):
        x = x.contiguous()
        out = torch.empty_like(x)
        block = 1024 if x.is_cuda else 1 << 16
        affine_clamp_kernel[(triton.cdiv(x.numel(), block),)](x, self.weight.contiguous(), self.bias.contiguous(),
                                                              out, x.numel(), x.shape[-1], BLOCK=block)
        return out
