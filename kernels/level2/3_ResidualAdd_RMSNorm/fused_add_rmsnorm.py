"""Residual add + RMSNorm in one pass: one block per row, the summed row kept in registers.

Idea: eager runs add, pow, mean, rsqrt, two muls (~10 passes over 64 MiB tensors). Here each row of
x and residual is read once (streaming loads), h = x + r and sum(h^2) stay in registers, a block
reduction gives the inverse RMS, and out = h * inv * w is written once: 3 x 64 MiB of traffic, the
minimum. Floor at ~4.2 TB/s: ~48 us.
Measured (H200): eager 230 us, this 64 us (~75% of the copy-bandwidth floor), 3.6x; oracle error equal
to the reference's (6.1e-8).
Measured (H200, 2026-12-04, results/H200/bench-20261204-s18.jsonl): 60.2 µs per call, 3.70x eager [3.66,
3.74], 1.75x torch.compile; 0.85 of the roofline floor (51.2 µs).
"""
import math

import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

CUDA_SRC = r"""
#include <ATen/core/Tensor.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/empty_like.h>
#include <c10/cuda/CUDAException.h>
#include <c10/cuda/CUDAStream.h>
#include <cuda_runtime.h>
#include <stdint.h>

// ---- 3xTF32 building blocks --------------------------------------------------------------
// x = hi + lo with hi = tf32(x) (round to nearest) and lo = tf32(x - hi); a*b is then
// hi*hi + hi*lo + lo*hi, dropping only lo*lo (~2^-22 relative), i.e. fp32-level accuracy.
// Round to nearest (ties away) on the 13 dropped mantissa bits with integer ops: cheaper than
// cvt.rna.tf32.f32 (which also checks for inf; inputs here are finite). Measured 1.12x on L2/1.
__device__ __forceinline__ uint32_t to_tf32(float x) {
    // NaN stays NaN: the GPU's canonical NaN (0x7fffffff) would carry into the sign bit and round to -0
    const uint32_t u = __float_as_uint(x);
    return ((u & 0x7fffffffu) > 0x7f800000u ? (u | 0x00400000u) : u + 0x1000u) & 0xffffe000u;
}
__device__ __forceinline__ void split_tf32(float x, uint32_t& hi, uint32_t& lo) {
    hi = to_tf32(x);
    lo = to_tf32(x - __uint_as_float(hi));  // x - hi is exact in fp32
}
// D = A(16x8, row) * B(8x8, col) + D, tf32 inputs, fp32 accumulate.
__device__ __forceinline__ void mma_tf32(float (&d)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
    asm volatile(
        "mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
        "{%0,%1,%2,%3};\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}
__device__ __forceinline__ void cp_async16(void* smem, const void* gmem, bool pred) {
    unsigned s = (unsigned)__cvta_generic_to_shared(smem);
    int n = pred ? 16 : 0;  // src-size 0 zero-fills the 16 bytes
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(s), "l"(gmem), "r"(n));
}
__device__ __forceinline__ void cp_async4(void* smem, const void* gmem, bool pred) {
    unsigned s = (unsigned)__cvta_generic_to_shared(smem);
    int n = pred ? 4 : 0;
    asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;\n" ::"r"(s), "l"(gmem), "r"(n));
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::); }
template <int N>
__device__ __forceinline__ void cp_async_wait() { asm volatile("cp.async.wait_group %0;\n" ::"n"(N)); }

enum { ACT_NONE = 0, ACT_RELU = 1, ACT_GELU = 2 };
template <int ACT>
__device__ __forceinline__ float activate(float v) {
    if (ACT == ACT_RELU) return v < 0.0f ? 0.0f : v;   // not fmaxf: NaN stays NaN, as in torch.relu
    if (ACT == ACT_GELU) return 0.5f * v * (1.0f + erff(v * 0.70710678118654752f));
    return v;
}

constexpr int BK = 32;          // K slice per pipeline stage
constexpr int LDK = BK + 4;     // padded smem row (floats): conflict-free fragment loads
constexpr int STAGES = 3;       // cp.async pipeline depth

// Warp-level 3xTF32 product of one BK slice. As: [rows][LDK] (K-contiguous) or, when A_KMAJOR is
// false, [BK][lda_s] (M-contiguous); Bs: [cols][LDK]. tmp accumulates the slice (zeroed by caller).
template <int MT, int NT, bool A_KCONTIG>
__device__ __forceinline__ void warp_slice_3xtf32(const float* As, int lda_s, const float* Bs,
                                                  int wm0, int wn0, int g, int t,
                                                  float (&tmp)[MT][NT][4]) {
#pragma unroll
    for (int kk = 0; kk < BK; kk += 8) {
        uint32_t bh[NT][2], bl[NT][2];
#pragma unroll
        for (int nt = 0; nt < NT; ++nt) {
            const float* bp = Bs + (wn0 + nt * 8 + g) * LDK + kk + t;
            split_tf32(bp[0], bh[nt][0], bl[nt][0]);
            split_tf32(bp[4], bh[nt][1], bl[nt][1]);
        }
#pragma unroll
        for (int mt = 0; mt < MT; ++mt) {
            float a[4];
            const int r = wm0 + mt * 16 + g;
            if (A_KCONTIG) {
                const float* ap = As + r * LDK + kk + t;
                a[0] = ap[0]; a[1] = ap[8 * LDK]; a[2] = ap[4]; a[3] = ap[8 * LDK + 4];
            } else {
                const float* ap = As + (kk + t) * lda_s + r;
                a[0] = ap[0]; a[1] = ap[8]; a[2] = ap[4 * lda_s]; a[3] = ap[4 * lda_s + 8];
            }
            uint32_t ah[4], al[4];
#pragma unroll
            for (int i = 0; i < 4; ++i) split_tf32(a[i], ah[i], al[i]);
#pragma unroll
            for (int nt = 0; nt < NT; ++nt) {
                mma_tf32(tmp[mt][nt], al, bh[nt][0], bh[nt][1]);
                mma_tf32(tmp[mt][nt], ah, bl[nt][0], bl[nt][1]);
                mma_tf32(tmp[mt][nt], ah, bh[nt][0], bh[nt][1]);
            }
        }
    }
}

// ---- Row norms: one block per row, the row held in registers (up to 8 float4 per thread) ------
constexpr int NORM_MAX_VEC = 8;

__device__ __forceinline__ float block_sum(float v, float* red) {
#pragma unroll
    for (int off = 16; off >= 1; off >>= 1) v += __shfl_xor_sync(0xffffffffu, v, off);
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nw = blockDim.x >> 5;
    __syncthreads();  // red may still be read from a previous call
    if (lane == 0) red[warp] = v;
    __syncthreads();
    float s = 0.f;
    for (int i = 0; i < nw; ++i) s += red[i];
    return s;
}

// threads per row-block: up to 256, more only when the row needs > 8 float4 per thread
static int norm_threads(int C4) {
    int thr = (C4 + 31) / 32 * 32;
    if (thr > 256) thr = 256;
    const int need = ((C4 + NORM_MAX_VEC - 1) / NORM_MAX_VEC + 31) / 32 * 32;
    if (need > thr) thr = need;
    return thr;
}

// out = h * rsqrt(mean(h^2) + eps) * w with h = x + r, one pass over x and r (h stays in registers).
__global__ void __launch_bounds__(1024)
add_rmsnorm_kernel(const float* __restrict__ x, const float* __restrict__ r, const float* __restrict__ w,
                   float* __restrict__ out, int C, int n, float eps) {
    __shared__ float red[32];
    const int C4 = C / 4;
    const size_t row = blockIdx.x;
    const float4* x4 = reinterpret_cast<const float4*>(x + row * C);
    const float4* r4 = reinterpret_cast<const float4*>(r + row * C);
    float4 h[NORM_MAX_VEC];
    float ss = 0.f;
#pragma unroll
    for (int i = 0; i < NORM_MAX_VEC; ++i) {
        const int c = threadIdx.x + i * blockDim.x;
        if (c < C4) {
            const float4 a = __ldcs(x4 + c), b = __ldcs(r4 + c);
            h[i] = make_float4(a.x + b.x, a.y + b.y, a.z + b.z, a.w + b.w);
            ss += h[i].x * h[i].x + h[i].y * h[i].y + h[i].z * h[i].z + h[i].w * h[i].w;
        }
    }
    const float inv = rsqrtf(block_sum(ss, red) / (float)n + eps);   // n: the row's true length (C may be padded)
    const float4* w4 = reinterpret_cast<const float4*>(w);
    float4* o4 = reinterpret_cast<float4*>(out + row * C);
#pragma unroll
    for (int i = 0; i < NORM_MAX_VEC; ++i) {
        const int c = threadIdx.x + i * blockDim.x;
        if (c < C4) {
            const float4 g = w4[c];
            __stcs(o4 + c, make_float4(h[i].x * inv * g.x, h[i].y * inv * g.y, h[i].z * inv * g.z, h[i].w * inv * g.w));
        }
    }
}

at::Tensor add_rmsnorm(at::Tensor x, at::Tensor residual, at::Tensor weight, double eps, int64_t n) {
    TORCH_CHECK(x.is_cuda() && residual.is_cuda() && weight.is_cuda(), "add_rmsnorm: CUDA tensors expected");
    TORCH_CHECK(x.scalar_type() == at::kFloat && residual.scalar_type() == at::kFloat && weight.scalar_type() == at::kFloat,
                "add_rmsnorm: float32 expected");
    TORCH_CHECK(x.is_contiguous() && residual.is_contiguous() && weight.is_contiguous(), "add_rmsnorm: contiguous");
    TORCH_CHECK(x.sizes() == residual.sizes(), "add_rmsnorm: x and residual shapes differ");
    const int C = x.size(-1);
    TORCH_CHECK(weight.numel() == C && n > 0 && n <= C, "add_rmsnorm: weight size");
    TORCH_CHECK(C % 4 == 0 && C / 4 <= 1024 * NORM_MAX_VEC, "add_rmsnorm: hidden size must be a multiple of 4, <= 32768");
    auto out = at::empty_like(x);
    const long rows = x.numel() / C;
    if (rows == 0) return out;
    add_rmsnorm_kernel<<<(unsigned)rows, norm_threads(C / 4), 0, c10::cuda::getCurrentCUDAStream()>>>(
        x.data_ptr<float>(), residual.data_ptr<float>(), weight.data_ptr<float>(), out.data_ptr<float>(), C, (int)n, (float)eps);
    C10_CUDA_KERNEL_LAUNCH_CHECK();
    return out;
}
"""

CPP_SRC = r"""
at::Tensor add_rmsnorm(at::Tensor x, at::Tensor residual, at::Tensor weight, double eps, int64_t n);
"""

_ext = load_inline(
    name="kb_l2_3_add_rmsnorm",
    cpp_sources=CPP_SRC,
    cuda_sources=CUDA_SRC,
    functions=['add_rmsnorm'],
    extra_cuda_cflags=["-O3"],
    verbose=False,
)


def _pad_cols(t, mult):
    """Zero columns up to a multiple of `mult` (the kernel's 16-byte rows); zeros add nothing to a dot product."""
    extra = -t.shape[-1] % mult
    return torch.nn.functional.pad(t, (0, extra)) if extra else t


class ModelNew(nn.Module):
    def __init__(self, hidden_size, eps):
        super().__init__()
        self.weight = nn.Parameter(1.0 + 0.1 * torch.randn(hidden_size))
        self.eps = eps

    def forward(self, x, residual):
        C = x.shape[-1]     # other hidden sizes: zero-padded to the kernel's multiple of 4, the mean over C
        out = _ext.add_rmsnorm(_pad_cols(x.contiguous(), 4), _pad_cols(residual.contiguous(), 4),
                               _pad_cols(self.weight, 4), self.eps, C)
        return out[..., :C] if out.shape[-1] != C else out
