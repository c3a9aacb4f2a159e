"""Exact erf GELU, elementwise with 16-byte loads/stores, two float4 in flight per thread.

Idea: y = 0.5 * x * (1 + erf(x / sqrt(2))) with accurate erff (no fast-math), float4 vector
accesses, each thread issuing both of its loads before any math. Scalar tail for sizes not a multiple
of 4 or unaligned pointers. Expected: copy floor (512 MB, ~120-125 us); eager's vectorized
elementwise kernel is already near it, so ~1.0x. Kept as the level-1 elementwise baseline.
Measured (H200, results/H200/bench-20261130-072328.jsonl): 135.5 us vs eager 131.5 us, 0.97x [0.97, 0.98],
96% of the copy-bandwidth floor; eager sits 3% closer to the same floor.
Measured (H200, 2026-12-04, results/H200/bench-20261204-s18.jsonl): 139.0 µs per call, 0.96x eager [0.93,
0.98], 1.42x torch.compile; 0.98 of the roofline floor (136.6 µs).
"""
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cuda_src = r"""
#include <ATen/ATen.h>
#include <c10/cuda/CUDAStream.h>
#include <c10/cuda/CUDAException.h>
#include <cuda_runtime.h>

__device__ __forceinline__ float gelu_erf(float v) {
    return 0.5f * v * (1.0f + erff(v * 0.70710678118654752440f));
}

constexpr int THREADS = 256;
constexpr int UNROLL = 2;

__global__ void gelu_vec4(const float4* __restrict__ x, float4* __restrict__ y, int64_t n4) {
    const int64_t base = (int64_t)blockIdx.x * (THREADS * UNROLL) + threadIdx.x;
    float4 v[UNROLL];
#pragma unroll
    for (int u = 0; u < UNROLL; ++u) {
        int64_t i = base + u * THREADS;
        if (i < n4) v[u] = __ldg(x + i);
    }
#pragma unroll
    for (int u = 0; u < UNROLL; ++u) {
        int64_t i = base + u * THREADS;
        if (i < n4) {
            float4 t = v[u];
            y[i] = make_float4(gelu_erf(t.x), gelu_erf(t.y), gelu_erf(t.z), gelu_erf(t.w));
        }
    }
}

__global__ void gelu_scalar(const float* __restrict__ x, float* __restrict__ y, int64_t start, int64_t n) {
    int64_t i = start + (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = gelu_erf(__ldg(x + i));
}

at::Tensor gelu_fwd(at::Tensor x) {
    TORCH_CHECK(x.is_cuda() && x.scalar_type() == at::kFloat, "gelu: expected a CUDA float32 tensor");
    x = x.contiguous();
    auto y = at::empty_like(x);
    const int64_t n = x.numel();
    if (n == 0) return y;
    auto stream = c10::cuda::getCurrentCUDAStream();
    const float* xp = x.data_ptr<float>();
    float* yp = y.data_ptr<float>();
    int64_t done = 0;
    if (reinterpret_cast<uintptr_t>(xp) % 16 == 0 && reinterpret_cast<uintptr_t>(yp) % 16 == 0) {
        const int64_t n4 = n / 4;
        if (n4 > 0) {
            const int64_t blocks = (n4 + THREADS * UNROLL - 1) / (THREADS * UNROLL);
            TORCH_CHECK(blocks < (1LL << 31), "gelu: tensor too large");
            gelu_vec4<<<(unsigned)blocks, THREADS, 0, stream>>>(reinterpret_cast<const float4*>(xp),
                                                                 reinterpret_cast<float4*>(yp), n4);
            C10_CUDA_KERNEL_LAUNCH_CHECK();
        }
        done = n4 * 4;
    }
    if (done < n) {
        const int64_t rest = n - done;
        const int64_t blocks = (rest + THREADS - 1) / THREADS;
        TORCH_CHECK(blocks < (1LL << 31), "gelu: tensor too large");
        gelu_scalar<<<(unsigned)blocks, THREADS, 0, stream>>>(xp, yp, done, n);
        C10_CUDA_KERNEL_LAUNCH_CHECK();
    }
    return y;
}
"""

cpp_src = "at::Tensor gelu_fwd(at::Tensor x);"

_ext = load_inline(
    name="kb_l1_gelu_vec4",
    cpp_sources=cpp_src,
    cuda_sources=cuda_src,
    functions=["gelu_fwd"],
    extra_cuda_cflags=["-O3"],
    verbose=False,
)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return _ext.gelu_fwd(x)
