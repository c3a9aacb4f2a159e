"""Per-row sum of squares in Triton: each program owns a tile of rows and walks their columns in blocks,
accumulating x*x in float32, so no full-size temporary is written (eager writes x*x, then reads it back).

Autotuned over tile shapes (on a GPU the build phase tunes; under the CPU interpreter the first config
runs, and its times are not speeds).
Measured (H200, 2026-12-04, results/H200/bench-20261204-s18.jsonl): 29.5 µs per call, 0.70x eager [0.64,
0.76], 1.74x torch.compile; 0.14 of the roofline floor (4.3 µs).
"""
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.autotune(configs=[triton.Config({"BLOCK_R": 64, "BLOCK_C": 1024}),
                          triton.Config({"BLOCK_R": 8, "BLOCK_C": 512}, num_warps=4),
                          triton.Config({"BLOCK_R": 4, "BLOCK_C": 1024}, num_warps=8)], key=["rows", "cols"])
@triton.jit
def row_sumsq_kernel(x_ptr, out_ptr, rows, cols, stride_r, BLOCK_R: tl.constexpr, BLOCK_C: tl.constexpr):
    r = tl.program_id(0) * BLOCK_R + tl.arange(0, BLOCK_R)
    acc = tl.zeros([BLOCK_R], dtype=tl.float32)
    for start in range(0, cols, BLOCK_C):
        c = start + tl.arange(0, BLOCK_C)
        mask = (r[:, None] < rows) & (c[None, :] < cols)
        x = tl.load(x_ptr + r[:, None] * stride_r + c[None, :], mask=mask, other=0.0)
        acc += tl.sum(x * x, axis=1)
    tl.store(out_ptr + r, acc, mask=r < rows)


class ModelNew(nn.Module):
    def forward(self, x):
        x = x.contiguous()
        rows, cols = x.shape
        out = torch.empty(rows, device=x.device, dtype=x.dtype)
        row_sumsq_kernel[lambda meta: (triton.cdiv(rows, meta["BLOCK_R"]),)](x, out, rows, cols, x.stride(0))
        return out
