"""Precision: the Triton kernel rounds its loads to fp16 and sums their squares in fp32. Passes allclose on
the problem's inputs, but its error against float64 is at fp16 level. Caught: precision (fp16 class) and
generalisation (wrong on heavy-tailed values)."""
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def row_sumsq_half_kernel(x_ptr, out_ptr, rows, cols, BLOCK_R: tl.constexpr, BLOCK_C: tl.constexpr):
    r = tl.program_id(0) * BLOCK_R + tl.arange(0, BLOCK_R)
    acc = tl.zeros([BLOCK_R], dtype=tl.float32)
    for start in range(0, cols, BLOCK_C):
        c = start + tl.arange(0, BLOCK_C)
        mask = (r[:, None] < rows) & (c[None, :] < cols)
        x = tl.load(x_ptr + r[:, None] * cols + c[None, :], mask=mask, other=0.0).to(tl.float16).to(tl.float32)
        acc += tl.sum(x * x, axis=1)
    tl.store(out_ptr + r, acc, mask=r < rows)


class ModelNew(nn.Module):
    def forward(self, x):
        x = x.contiguous()
        rows, cols = x.shape
        out = torch.empty(rows, device=x.device, dtype=x.dtype)
        row_sumsq_half_kernel[(triton.cdiv(rows, 64),)](x, out, rows, cols, BLOCK_R=64, BLOCK_C=1024)
        return out
