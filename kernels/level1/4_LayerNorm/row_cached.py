"""LayerNorm over the last dim, one block per row, the row held in registers.

Idea: each thread loads its share of the row as float4 into registers, the block computes the mean,
then the exact two-pass variance sum((x - mean)^2) from the registers (no extra HBM traffic, no
E[x^2] - E[x]^2 cancellation), and writes (x - mean) * rstd * weight + bias with float4 stores.
One HBM read and one write per element; weight/bias (32 KB) stay in L1/L2. Reductions: warp
shuffles plus one shared-memory step. Rows longer than blockDim * CACHE * 4 are re-read for the
uncached tail (general shapes work). Expected: near the copy floor (512 MB, ~125 us); eager's
layer_norm kernel is also single-kernel, so ~1.0-1.3x.
Measured (H200, 2026-12-04, results/H200/bench-20261204-s18.jsonl): 145.8 µs per call, 1.52x eager [1.48,
1.55], 1.19x torch.compile; 0.94 of the roofline floor (136.6 µs).
"""
import math

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

// sum over the block; sh must hold 33 floats and not be reused without a barrier
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
__global__ void layernorm_rows(const float* __restrict__ x, const float* __restrict__ w,
                               const float* __restrict__ b, float* __restrict__ y, int D, float eps) {
    __shared__ float red0[33], red1[33];
    const float* xr = x + (size_t)blockIdx.x * D;
    float* yr = y + (size_t)blockIdx.x * D;
    const int nvec = D / V;
    const int tid = threadIdx.x, nthr = blockDim.x;
    float cache[CACHE][V];
    float s = 0.f;
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
            for (int j = 0; j < V; ++j) s += cache[c][j];
        }
    }
    for (int i = tid + CACHE * nthr; i < nvec; i += nthr) {
        float v[V];
        Vec<V>::load(xr + (size_t)i * V, v);
#pragma unroll
        for (int j = 0; j < V; ++j) s += v[j];
    }
    const float mean = block_sum(s, red0) / (float)D;
    float q = 0.f;
#pragma unroll
    for (int c = 0; c < CACHE; ++c) {
        int i = tid + c * nthr;
        if (i < nvec) {
#pragma unroll
            for (int j = 0; j < V; ++j) { float d = cache[c][j] - mean; q = fmaf(d, d, q); }
        }
    }
    for (int i = tid + CACHE * nthr; i < nvec; i += nthr) {
        float v[V];
        Vec<V>::load(xr + (size_t)i * V, v);
#pragma unroll
        for (int j = 0; j < V; ++j) { float d = v[j] - mean; q = fmaf(d, d, q); }
    }
    const float var = block_sum(q, red1) / (float)D;
    const float rstd = rsqrtf(var + eps);
#pragma unroll
    for (int c = 0; c < CACHE; ++c) {
        int i = tid + c * nthr;
        if (i < nvec) {
            float wv[V], bv[V], o[V];
            if (w) Vec<V>::load(w + (size_t)i * V, wv); else { for (int j = 0; j < V; ++j) wv[j] = 1.f; }
            if (b) Vec<V>::load(b + (size_t)i * V, bv); else { for (int j = 0; j < V; ++j) bv[j] = 0.f; }
#pragma unroll
            for (int j = 0; j < V; ++j) o[j] = (cache[c][j] - mean) * rstd * wv[j] + bv[j];
            Vec<V>::store(yr + (size_t)i * V, o);
        }
    }
    for (int i = tid + CACHE * nthr; i < nvec; i += nthr) {
        float v[V], wv[V], bv[V];
        Vec<V>::load(xr + (size_t)i * V, v);
        if (w) Vec<V>::load(w + (size_t)i * V, wv); else { for (int j = 0; j < V; ++j) wv[j] = 1.f; }
        if (b) Vec<V>::load(b + (size_t)i * V, bv); else { for (int j = 0; j < V; ++j) bv[j] = 0.f; }
#pragma unroll
        for (int j = 0; j < V; ++j) v[j] = (v[j] - mean) * rstd * wv[j] + bv[j];
        Vec<V>::store(yr + (size_t)i * V, v);
    }
}

static bool al16(const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; }

at::Tensor layernorm_fwd(at::Tensor x, int64_t D64, c10::optional<at::Tensor> weight,
                         c10::optional<at::Tensor> bias, double eps) {
    TORCH_CHECK(x.is_cuda() && x.scalar_type() == at::kFloat, "layernorm: expected a CUDA float32 tensor");
    TORCH_CHECK(D64 > 0 && D64 < (1LL << 31) && x.numel() % D64 == 0, "layernorm: bad normalized size");
    x = x.contiguous();
    const float* wp = nullptr;
    const float* bp = nullptr;
    at::Tensor wc, bc;
    if (weight.has_value() && weight->defined()) {
        wc = weight->contiguous();
        TORCH_CHECK(wc.is_cuda() && wc.scalar_type() == at::kFloat && wc.numel() == D64, "layernorm: bad weight");
        wp = wc.data_ptr<float>();
    }
    if (bias.has_value() && bias->defined()) {
        bc = bias->contiguous();
        TORCH_CHECK(bc.is_cuda() && bc.scalar_type() == at::kFloat && bc.numel() == D64, "layernorm: bad bias");
        bp = bc.data_ptr<float>();
    }
    auto y = at::empty_like(x);
    if (x.numel() == 0) return y;
    const int D = (int)D64;
    const int64_t rows = x.numel() / D;
    TORCH_CHECK(rows < (1LL << 31), "layernorm: too many rows");
    constexpr int CACHE = 8;
    const bool vec4 = (D % 4 == 0) && al16(x.data_ptr()) && (!wp || al16(wp)) && (!bp || al16(bp));
    const int V = vec4 ? 4 : 1;
    int threads = (D / V + CACHE - 1) / CACHE;
    threads = ((threads + 31) / 32) * 32;
    threads = threads < 32 ? 32 : (threads > 1024 ? 1024 : threads);
    auto stream = c10::cuda::getCurrentCUDAStream();
    if (vec4)
        layernorm_rows<4, CACHE><<<(unsigned)rows, threads, 0, stream>>>(x.data_ptr<float>(), wp, bp, y.data_ptr<float>(), D, (float)eps);
    else
        layernorm_rows<1, CACHE><<<(unsigned)rows, threads, 0, stream>>>(x.data_ptr<float>(), wp, bp, y.data_ptr<float>(), D, (float)eps);
    C10_CUDA_KERNEL_LAUNCH_CHECK();
    return y;
}
"""

cpp_src = ("at::Tensor layernorm_fwd(at::Tensor x, int64_t D64, c10::optional<at::Tensor> weight, "
           "c10::optional<at::Tensor> bias, double eps);")

_ext = load_inline(
    name="kb_l1_layernorm_row_cached",
    cpp_sources=cpp_src,
    cuda_sources=cuda_src,
    functions=["layernorm_fwd"],
    extra_cuda_cflags=["-O3"],
    verbose=False,
)


class ModelNew(nn.Module):
    def __init__(self, normalized_shape):
        super().__init__()
        self.ln = nn.LayerNorm(normalized_shape)

    def forward(self, x):
        shape = tuple(self.ln.normalized_shape)
        if tuple(x.shape[-len(shape):]) != shape:
            raise ValueError(f"trailing dims {tuple(x.shape)} do not match normalized_shape {shape}")
        return _ext.layernorm_fwd(x, math.prod(shape), self.ln.weight, self.ln.bias, self.ln.eps)
