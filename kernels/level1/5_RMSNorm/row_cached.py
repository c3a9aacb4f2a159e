"""RMSNorm over the last dim as one kernel: one block per row, the row held in registers.

Idea: eager runs the module as ~5 kernels (pow, mean, add+rsqrt, two multiplies), about 7 passes
over the 256 MB tensor. Here each thread loads its share of the row as float4 into registers, the
block sums x^2 (warp shuffles + one shared-memory step), and the row is written as
x * rsqrt(mean + eps) * weight from the registers: one HBM read, one write. The uncached tail of rows
longer than blockDim * CACHE * 4 is re-read (general shapes work).
Expected: near the copy floor (512 MB, ~125 us) against several passes for eager: ~3x.
Measured (H200, 2026-12-04, results/H200/bench-20261204-s18.jsonl): 137.0 µs per call, 4.41x eager [4.37,
4.45], 1.30x torch.compile; 1.00 of the roofline floor (136.6 µs).
"""
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cuda_src = r"""
#include <ATen/ATen.h>
#include <c10/cuda/CUDAStream.h>
#include <c10/cuda/CUDAException.h>
#include <cuda_runtime.h>

template <int V> struct Vec;
template <> struct Vec<4> {
    static __device__ __forceinline__ void load(const float* p, float* v) {
        float4 t = __ldg(reinterpret_cast<const float4*>(p));
        v[0] = t.x; v[1] = t.y; v[2] = t.z; v[3] = t.w;
    }
    static __device__ __forceinline__ void store(float* p, const float* v) {
        *reinterpret_cast<float4*>(p) = make_float4(v[0], v[1], v[2], v[3]);
    }
};
template <> struct Vec<1> {
    static __device__ __forceinline__ void load(const float* p, float* v) { v[0] = __ldg(p); }
    static __device__ __forceinline__ void store(float* p, const float* v) { p[0] = v[0]; }
};

__device__ __forceinline__ float block_sum(float v, float* sh) {
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, nwarps = (blockDim.x + 31) >> 5;
    if (lane == 0) sh[warp] = v;
    __syncthreads();
    if (warp == 0) {
        v = lane < nwarps ? sh[lane] : 0.f;
#pragma unroll
        for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
        if (lane == 0) sh[32] = v;
    }
    __syncthreads();
    return sh[32];
}

template <int V, int CACHE>
__global__ void rmsnorm_rows(const float* __restrict__ x, const float* __restrict__ w,
                             float* __restrict__ y, int D, float eps) {
    __shared__ float red[33];
    const float* xr = x + (size_t)blockIdx.x * D;
    float* yr = y + (size_t)blockIdx.x * D;
    const int nvec = D / V;
    const int tid = threadIdx.x, nthr = blockDim.x;
    float cache[CACHE][V];
    float q = 0.f;
#pragma unroll
    for (int c = 0; c < CACHE; ++c) {
        int i = tid + c * nthr;
        if (i < nvec) Vec<V>::load(xr + (size_t)i * V, cache[c]);
    }
#pragma unroll
    for (int c = 0; c < CACHE; ++c) {
        int i = tid + c * nthr;
        if (i < nvec) {
#pragma unroll
            for (int j = 0; j < V; ++j) q = fmaf(cache[c][j], cache[c][j], q);
        }
    }
    for (int i = tid + CACHE * nthr; i < nvec; i += nthr) {
        float v[V];
        Vec<V>::load(xr + (size_t)i * V, v);
#pragma unroll
        for (int j = 0; j < V; ++j) q = fmaf(v[j], v[j], q);
    }
    const float r = rsqrtf(block_sum(q, red) / (float)D + eps);
#pragma unroll
    for (int c = 0; c < CACHE; ++c) {
        int i = tid + c * nthr;
        if (i < nvec) {
            float wv[V], o[V];
            Vec<V>::load(w + (size_t)i * V, wv);
#pragma unroll
            for (int j = 0; j < V; ++j) o[j] = cache[c][j] * r * wv[j];
            Vec<V>::store(yr + (size_t)i * V, o);
        }
    }
    for (int i = tid + CACHE * nthr; i < nvec; i += nthr) {
        float v[V], wv[V];
        Vec<V>::load(xr + (size_t)i * V, v);
        Vec<V>::load(w + (size_t)i * V, wv);
#pragma unroll
        for (int j = 0; j < V; ++j) v[j] = v[j] * r * wv[j];
        Vec<V>::store(yr + (size_t)i * V, v);
    }
}

static bool al16(const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; }

at::Tensor rmsnorm_fwd(at::Tensor x, at::Tensor weight, double eps) {
    TORCH_CHECK(x.is_cuda() && x.scalar_type() == at::kFloat, "rmsnorm: expected a CUDA float32 tensor");
    TORCH_CHECK(x.dim() >= 1, "rmsnorm: expected at least 1 dim");
    const int64_t D64 = x.size(-1);
    TORCH_CHECK(D64 > 0 && D64 < (1LL << 31), "rmsnorm: bad last dim");
    TORCH_CHECK(weight.is_cuda() && weight.scalar_type() == at::kFloat && weight.numel() == D64,
                "rmsnorm: weight must be a CUDA float32 tensor of size x.size(-1)");
    x = x.contiguous();
    auto wc = weight.contiguous();
    auto y = at::empty_like(x);
    if (x.numel() == 0) return y;
    const int D = (int)D64;
    const int64_t rows = x.numel() / D;
    TORCH_CHECK(rows < (1LL << 31), "rmsnorm: too many rows");
    constexpr int CACHE = 8;
    const bool vec4 = (D % 4 == 0) && al16(x.data_ptr()) && al16(wc.data_ptr());
    const int V = vec4 ? 4 : 1;
    int threads = (D / V + CACHE - 1) / CACHE;
    threads = ((threads + 31) / 32) * 32;
    threads = threads < 32 ? 32 : (threads > 1024 ? 1024 : threads);
    auto stream = c10::cuda::getCurrentCUDAStream();
    if (vec4)
        rmsnorm_rows<4, CACHE><<<(unsigned)rows, threads, 0, stream>>>(x.data_ptr<float>(), wc.data_ptr<float>(), y.data_ptr<float>(), D, (float)eps);
    else
        rmsnorm_rows<1, CACHE><<<(unsigned)rows, threads, 0, stream>>>(x.data_ptr<float>(), wc.data_ptr<float>(), y.data_ptr<float>(), D, (float)eps);
    C10_CUDA_KERNEL_LAUNCH_CHECK();
    return y;
}
"""

cpp_src = "at::Tensor rmsnorm_fwd(at::Tensor x, at::Tensor weight, double eps);"

_ext = load_inline(
    name="kb_l1_rmsnorm_row_cached",
    cpp_sources=cpp_src,
    cuda_sources=cuda_src,
    functions=["rmsnorm_fwd"],
    extra_cuda_cflags=["-O3"],
    verbose=False,
)


class ModelNew(nn.Module):
    def __init__(self, dim, eps=1e-6):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(dim))

    def forward(self, x):
        return _ext.rmsnorm_fwd(x, self.weight, self.eps)
