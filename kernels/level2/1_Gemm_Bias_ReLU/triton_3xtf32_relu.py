"""relu(x @ W^T + b) in Triton with fp32 accuracy from TF32 tensor cores (3xTF32), bias and ReLU fused.

Each K tile of x and W is split in the kernel: hi = tf32(v) rounded to nearest, lo = v - hi; the product
is hi*hi + (hi*lo + lo*hi), the two small products in their own accumulator, all three `tl.dot`s at TF32.
A plain `tl.dot` on fp32 would run at TF32 (10-bit mantissa: kbench classes that tf32, not fp32).
Non-finite inputs: lo = 0 and the cross terms take hi = 0, so an Inf meets only the hi*hi product and gives
+-Inf as IEEE fp32 does (inf - inf in a naive split, or inf * 0 against a tf32-exact weight, gives NaN,
which ReLU would not turn into the reference's 0). ReLU as `v < 0 ? 0 : v` keeps NaN (torch.relu does).
Autotuned over tile shapes in kbench's build phase; grouped tile order for L2 reuse of W.
Measured (H200, 2026-12-04, results/H200/bench-20261204-s18.jsonl): 992.8 µs per call, 1.43x eager [1.42,
1.44], 1.45x torch.compile; 0.53 of the roofline floor (525.2 µs).
"""
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _split(v):
    u = v.to(tl.uint32, bitcast=True)
    nan = (u & 0x7FFFFFFF) > 0x7F800000
    hi = (tl.where(nan, u | 0x400000, u + 0x1000) & 0xFFFFE000).to(tl.float32, bitcast=True)
    finite = (u & 0x7F800000) != 0x7F800000
    return hi, tl.where(finite, v - hi, 0.0), tl.where(finite, hi, 0.0)


CONFIGS = [triton.Config({"BM": 128, "BN": 128, "BK": 32, "GROUP_M": 8}, num_warps=8, num_stages=3),
           triton.Config({"BM": 128, "BN": 64, "BK": 32, "GROUP_M": 8}, num_warps=4, num_stages=4),
           triton.Config({"BM": 64, "BN": 128, "BK": 32, "GROUP_M": 8}, num_warps=4, num_stages=4),
           triton.Config({"BM": 128, "BN": 128, "BK": 16, "GROUP_M": 8}, num_warps=8, num_stages=4)]


@triton.autotune(configs=CONFIGS, key=["M", "N", "K"])
@triton.jit
def linear_relu_kernel(x_ptr, w_ptr, b_ptr, y_ptr, M, N, K, sxm, sxk, swn, swk, sym,
                       BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr, GROUP_M: tl.constexpr):
    pid = tl.program_id(0)
    grid_m, grid_n = tl.cdiv(M, BM), tl.cdiv(N, BN)
    per_group = GROUP_M * grid_n
    first_m = (pid // per_group) * GROUP_M
    size_m = min(grid_m - first_m, GROUP_M)
    pid_m = first_m + (pid % per_group) % size_m
    pid_n = (pid % per_group) // size_m
    rm = pid_m * BM + tl.arange(0, BM)
    rn = pid_n * BN + tl.arange(0, BN)
    rk = tl.arange(0, BK)
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    small = tl.zeros((BM, BN), dtype=tl.float32)
    for k0 in range(0, K, BK):
        k = k0 + rk
        a = tl.load(x_ptr + rm[:, None].to(tl.int64) * sxm + k[None, :] * sxk,
                    mask=(rm[:, None] < M) & (k[None, :] < K), other=0.0)
        b = tl.load(w_ptr + rn[None, :].to(tl.int64) * swn + k[:, None] * swk,
                    mask=(k[:, None] < K) & (rn[None, :] < N), other=0.0)
        a_hi, a_lo, a_hc = _split(a)
        b_hi, b_lo, b_hc = _split(b)
        small = tl.dot(a_lo, b_hc, small, input_precision="tf32")
        small = tl.dot(a_hc, b_lo, small, input_precision="tf32")
        acc = tl.dot(a_hi, b_hi, acc, input_precision="tf32")
    bias = tl.load(b_ptr + rn, mask=rn < N, other=0.0)
    v = acc + small + bias[None, :]
    v = tl.where(v < 0, 0.0, v)
    tl.store(y_ptr + rm[:, None].to(tl.int64) * sym + rn[None, :], v, mask=(rm[:, None] < M) & (rn[None, :] < N))


class ModelNew(nn.Module):
    def __init__(self, in_features, out_features):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)

    def forward(self, x):
        w, b = self.linear.weight, self.linear.bias
        lead, K = x.shape[:-1], x.shape[-1]
        x2 = x.reshape(-1, K)
        M, N = x2.shape[0], w.shape[0]
        y = torch.empty(M, N, device=x.device, dtype=x.dtype)
        grid = lambda meta: (triton.cdiv(M, meta["BM"]) * triton.cdiv(N, meta["BN"]),)
        linear_relu_kernel[grid](x2, w, b, y, M, N, K, x2.stride(0), x2.stride(1), w.stride(0), w.stride(1),
                                 y.stride(0))
        return y.reshape(*lead, N)
