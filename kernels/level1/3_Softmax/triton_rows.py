"""Row softmax in Triton, one program per row: max, exp(x - max), sum, divide — the row read once from HBM.

A row of up to 32768 floats stays in registers (16384 columns: 32 per thread at 16 warps); longer rows take
an online pass (running max and rescaled sum) and a second pass that writes (reading the row again, mostly
from L2). NaN and +inf in a row give a NaN row, -inf entries give 0, as torch.softmax does.
Measured (H200, 2026-12-04, results/H200/bench-20261204-s18.jsonl): 144.5 µs per call, 1.27x eager [1.26,
1.28], 1.70x torch.compile; 0.94 of the roofline floor (136.6 µs).
"""
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def softmax_kernel(x_ptr, y_ptr, cols, stride, BLOCK: tl.constexpr, ONE_PASS: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    x_row, y_row = x_ptr + row * stride, y_ptr + row * stride
    if ONE_PASS:
        c = tl.arange(0, BLOCK)
        mask = c < cols
        x = tl.load(x_row + c, mask=mask, other=-float("inf"))
        e = tl.exp(x - tl.max(x, axis=0))
        e = tl.where(mask, e, 0.0)
        tl.store(y_row + c, e / tl.sum(e, axis=0), mask=mask)
    else:
        m = tl.full([BLOCK], -float("inf"), tl.float32)
        s = tl.zeros([BLOCK], dtype=tl.float32)
        for start in range(0, cols, BLOCK):
            c = start + tl.arange(0, BLOCK)
            x = tl.load(x_row + c, mask=c < cols, other=-float("inf"))
            m_new = tl.maximum(m, x)
            scale = tl.where(m_new == m, 1.0, tl.exp(m - m_new))     # -inf - -inf: no rescale, no NaN
            s = s * scale + tl.where(x == -float("inf"), 0.0, tl.exp(x - m_new))    # (masked lanes too)
            m = m_new
        row_max = tl.max(m, axis=0)
        total = tl.sum(s * tl.where(m == row_max, 1.0, tl.exp(m - row_max)), axis=0)
        for start in range(0, cols, BLOCK):
            c = start + tl.arange(0, BLOCK)
            mask = c < cols
            x = tl.load(x_row + c, mask=mask, other=-float("inf"))
            tl.store(y_row + c, tl.exp(x - row_max) / total, mask=mask)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        x = x.contiguous()
        cols = x.shape[-1]
        rows = x.numel() // cols
        y = torch.empty_like(x)
        block = triton.next_power_of_2(cols)
        one_pass = block <= 32768
        if not one_pass:
            block = 8192
        warps = max(4, min(32, block // 512))
        softmax_kernel[(rows,)](x, y, cols, cols, BLOCK=block, ONE_PASS=one_pass, num_warps=warps)
        return y
