"""2D transpose made contiguous (x.t().contiguous()), 64 x 64 tiles through shared memory.

Idea: eager's copy of a transposed view reads or writes with a large stride (one side uncoalesced).
Here a 16 x 16 block moves a 64 x 64 tile: 16-byte float4 loads along input rows (4 rows per
thread in flight), scalar writes into a padded [64][65] shared tile, then 4 scalar shared reads down
a tile column packed into one float4 store along output rows. Both HBM sides are fully coalesced
16-byte accesses. Edge tiles (sizes not multiples of 64 / 4) take a bounds-checked scalar path.
Expected: ~85-90% of copy bandwidth (768 MB, ~190 us); eager maybe 50-70% => ~1.3-1.8x.
Measured (H200, 2026-12-04, results/H200/bench-20261204-s18.jsonl): 286.6 µs per call, 2.52x eager [2.50,
2.55], 0.98x torch.compile; 0.71 of the roofline floor (204.8 µs).
"""
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cuda_src = r"""
#include <ATen/ATen.h>
#include <c10/cuda/CUDAStream.h>
#include <c10/cuda/CUDAException.h>
#include <cuda_runtime.h>

constexpr int T = 64;      // tile edge
constexpr int BT = 16;     // block is BT x BT threads

// x: [R][C] row-major -> y: [C][R] row-major
template <bool CHECK>
__global__ void __launch_bounds__(BT * BT) transpose_tiled(const float* __restrict__ x, float* __restrict__ y,
                                                          int64_t R, int64_t C) {
    __shared__ float tile[T][T + 1];
    const int tx = threadIdx.x, ty = threadIdx.y;
    const int64_t r0 = (int64_t)blockIdx.y * T, c0 = (int64_t)blockIdx.x * T;
    if (!CHECK) {
        float4 v[4];
#pragma unroll
        for (int i = 0; i < 4; ++i)
            v[i] = __ldg(reinterpret_cast<const float4*>(x + (r0 + ty + i * BT) * C + c0 + tx * 4));
#pragma unroll
        for (int i = 0; i < 4; ++i) {
            float* t = &tile[ty + i * BT][tx * 4];
            t[0] = v[i].x; t[1] = v[i].y; t[2] = v[i].z; t[3] = v[i].w;
        }
        __syncthreads();
#pragma unroll
        for (int i = 0; i < 4; ++i) {
            const int c = ty + i * BT;  // output row within tile (= input column)
            float4 o = make_float4(tile[tx * 4 + 0][c], tile[tx * 4 + 1][c], tile[tx * 4 + 2][c], tile[tx * 4 + 3][c]);
            *reinterpret_cast<float4*>(y + (c0 + c) * R + r0 + tx * 4) = o;
        }
    } else {
#pragma unroll
        for (int i = 0; i < 4; ++i) {
            const int64_t r = r0 + ty + i * BT;
#pragma unroll
            for (int j = 0; j < 4; ++j) {
                const int64_t c = c0 + tx * 4 + j;
                tile[ty + i * BT][tx * 4 + j] = (r < R && c < C) ? __ldg(x + r * C + c) : 0.f;
            }
        }
        __syncthreads();
#pragma unroll
        for (int i = 0; i < 4; ++i) {
            const int cl = ty + i * BT;
            const int64_t c = c0 + cl;
#pragma unroll
            for (int j = 0; j < 4; ++j) {
                const int64_t r = r0 + tx * 4 + j;
                if (c < C && r < R) y[c * R + r] = tile[tx * 4 + j][cl];
            }
        }
    }
}

at::Tensor transpose2d(at::Tensor x) {
    TORCH_CHECK(x.is_cuda() && x.scalar_type() == at::kFloat, "transpose: expected a CUDA float32 tensor");
    TORCH_CHECK(x.dim() == 2, "transpose: expected a 2D tensor");
    x = x.contiguous();
    const int64_t R = x.size(0), C = x.size(1);
    auto y = at::empty({C, R}, x.options());
    if (R == 0 || C == 0) return y;
    const int64_t gx = (C + T - 1) / T, gy = (R + T - 1) / T;
    TORCH_CHECK(gy < 65536, "transpose: too many rows for this kernel");
    auto stream = c10::cuda::getCurrentCUDAStream();
    const bool fast = (R % T == 0) && (C % T == 0) && (reinterpret_cast<uintptr_t>(x.data_ptr()) % 16 == 0) &&
                      (reinterpret_cast<uintptr_t>(y.data_ptr()) % 16 == 0);
    dim3 grid((unsigned)gx, (unsigned)gy), block(BT, BT);
    if (fast)
        transpose_tiled<false><<<grid, block, 0, stream>>>(x.data_ptr<float>(), y.data_ptr<float>(), R, C);
    else
        transpose_tiled<true><<<grid, block, 0, stream>>>(x.data_ptr<float>(), y.data_ptr<float>(), R, C);
    C10_CUDA_KERNEL_LAUNCH_CHECK();
    return y;
}
"""

cpp_src = "at::Tensor transpose2d(at::Tensor x);"

_ext = load_inline(
    name="kb_l1_transpose_tiled64",
    cpp_sources=cpp_src,
    cuda_sources=cuda_src,
    functions=["transpose2d"],
    extra_cuda_cflags=["-O3"],
    verbose=False,
)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return _ext.transpose2d(x)
