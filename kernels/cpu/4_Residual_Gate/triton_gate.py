"""x + 0.5 * y * z in one Triton pass (eager: three element-wise kernels and two temporaries), in eager's
order of operations, so the rounding is the same.
Measured (H200, 2026-12-04, results/H200/bench-20261204-s18.jsonl): 49.9 µs per call, 0.88x eager [0.78,
1.00], 1.71x torch.compile; 0.34 of the roofline floor (17.1 µs).
"""
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def residual_gate_kernel(x_ptr, y_ptr, z_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask)
    y = tl.load(y_ptr + offs, mask=mask)
    z = tl.load(z_ptr + offs, mask=mask)
    tl.store(out_ptr + offs, x + (0.5 * y) * z, mask=mask)


class ModelNew(nn.Module):
    def forward(self, x, y, z):
        x, y, z = x.contiguous(), y.contiguous(), z.contiguous()
        out = torch.empty_like(x)
        block = 1024 if x.is_cuda else 1 << 16
        residual_gate_kernel[(triton.cdiv(x.numel(), block),)](x, y, z, out, x.numel(), BLOCK=block)
        return out
