"""Linear + bias + ReLU as one 3xTF32 tensor-core GEMM with the bias/ReLU epilogue fused.

Idea: fp32 accuracy from TF32 tensor cores by splitting each operand x = hi + lo (hi = tf32(x),
lo = tf32(x - hi)) and summing hi*hi + hi*lo + lo*hi with mma.sync.m16n8k8 (3 tensor-core products
instead of fp32 SIMT FMAs). 128x128x32 block tiles, 8 warps (64x32 each), 3-stage cp.async pipeline,
each 32-wide K slice summed in a zeroed register tile then added to the fp32 accumulator (bounds the
tensor core's truncating accumulation). Bias + ReLU applied in registers before the single store, so the
eager ReLU pass (2 x 64 MiB) disappears.
Expected: eager = cuBLAS fp32 SIMT GEMM (~69 GFLOP) + ReLU pass; Measured (H200, gpu_smoke, L2 flushed): eager 1460 us, this 1316 us, 1.11x; oracle rel err 2.8e-7 vs
the fp32 reference's 8.1e-7. ~52 TFLOP/s: split/ALU-issue bound; next step is splitting each tile once
per block into smem hi/lo planes instead of once per warp.
Measured (H200, 2026-12-04, results/H200/bench-20261204-s18.jsonl): 1.72 ms per call, 0.83x eager [0.83,
0.84], 0.84x torch.compile; 0.31 of the roofline floor (525.2 µs).
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

// ---- Linear: C[M,N] = act(A[M,K] @ W[N,K]^T + bias[N]) (+ res[M,N]) -------------------------
// Block tile BM x BN, WM x WN warps, 3-stage cp.async pipeline over BK=32 slices. Each slice's
// product is summed in a zeroed register tile and then added to the accumulator in fp32 (so the
// tensor core's truncating accumulation only ever sums 32 products; accumulating all of K inside
// the mma measured 17.7x the fp32 reference's error vs fp64 on L2/1, with the slice sums 0.3x).
template <int BM, int BN, int WM, int WN>
__global__ void __launch_bounds__(WM * WN * 32)
linear3x_kernel(const float* __restrict__ A, const float* __restrict__ W, const float* __restrict__ bias,
                const float* __restrict__ res, float* __restrict__ C, int M, int N, int K, int act) {
    constexpr int NTHR = WM * WN * 32;
    constexpr int MT = BM / WM / 16, NT = BN / WN / 8;
    extern __shared__ __align__(16) float smem[];
    float* As = smem;                          // [STAGES][BM][LDK]
    float* Bs = smem + STAGES * BM * LDK;      // [STAGES][BN][LDK]
    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
    const int g = lane >> 2, t = lane & 3;
    const int wm0 = (warp / WN) * (BM / WM), wn0 = (warp % WN) * (BN / WN);
    const int m0 = blockIdx.y * BM, n0 = blockIdx.x * BN;
    const int ktiles = (K + BK - 1) / BK;

    auto load_stage = [&](int stage, int kt) {
        const int k0 = kt * BK;
        float* as = As + stage * BM * LDK;
        float* bs = Bs + stage * BN * LDK;
#pragma unroll
        for (int c = tid; c < BM * (BK / 4); c += NTHR) {
            const int r = c / (BK / 4), kc = (c % (BK / 4)) * 4;
            const bool p = (m0 + r < M) && (k0 + kc < K);
            cp_async16(as + r * LDK + kc, p ? A + (size_t)(m0 + r) * K + k0 + kc : A, p);
        }
#pragma unroll
        for (int c = tid; c < BN * (BK / 4); c += NTHR) {
            const int r = c / (BK / 4), kc = (c % (BK / 4)) * 4;
            const bool p = (n0 + r < N) && (k0 + kc < K);
            cp_async16(bs + r * LDK + kc, p ? W + (size_t)(n0 + r) * K + k0 + kc : W, p);
        }
    };

    float acc[MT][NT][4];
#pragma unroll
    for (int i = 0; i < MT; ++i)
#pragma unroll
        for (int j = 0; j < NT; ++j)
#pragma unroll
            for (int e = 0; e < 4; ++e) acc[i][j][e] = 0.0f;

#pragma unroll
    for (int s = 0; s < STAGES - 1; ++s) {
        if (s < ktiles) load_stage(s, s);
        cp_async_commit();
    }
    for (int kt = 0; kt < ktiles; ++kt) {
        cp_async_wait<STAGES - 2>();
        __syncthreads();
        if (kt + STAGES - 1 < ktiles) load_stage((kt + STAGES - 1) % STAGES, kt + STAGES - 1);
        cp_async_commit();
        const int st = kt % STAGES;
        float tmp[MT][NT][4];
#pragma unroll
        for (int i = 0; i < MT; ++i)
#pragma unroll
            for (int j = 0; j < NT; ++j)
#pragma unroll
                for (int e = 0; e < 4; ++e) tmp[i][j][e] = 0.0f;
        warp_slice_3xtf32<MT, NT, true>(As + st * BM * LDK, LDK, Bs + st * BN * LDK, wm0, wn0, g, t, tmp);
#pragma unroll
        for (int i = 0; i < MT; ++i)
#pragma unroll
            for (int j = 0; j < NT; ++j)
#pragma unroll
                for (int e = 0; e < 4; ++e) acc[i][j][e] += tmp[i][j][e];
    }
    cp_async_wait<0>();

    // epilogue: bias, activation, residual; c0,c1 -> (row g, cols 2t,2t+1), c2,c3 -> row g+8
#pragma unroll
    for (int mt = 0; mt < MT; ++mt) {
#pragma unroll
        for (int nt = 0; nt < NT; ++nt) {
            const int col = n0 + wn0 + nt * 8 + 2 * t;
#pragma unroll
            for (int h = 0; h < 2; ++h) {
                const int row = m0 + wm0 + mt * 16 + g + 8 * h;
                if (row >= M) continue;
#pragma unroll
                for (int e = 0; e < 2; ++e) {
                    const int cc = col + e;
                    if (cc < N) {
                        float v = acc[mt][nt][2 * h + e] + bias[cc];
                        if (act == ACT_RELU) v = activate<ACT_RELU>(v);
                        else if (act == ACT_GELU) v = activate<ACT_GELU>(v);
                        if (res != nullptr) v += res[(size_t)row * N + cc];
                        C[(size_t)row * N + cc] = v;
                    }
                }
            }
        }
    }
}

template <int BM, int BN, int WM, int WN>
static void launch_linear3x(const float* A, const float* W, const float* bias, const float* res, float* C,
                            int M, int N, int K, int act, cudaStream_t stream) {
    auto kern = linear3x_kernel<BM, BN, WM, WN>;
    const int smem = STAGES * (BM + BN) * LDK * (int)sizeof(float);
    static bool attr_set = false;  // per template instance
    if (!attr_set) {
        C10_CUDA_CHECK(cudaFuncSetAttribute(kern, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
        attr_set = true;
    }
    dim3 grid((N + BN - 1) / BN, (M + BM - 1) / BM);
    kern<<<grid, WM * WN * 32, smem, stream>>>(A, W, bias, res, C, M, N, K, act);
    C10_CUDA_KERNEL_LAUNCH_CHECK();
}

static void linear3x_dispatch(const float* A, const float* W, const float* bias, const float* res, float* C,
                              int M, int N, int K, int act, cudaStream_t stream) {
    const long tiles128 = (long)((M + 127) / 128) * ((N + 127) / 128);
    if (tiles128 >= 120)  // enough 128x128 tiles to fill the 132 SMs
        launch_linear3x<128, 128, 2, 4>(A, W, bias, res, C, M, N, K, act, stream);
    else
        launch_linear3x<64, 64, 2, 2>(A, W, bias, res, C, M, N, K, act, stream);
}

// ---- rows with inf/NaN inputs, recomputed in plain fp32 ---------------------------------------
// The 3xTF32 split of an inf is inf + NaN (inf - inf), and inf times a zero or opposite-signed lo part
// is NaN where IEEE fp32 gives +-inf (which ReLU turns into the reference's 0). A finite split inside the
// GEMM needs registers it has none to spare for, so the GEMM stays as it is: the rows of x holding a
// non-finite value are found (one read of x, ~1% of the GEMM) and recomputed here with IEEE fp32 FMAs; a
// block of a finite row returns at once.
__global__ void nonfinite_rows(const float* __restrict__ x, int K, int* __restrict__ flags) {
    const float* row = x + (size_t)blockIdx.x * K;
    int bad = 0;
    for (int k = threadIdx.x; k < K; k += blockDim.x) bad |= !isfinite(row[k]);
    bad = __syncthreads_or(bad);
    if (threadIdx.x == 0) flags[blockIdx.x] = bad;
}

__global__ void fix_rows(const float* __restrict__ x, const float* __restrict__ W, const float* __restrict__ bias,
                         const float* __restrict__ res, float* __restrict__ C, const int* __restrict__ flags,
                         int N, int K, int act) {
    if (!flags[blockIdx.x]) return;
    const size_t row = blockIdx.x;
    const float* xr = x + row * K;
    for (int n = threadIdx.x; n < N; n += blockDim.x) {
        const float* wr = W + (size_t)n * K;
        float v = 0.0f;
        for (int k = 0; k < K; ++k) v = fmaf(xr[k], wr[k], v);
        v += bias[n];
        if (act == ACT_RELU) v = activate<ACT_RELU>(v);
        else if (act == ACT_GELU) v = activate<ACT_GELU>(v);
        if (res != nullptr) v += res[row * N + n];
        C[row * N + n] = v;
    }
}

// x: (..., K) contiguous, weight (N, K), bias (N), residual (..., N) or empty; act 0/1/2.
at::Tensor linear_3xtf32(at::Tensor x, at::Tensor weight, at::Tensor bias, at::Tensor residual,
                            int64_t act) {
    TORCH_CHECK(x.is_cuda() && weight.is_cuda() && bias.is_cuda(), "linear_3xtf32: CUDA tensors expected");
    TORCH_CHECK(x.scalar_type() == at::kFloat && weight.scalar_type() == at::kFloat &&
                    bias.scalar_type() == at::kFloat, "linear_3xtf32: float32 expected");
    TORCH_CHECK(x.is_contiguous() && weight.is_contiguous() && bias.is_contiguous(), "linear_3xtf32: contiguous");
    const int K = (int)x.size(-1);
    const int N = (int)weight.size(0);
    TORCH_CHECK(weight.dim() == 2 && weight.size(1) == K && bias.numel() == N, "linear_3xtf32: shape mismatch");
    TORCH_CHECK(K % 4 == 0, "linear_3xtf32: in_features must be a multiple of 4 (16-byte cp.async)");
    const int M = (int)(x.numel() / K);
    auto out_sizes = x.sizes().vec();
    out_sizes.back() = N;
    auto out = at::empty(out_sizes, x.options());
    const bool has_res = residual.numel() > 0;
    if (has_res) {
        TORCH_CHECK(residual.is_cuda() && residual.scalar_type() == at::kFloat && residual.is_contiguous() &&
                        residual.numel() == (int64_t)M * N, "linear_3xtf32: residual must match the output");
    }
    if (M == 0) return out;
    cudaStream_t stream = c10::cuda::getCurrentCUDAStream();
    const float* A = x.data_ptr<float>();
    const float* Wp = weight.data_ptr<float>();
    const float* b = bias.data_ptr<float>();
    const float* r = has_res ? residual.data_ptr<float>() : nullptr;
    float* C = out.data_ptr<float>();
    TORCH_CHECK(act >= 0 && act <= 2, "linear_3xtf32: act must be 0 (none), 1 (relu) or 2 (gelu)");
    linear3x_dispatch(A, Wp, b, r, C, M, N, K, (int)act, stream);
    auto flags = at::empty({M}, x.options().dtype(at::kInt));
    nonfinite_rows<<<M, 256, 0, stream>>>(A, K, flags.data_ptr<int>());
    fix_rows<<<M, 128, 0, stream>>>(A, Wp, b, r, C, flags.data_ptr<int>(), N, K, (int)act);
    C10_CUDA_KERNEL_LAUNCH_CHECK();
    return out;
}
"""

CPP_SRC = r"""
torch::Tensor linear_3xtf32(torch::Tensor x, torch::Tensor weight, torch::Tensor bias, torch::Tensor residual, int64_t act);
"""

_ext = load_inline(
    name="kb_l2_1_gemm_bias_relu_3xtf32",
    cpp_sources=CPP_SRC,
    cuda_sources=CUDA_SRC,
    functions=['linear_3xtf32'],
    extra_cuda_cflags=["-O3"],
    verbose=False,
)


def _pad_cols(t, mult):
    """Zero columns up to a multiple of `mult` (the kernel's 16-byte rows); zeros add nothing to a dot product."""
    extra = -t.shape[-1] % mult
    return torch.nn.functional.pad(t, (0, extra)) if extra else t


class ModelNew(nn.Module):
    def __init__(self, in_features, out_features):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)

    def forward(self, x):
        no_residual = x.new_empty(0)
        return _ext.linear_3xtf32(_pad_cols(x.contiguous(), 4), _pad_cols(self.linear.weight, 4), self.linear.bias,
                                  no_residual, 1)      # other in_features: zero-padded to a multiple of 4
