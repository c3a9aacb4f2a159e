"""Sum over one dim (keepdim) as a strided column reduction, split over the reduced dim.

Idea: view x as (outer, R, inner) and reduce R. A 32 x 8 block owns 32 float4 columns (128 floats)
of one outer index: the 32 lanes read consecutive 16-byte vectors of a row (512 B coalesced), the
8 warps take interleaved rows, 4 rows in flight per thread; the 8 partial sums are combined through
shared memory. When outer * inner / 128 gives too few blocks to fill 132 SMs, R is split into chunks
(grid z) and a second tiny kernel adds the chunk partials in a fixed order (deterministic, no atomics).
Works for any dim/shape (scalar columns when inner % 4 != 0). Expected: read floor (512 MB, ~120 us);
eager's reduction is also near bandwidth, so ~1.0-1.1x.
Measured (H200, results/H200/bench-20261130-072328.jsonl): 138.9 us vs eager 138.1 us, 0.99x [0.99, 1.00],
94% of the copy-bandwidth floor. Kept although a hair slower: both sides are at the memory floor, and it is
the suite's example of a deterministic split reduction (no atomics) for any dim.
Measured (H200, 2026-12-04, results/H200/bench-20261204-s18.jsonl): 143.4 µs per call, 1.05x eager [1.04,
1.06], 1.46x torch.compile; 0.95 of the roofline floor (136.6 µs).
"""
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cuda_src = r"""
#include <ATen/ATen.h>
#include <c10/cuda/CUDAStream.h>
#include <c10/cuda/CUDAException.h>
#include <cuda_runtime.h>

constexpr int BX = 32, BY = 8;

template <int V> struct Vec;
template <> struct Vec<4> {
    static __device__ __forceinline__ void load_add(const float* p, float* a) {
        float4 t = __ldg(reinterpret_cast<const float4*>(p));
        a[0] += t.x; a[1] += t.y; a[2] += t.z; a[3] += t.w;
    }
    static __device__ __forceinline__ void load(const float* p, float* v) {
        float4 t = __ldg(reinterpret_cast<const float4*>(p));
        v[0] = t.x; v[1] = t.y; v[2] = t.z; v[3] = t.w;
    }
};
template <> struct Vec<1> {
    static __device__ __forceinline__ void load_add(const float* p, float* a) { a[0] += __ldg(p); }
    static __device__ __forceinline__ void load(const float* p, float* v) { v[0] = __ldg(p); }
};

// out[(sp * outer + o) * inner + c] = sum_{r in chunk sp} x[(o * R + r) * inner + c]
template <int V>
__global__ void __launch_bounds__(BX * BY) colsum_partial(const float* __restrict__ x, float* __restrict__ out,
                                                          int64_t outer, int64_t R, int64_t inner, int64_t rchunk) {
    __shared__ float sh[BY][BX * V];
    const int tx = threadIdx.x, ty = threadIdx.y;
    const int64_t col = ((int64_t)blockIdx.x * BX + tx) * V;
    const int64_t o = blockIdx.y;
    const int64_t sp = blockIdx.z;
    const int64_t r0 = sp * rchunk;
    const int64_t r1 = (r0 + rchunk < R) ? r0 + rchunk : R;
    float acc[V];
#pragma unroll
    for (int j = 0; j < V; ++j) acc[j] = 0.f;
    if (col < inner) {
        const float* p = x + o * R * inner + col;
        int64_t r = r0 + ty;
        for (; r + 3 * BY < r1; r += 4 * BY) {
            float v0[V], v1[V], v2[V], v3[V];
            Vec<V>::load(p + r * inner, v0);
            Vec<V>::load(p + (r + BY) * inner, v1);
            Vec<V>::load(p + (r + 2 * BY) * inner, v2);
            Vec<V>::load(p + (r + 3 * BY) * inner, v3);
#pragma unroll
            for (int j = 0; j < V; ++j) acc[j] += (v0[j] + v1[j]) + (v2[j] + v3[j]);
        }
        for (; r < r1; r += BY) Vec<V>::load_add(p + r * inner, acc);
    }
#pragma unroll
    for (int j = 0; j < V; ++j) sh[ty][tx * V + j] = acc[j];
    __syncthreads();
    if (ty == 0 && col < inner) {
#pragma unroll
        for (int k = 1; k < BY; ++k) {
#pragma unroll
            for (int j = 0; j < V; ++j) acc[j] += sh[k][tx * V + j];
        }
        float* q = out + (sp * outer + o) * inner + col;
#pragma unroll
        for (int j = 0; j < V; ++j) q[j] = acc[j];
    }
}

__global__ void sum_splits(const float* __restrict__ ws, float* __restrict__ out, int64_t n, int splits) {
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x) {
        float s = 0.f;
        for (int k = 0; k < splits; ++k) s += ws[k * n + i];
        out[i] = s;
    }
}

at::Tensor sum_dim_keepdim(at::Tensor x, int64_t dim) {
    TORCH_CHECK(x.is_cuda() && x.scalar_type() == at::kFloat, "sum: expected a CUDA float32 tensor");
    TORCH_CHECK(x.dim() >= 1, "sum: expected at least 1 dim");
    if (dim < 0) dim += x.dim();
    TORCH_CHECK(dim >= 0 && dim < x.dim(), "sum: dim out of range");
    x = x.contiguous();
    auto sizes = x.sizes().vec();
    int64_t outer = 1, inner = 1;
    for (int64_t d = 0; d < dim; ++d) outer *= sizes[d];
    for (int64_t d = dim + 1; d < (int64_t)sizes.size(); ++d) inner *= sizes[d];
    const int64_t R = sizes[dim];
    sizes[dim] = 1;
    if (R == 0 || outer * inner == 0) return at::zeros(sizes, x.options());
    auto y = at::empty(sizes, x.options());
    const bool vec4 = (inner % 4 == 0) && (reinterpret_cast<uintptr_t>(x.data_ptr()) % 16 == 0);
    const int V = vec4 ? 4 : 1;
    const int64_t gx = (inner + BX * V - 1) / (BX * V);
    TORCH_CHECK(outer < 65536, "sum: outer size too large for this kernel");
    int dev = 0, sms = 132;
    cudaGetDevice(&dev);
    cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev);
    const int64_t want = (int64_t)sms * 8;
    int64_t splits = (want + gx * outer - 1) / (gx * outer);
    const int64_t max_splits = (R + 63) / 64;  // keep >= 64 rows per chunk
    if (splits > max_splits) splits = max_splits;
    if (splits > 64) splits = 64;
    if (splits < 1) splits = 1;
    const int64_t rchunk = (R + splits - 1) / splits;
    splits = (R + rchunk - 1) / rchunk;
    auto stream = c10::cuda::getCurrentCUDAStream();
    at::Tensor ws = splits > 1 ? at::empty({splits * outer * inner}, x.options()) : y;
    dim3 grid((unsigned)gx, (unsigned)outer, (unsigned)splits), block(BX, BY);
    if (vec4)
        colsum_partial<4><<<grid, block, 0, stream>>>(x.data_ptr<float>(), ws.data_ptr<float>(), outer, R, inner, rchunk);
    else
        colsum_partial<1><<<grid, block, 0, stream>>>(x.data_ptr<float>(), ws.data_ptr<float>(), outer, R, inner, rchunk);
    C10_CUDA_KERNEL_LAUNCH_CHECK();
    if (splits > 1) {
        const int64_t n = outer * inner;
        int64_t blocks = (n + 255) / 256;
        if (blocks > 4096) blocks = 4096;
        sum_splits<<<(unsigned)blocks, 256, 0, stream>>>(ws.data_ptr<float>(), y.data_ptr<float>(), n, (int)splits);
        C10_CUDA_KERNEL_LAUNCH_CHECK();
    }
    return y;
}
"""

cpp_src = "at::Tensor sum_dim_keepdim(at::Tensor x, int64_t dim);"

_ext = load_inline(
    name="kb_l1_sum_split_cols",
    cpp_sources=cpp_src,
    cuda_sources=cuda_src,
    functions=["sum_dim_keepdim"],
    extra_cuda_cflags=["-O3"],
    verbose=False,
)


class ModelNew(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.dim = dim

    def forward(self, x):
        return _ext.sum_dim_keepdim(x, self.dim)
