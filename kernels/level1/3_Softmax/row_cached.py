"""Row softmax, one block per row, the row held in registers: one HBM read, one HBM write.

Idea: each thread loads its share of the row as 16-byte float4 vectors into registers (up to
CACHE vectors per thread), keeps an online (max, sum-of-exp) pair while loading, combines the pairs
with warp shuffles and one shared-memory step, then writes exp(x - max) / sum from the registers.
Rows longer than blockDim * CACHE * 4 still work: the uncached tail is re-read from global memory.
Accurate expf (no --use_fast_math) so the error vs the fp64 oracle stays at the fp32 reference's.
Expected: near the copy floor (512 MB of traffic, ~125 us); eager is already close, so ~1.0-1.2x.
NaN: a thread that saw only NaN kept (m, s) = (-inf, 0), so its row came out finite elsewhere where torch's
is all NaN (caught by the special-value trials of session 34, on the H100 in session 35); the sum now carries it.
Measured (H200, 2026-12-04, results/H200/bench-20261204-s18.jsonl): 137.6 µs per call, 1.30x eager [1.29,
1.32], 1.74x torch.compile; 0.99 of the roofline floor (136.6 µs).
"""
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cuda_src = r"""
#include <ATen/ATen.h>
#include <c10/cuda/CUDAStream.h>
#include <c10/cuda/CUDAException.h>
#include <cuda_runtime.h>
#include <math_constants.h>

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

// merge (m2, s2) into (m, s): s = sum exp(x - m); a NaN sum (a NaN in the row) stays NaN
__device__ __forceinline__ void merge_ms(float& m, float& s, float m2, float s2) {
    float mn = fmaxf(m, m2);
    if (mn == -CUDART_INF_F) { s += s2; return; }  // nothing finite on either side: 0, or NaN
    s = s * expf(m - mn) + s2 * expf(m2 - mn);
    m = mn;
}

template <int V>
__device__ __forceinline__ void online_update(float& m, float& s, const float* v) {
    float cm = v[0];
    bool nan = isnan(v[0]);
#pragma unroll
    for (int j = 1; j < V; ++j) { cm = fmaxf(cm, v[j]); nan |= isnan(v[j]); }
    if (nan) s = CUDART_NAN_F;  // fmaxf drops NaN: a NaN makes the whole row NaN, as in torch.softmax
    if (cm > m) { s *= expf(m - cm); m = cm; }
    if (m == -CUDART_INF_F) return;  // nothing finite seen yet: avoid exp(-inf - -inf) = NaN
#pragma unroll
    for (int j = 0; j < V; ++j) s += expf(v[j] - m);
}

template <int V, int CACHE>
__global__ void softmax_rows(const float* __restrict__ x, float* __restrict__ y, int D) {
    const float* xr = x + (size_t)blockIdx.x * D;
    float* yr = y + (size_t)blockIdx.x * D;
    const int nvec = D / V;
    const int tid = threadIdx.x, nthr = blockDim.x;
    float cache[CACHE][V];
    float m = -CUDART_INF_F, s = 0.f;
#pragma unroll
    for (int c = 0; c < CACHE; ++c) {
        int i = tid + c * nthr;
        if (i < nvec) Vec<V>::load(xr + (size_t)i * V, cache[c]);
    }
#pragma unroll
    for (int c = 0; c < CACHE; ++c) {
        int i = tid + c * nthr;
        if (i < nvec) online_update<V>(m, s, cache[c]);
    }
    for (int i = tid + CACHE * nthr; i < nvec; i += nthr) {
        float v[V];
        Vec<V>::load(xr + (size_t)i * V, v);
        online_update<V>(m, s, v);
    }
    // block reduction of (m, s)
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) {
        float m2 = __shfl_xor_sync(0xffffffffu, m, o);
        float s2 = __shfl_xor_sync(0xffffffffu, s, o);
        merge_ms(m, s, m2, s2);
    }
    __shared__ float sm[32], ss[32];
    __shared__ float fin_m, fin_inv;
    const int warp = tid >> 5, lane = tid & 31, nwarps = (nthr + 31) >> 5;
    if (lane == 0) { sm[warp] = m; ss[warp] = s; }
    __syncthreads();
    if (warp == 0) {
        m = lane < nwarps ? sm[lane] : -CUDART_INF_F;
        s = lane < nwarps ? ss[lane] : 0.f;
#pragma unroll
        for (int o = 16; o > 0; o >>= 1) {
            float m2 = __shfl_xor_sync(0xffffffffu, m, o);
            float s2 = __shfl_xor_sync(0xffffffffu, s, o);
            merge_ms(m, s, m2, s2);
        }
        if (lane == 0) { fin_m = m; fin_inv = 1.f / s; }
    }
    __syncthreads();
    m = fin_m;
    const float inv = fin_inv;
#pragma unroll
    for (int c = 0; c < CACHE; ++c) {
        int i = tid + c * nthr;
        if (i < nvec) {
            float o[V];
#pragma unroll
            for (int j = 0; j < V; ++j) o[j] = expf(cache[c][j] - m) * inv;
            Vec<V>::store(yr + (size_t)i * V, o);
        }
    }
    for (int i = tid + CACHE * nthr; i < nvec; i += nthr) {
        float v[V];
        Vec<V>::load(xr + (size_t)i * V, v);
#pragma unroll
        for (int j = 0; j < V; ++j) v[j] = expf(v[j] - m) * inv;
        Vec<V>::store(yr + (size_t)i * V, v);
    }
}

at::Tensor softmax_lastdim(at::Tensor x) {
    TORCH_CHECK(x.is_cuda() && x.scalar_type() == at::kFloat, "softmax: expected a CUDA float32 tensor");
    TORCH_CHECK(x.dim() >= 1 && x.numel() > 0, "softmax: expected a non-empty tensor");
    x = x.contiguous();
    auto y = at::empty_like(x);
    const int64_t D64 = x.size(-1);
    TORCH_CHECK(D64 < (1LL << 31), "softmax: row too long");
    const int D = (int)D64;
    const int64_t rows = x.numel() / D;
    TORCH_CHECK(rows < (1LL << 31), "softmax: too many rows");
    constexpr int CACHE = 8;
    const bool vec4 = (D % 4 == 0) && (reinterpret_cast<uintptr_t>(x.data_ptr()) % 16 == 0);
    const int V = vec4 ? 4 : 1;
    int nvec = D / V;
    int threads = (nvec + CACHE - 1) / CACHE;
    threads = ((threads + 31) / 32) * 32;
    threads = threads < 32 ? 32 : (threads > 1024 ? 1024 : threads);
    auto stream = c10::cuda::getCurrentCUDAStream();
    if (vec4)
        softmax_rows<4, CACHE><<<(unsigned)rows, threads, 0, stream>>>(x.data_ptr<float>(), y.data_ptr<float>(), D);
    else
        softmax_rows<1, CACHE><<<(unsigned)rows, threads, 0, stream>>>(x.data_ptr<float>(), y.data_ptr<float>(), D);
    C10_CUDA_KERNEL_LAUNCH_CHECK();
    return y;
}
"""

cpp_src = "at::Tensor softmax_lastdim(at::Tensor x);"

_ext = load_inline(
    name="kb_l1_softmax_row_cached",
    cpp_sources=cpp_src,
    cuda_sources=cuda_src,
    functions=["softmax_lastdim"],
    extra_cuda_cflags=["-O3"],
    verbose=False,
)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        # the problem's softmax is over dim=1 of a 2D input, i.e. the last dim
        if x.dim() != 2:
            raise ValueError("expects a 2D input (softmax over dim 1)")
        return _ext.softmax_lastdim(x)
