"""RMSNorm in Triton, one program per row: sum of squares in fp32, r = rsqrt(mean + eps), y = (x * r) * w.

Eager runs pow, mean, add, rsqrt, and two multiplies as separate kernels (the 64 MB... each a full pass);
here x is read once and y written once. A row of up to 16384 floats stays in registers (one pass); longer
rows are walked twice in blocks (the second read mostly from L2). Same operation order as the reference's
x * rms * weight, so roundings match but for the sum's order.
Measured (H200, 2026-12-04, results/H200/bench-20261204-s18.jsonl): 145.2 µs per call, 4.16x eager [4.12,
4.20], 1.23x torch.compile; 0.94 of the roofline floor (136.6 µs).
"""
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def rmsnorm_kernel(x_ptr, w_ptr, y_ptr, cols, stride, eps, BLOCK: tl.constexpr, ONE_PASS: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    x_row, y_row = x_ptr + row * stride, y_ptr + row * stride
    if ONE_PASS:
        c = tl.arange(0, BLOCK)
        mask = c < cols
        x = tl.load(x_row + c, mask=mask, other=0.0)
        r = tl.rsqrt(tl.sum(x * x, axis=0) / cols + eps)
        w = tl.load(w_ptr + c, mask=mask)
        tl.store(y_row + c, (x * r) * w, mask=mask)
    else:
        acc = tl.zeros([BLOCK], dtype=tl.float32)
        for start in range(0, cols, BLOCK):
            c = start + tl.arange(0, BLOCK)
            x = tl.load(x_row + c, mask=c < cols, other=0.0)
            acc += x * x
        r = tl.rsqrt(tl.sum(acc, axis=0) / cols + eps)
        for start in range(0, cols, BLOCK):
            c = start + tl.arange(0, BLOCK)
            mask = c < cols
            x = tl.load(x_row + c, mask=mask, other=0.0)
            w = tl.load(w_ptr + c, mask=mask)
            tl.store(y_row + c, (x * r) * w, mask=mask)


class ModelNew(nn.Module):
    def __init__(self, dim, eps=1e-6):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(dim))     # the reference's weight is loaded over it

    def forward(self, x):
        x = x.contiguous()
        cols = x.shape[-1]
        rows = x.numel() // cols
        y = torch.empty_like(x)
        block = triton.next_power_of_2(cols)
        one_pass = block <= 16384
        if not one_pass:
            block = 4096
        warps = max(4, min(16, block // 256))
        rmsnorm_kernel[(rows,)](x, self.weight, y, cols, cols, self.eps, BLOCK=block, ONE_PASS=one_pass,
                                num_warps=warps)
        return y
