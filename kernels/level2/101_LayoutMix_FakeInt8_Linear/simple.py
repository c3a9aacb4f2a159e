"""L2/101 per-token mix of fake-int8 x and x, then Linear: simple candidate, two launches.

Idea. Kernel 1: one 1024-thread block reduces max|x| over the whole tensor and writes the scale exactly
as torch computes it (max(m, 1e-8) * float(1/127), torch multiplies by the reciprocal of a CPU scalar).
Kernel 2: one block per token; thread k builds mixed[k] in shared memory with torch's rounding sequence
(q = rint(x / scale) with true IEEE division, half to even; clamp; * scale; alpha * x_q + (1 - alpha) * x
with separately rounded products and sum), then thread j computes bias[j] + sum_k mixed[k] * W[j][k]
reading W through the read-only cache. The mixed tensor never reaches memory.
Floor: launch-bound (256 KB x, 64 KB W); predicted ~8-12 us (two launches), about 8-10x eager's 92 us.
Measured (H200, kbench check, results/H200/check-101-20261130-072927.jsonl): 68.0 us vs eager 196.6 us,
2.86x [2.78, 2.93]; exact (max err 0).
Measured (H200, 2026-12-04, results/H200/bench-20261204-s18.jsonl): 67.3 µs per call, 4.42x eager [4.09,
4.71], 3.51x torch.compile; 0.00 of the roofline floor (0.2 µs).
"""
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

CUDA_SRC = r"""
#include <torch/extension.h>
#include <c10/cuda/CUDAStream.h>
#include <c10/cuda/CUDAException.h>

namespace {

// max and clamp that keep NaN, as torch.max and torch.clamp do (fmaxf/fminf drop it)
__device__ __forceinline__ float nan_max(float a, float b) { return (a > b || a != a) ? a : b; }
__device__ __forceinline__ float nan_clamp(float v, float lo, float hi) { return v < lo ? lo : (v > hi ? hi : v); }

__global__ void absmax_scale(const float* __restrict__ x, long n, float* __restrict__ scale) {
    __shared__ float red[32];
    float m = 0.f;
    for (long i = threadIdx.x; i < n; i += blockDim.x) m = nan_max(m, fabsf(x[i]));
    for (int o = 16; o > 0; o >>= 1) m = nan_max(m, __shfl_xor_sync(0xffffffffu, m, o));
    if ((threadIdx.x & 31) == 0) red[threadIdx.x >> 5] = m;
    __syncthreads();
    if (threadIdx.x < 32) {
        m = threadIdx.x < (blockDim.x >> 5) ? red[threadIdx.x] : 0.f;
        for (int o = 16; o > 0; o >>= 1) m = nan_max(m, __shfl_xor_sync(0xffffffffu, m, o));
        if (threadIdx.x == 0) *scale = __fmul_rn(nan_max(m, 1e-8f), 1.0f / 127.0f);
    }
}

// one block (blockDim >= D, >= 32) per token; dynamic smem: mixed[D]
__global__ void mix_linear(const float* __restrict__ x, const float* __restrict__ logits,
                          const float* __restrict__ w, const float* __restrict__ bias,
                          const float* __restrict__ scale_ptr, float* __restrict__ out, int D, int N) {
    extern __shared__ float mixed[];
    const int tok = blockIdx.x;
    const float scale = *scale_ptr;
    const float l = logits[tok];
    const float a = __fdiv_rn(1.0f, __fadd_rn(1.0f, expf(-l)));
    for (int k = threadIdx.x; k < D; k += blockDim.x) {
        const float xv = x[(size_t)tok * D + k];
        float q = rintf(__fdiv_rn(xv, scale));
        q = nan_clamp(q, -127.0f, 127.0f);
        const float xq = __fmul_rn(q, scale);
        mixed[k] = __fadd_rn(__fmul_rn(a, xq), __fmul_rn(__fsub_rn(1.0f, a), xv));
    }
    __syncthreads();
    for (int j = threadIdx.x; j < N; j += blockDim.x) {
        float acc = 0.f;
        for (int k = 0; k < D; ++k) acc = fmaf(mixed[k], __ldg(w + (size_t)j * D + k), acc);
        out[(size_t)tok * N + j] = acc + bias[j];
    }
}

}  // namespace

torch::Tensor layoutmix_linear(torch::Tensor x, torch::Tensor logits, torch::Tensor w, torch::Tensor b) {
    TORCH_CHECK(x.is_cuda() && logits.is_cuda() && w.is_cuda() && b.is_cuda(), "CUDA tensors expected");
    TORCH_CHECK(x.scalar_type() == torch::kFloat32 && logits.scalar_type() == torch::kFloat32 &&
                w.scalar_type() == torch::kFloat32 && b.scalar_type() == torch::kFloat32, "float32 expected");
    TORCH_CHECK(x.is_contiguous() && logits.is_contiguous() && w.is_contiguous() && b.is_contiguous(),
                "contiguous tensors expected");
    TORCH_CHECK(x.dim() == 3 && logits.dim() == 2 && x.size(0) == logits.size(0) && x.size(1) == logits.size(1),
                "x (B,T,D) and layout_logits (B,T) expected");
    const int D = x.size(2), N = w.size(0);
    const long ntok = x.size(0) * x.size(1);
    TORCH_CHECK(w.dim() == 2 && w.size(1) == D && b.dim() == 1 && b.size(0) == N, "weight (N,D), bias (N) expected");
    TORCH_CHECK(ntok > 0 && ntok < (1L << 31) && D > 0 && D <= 8192, "shape out of range");
    auto out = torch::empty({x.size(0), x.size(1), (long)N}, x.options());
    auto scale = torch::empty({1}, x.options());
    auto stream = c10::cuda::getCurrentCUDAStream();
    absmax_scale<<<1, 1024, 0, stream>>>(x.data_ptr<float>(), ntok * D, scale.data_ptr<float>());
    C10_CUDA_KERNEL_LAUNCH_CHECK();
    mix_linear<<<(unsigned)ntok, 128, D * sizeof(float), stream>>>(
        x.data_ptr<float>(), logits.data_ptr<float>(), w.data_ptr<float>(), b.data_ptr<float>(),
        scale.data_ptr<float>(), out.data_ptr<float>(), D, N);
    C10_CUDA_KERNEL_LAUNCH_CHECK();
    return out;
}
"""

CPP_SRC = "torch::Tensor layoutmix_linear(torch::Tensor x, torch::Tensor logits, torch::Tensor w, torch::Tensor b);"

_ext = load_inline(
    name="l2_101_simple_two_kernels",
    cpp_sources=CPP_SRC,
    cuda_sources=CUDA_SRC,
    functions=["layoutmix_linear"],
    extra_cuda_cflags=["-O3", "-Xptxas=-v"],
    verbose=False,
)


class ModelNew(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.proj = nn.Linear(dim, dim)

    def forward(self, x, layout_logits):
        return _ext.layoutmix_linear(x.contiguous(), layout_logits.contiguous(), self.proj.weight, self.proj.bias)
