"""Pre-norm transformer block from 7 custom kernels: LN, qkv GEMM, flash attention, proj GEMM (+residual),
LN, fc1 GEMM (+GELU), fc2 GEMM (+residual).

Idea: every Linear is a 3xTF32 tensor-core GEMM (x = tf32 hi + lo; hi*hi + hi*lo + lo*hi, fp32-level
accuracy) with bias / GELU / residual add fused into its epilogue, so the two residual adds and the
GELU pass vanish; attention is the causal flash kernel reading q/k/v from the qkv buffer (no T x T
scores, no transposes); LayerNorm is one block per row with the row in registers (two-pass variance).
Small problem (1024 tokens): the 64x64-tile GEMM variant is used where 128x128 tiles would not fill
the 132 SMs. Expected: eager ~25 kernels; target ~2x. Measured (H200): eager 783-1103 us (launch-bound, noisy), this 311 us,
2.5-3.6x; oracle rel err 1.1e-7 vs reference 1.9e-7.
Measured (H200, 2026-12-04, results/H200/bench-20261204-s18.jsonl): 297.3 µs per call, 2.08x eager [2.01,
2.18], 1.64x torch.compile; 0.18 of the roofline floor (53.3 µs).
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
    return out;
}

// ---- Causal flash attention, fp32 SIMT, head_dim 64 ----------------------------------------
// qkv: (B, T, 3C) as produced by the qkv Linear (q | k | v, head h at columns h*64..h*64+63 of each).
// y: (B, T, C) with head h at columns h*64.. (i.e. already "transposed back").
// One block = 64 query rows of one (b, h); loops over 64-key tiles up to the diagonal only, online
// softmax in registers, P staged in smem; the T x T scores never touch global memory.
// Thread (ty, tx) of 16x16 owns query rows ty*4..ty*4+3; for S it owns key columns tx + 16*j, for O
// the head dims tx*4..tx*4+3.
constexpr int FA_BQ = 64, FA_BK = 64, FA_HD = 64;
constexpr int FA_LDQ = FA_HD + 4;   // Q, K rows (float4-aligned, conflict-free strided reads)
constexpr int FA_LDP = FA_BK + 4;   // P rows: rows 4 apart land 16 banks apart

__global__ void __launch_bounds__(256)
causal_flash_fwd_kernel(const float* __restrict__ qkv, float* __restrict__ y, int B, int T, int H, float scale) {
    extern __shared__ __align__(16) float fa_smem[];
    float* Qs = fa_smem;                  // [FA_BQ][FA_LDQ]
    float* Ks = Qs + FA_BQ * FA_LDQ;      // [FA_BK][FA_LDQ]
    float* Vs = Ks + FA_BK * FA_LDQ;      // [FA_BK][FA_HD]
    float* Ps = Vs + FA_BK * FA_HD;       // [FA_BQ][FA_LDP]
    const int C = H * FA_HD, ld = 3 * C;
    const int nq = (T + FA_BQ - 1) / FA_BQ;
    const int qt = nq - 1 - blockIdx.x;  // longest (most key tiles) first
    const int bh = blockIdx.y, b = bh / H, h = bh % H;
    const int tid = threadIdx.x, tx = tid & 15, ty = tid >> 4;
    const int q0 = qt * FA_BQ;
    const float* base = qkv + (size_t)b * T * ld + h * FA_HD;

    // Q tile (unscaled: the reference scales q.k^T, so S is scaled instead)
    for (int c = tid; c < FA_BQ * FA_HD / 4; c += 256) {
        const int r = c / (FA_HD / 4), d = (c % (FA_HD / 4)) * 4;
        float4 v = make_float4(0.f, 0.f, 0.f, 0.f);
        if (q0 + r < T) v = *reinterpret_cast<const float4*>(base + (size_t)(q0 + r) * ld + d);
        *reinterpret_cast<float4*>(&Qs[r * FA_LDQ + d]) = v;
    }
    float o[4][4], mrow[4], lrow[4];
#pragma unroll
    for (int i = 0; i < 4; ++i) {
        mrow[i] = -INFINITY;
        lrow[i] = 0.f;
#pragma unroll
        for (int d = 0; d < 4; ++d) o[i][d] = 0.f;
    }

    for (int kt = 0; kt <= qt; ++kt) {
        const int k0 = kt * FA_BK;
        __syncthreads();  // previous tile's Ks/Vs/Ps fully consumed (and Qs written, first time)
        for (int c = tid; c < FA_BK * FA_HD / 4; c += 256) {
            const int r = c / (FA_HD / 4), d = (c % (FA_HD / 4)) * 4;
            float4 kv = make_float4(0.f, 0.f, 0.f, 0.f), vv = kv;
            if (k0 + r < T) {
                const float* p = base + (size_t)(k0 + r) * ld + d;
                kv = *reinterpret_cast<const float4*>(p + C);
                vv = *reinterpret_cast<const float4*>(p + 2 * C);
            }
            *reinterpret_cast<float4*>(&Ks[r * FA_LDQ + d]) = kv;
            *reinterpret_cast<float4*>(&Vs[r * FA_HD + d]) = vv;
        }
        __syncthreads();

        float s[4][4];
#pragma unroll
        for (int i = 0; i < 4; ++i)
#pragma unroll
            for (int j = 0; j < 4; ++j) s[i][j] = 0.f;
#pragma unroll 4
        for (int kk = 0; kk < FA_HD; kk += 4) {
            float4 qv[4], kv[4];
#pragma unroll
            for (int i = 0; i < 4; ++i) qv[i] = *reinterpret_cast<const float4*>(&Qs[(ty * 4 + i) * FA_LDQ + kk]);
#pragma unroll
            for (int j = 0; j < 4; ++j) kv[j] = *reinterpret_cast<const float4*>(&Ks[(tx + 16 * j) * FA_LDQ + kk]);
#pragma unroll
            for (int i = 0; i < 4; ++i)
#pragma unroll
                for (int j = 0; j < 4; ++j) {
                    s[i][j] = fmaf(qv[i].x, kv[j].x, s[i][j]);
                    s[i][j] = fmaf(qv[i].y, kv[j].y, s[i][j]);
                    s[i][j] = fmaf(qv[i].z, kv[j].z, s[i][j]);
                    s[i][j] = fmaf(qv[i].w, kv[j].w, s[i][j]);
                }
        }
        // scale, causal mask, online softmax (row spread over the 16 tx lanes of a half-warp)
#pragma unroll
        for (int i = 0; i < 4; ++i) {
            const int qrow = q0 + ty * 4 + i;
            float mx = -INFINITY;
#pragma unroll
            for (int j = 0; j < 4; ++j) {
                const int kcol = k0 + tx + 16 * j;
                s[i][j] = (kcol <= qrow) ? s[i][j] * scale : -INFINITY;
                mx = fmaxf(mx, s[i][j]);
            }
#pragma unroll
            for (int off = 8; off >= 1; off >>= 1) mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, off));
            const float mnew = fmaxf(mrow[i], mx);  // finite: key k0 <= qrow whenever kt <= qt
            const float alpha = expf(mrow[i] - mnew);
            float sum = 0.f;
#pragma unroll
            for (int j = 0; j < 4; ++j) {
                const float p = expf(s[i][j] - mnew);
                s[i][j] = p;
                sum += p;
            }
#pragma unroll
            for (int off = 8; off >= 1; off >>= 1) sum += __shfl_xor_sync(0xffffffffu, sum, off);
            lrow[i] = lrow[i] * alpha + sum;
            mrow[i] = mnew;
#pragma unroll
            for (int d = 0; d < 4; ++d) o[i][d] *= alpha;
#pragma unroll
            for (int j = 0; j < 4; ++j) Ps[(ty * 4 + i) * FA_LDP + tx + 16 * j] = s[i][j];
        }
        __syncthreads();
        // O += P V
#pragma unroll 4
        for (int jj = 0; jj < FA_BK; jj += 4) {
            float4 pv[4], vv[4];
#pragma unroll
            for (int i = 0; i < 4; ++i) pv[i] = *reinterpret_cast<const float4*>(&Ps[(ty * 4 + i) * FA_LDP + jj]);
#pragma unroll
            for (int u = 0; u < 4; ++u) vv[u] = *reinterpret_cast<const float4*>(&Vs[(jj + u) * FA_HD + tx * 4]);
#pragma unroll
            for (int i = 0; i < 4; ++i) {
                const float pr[4] = {pv[i].x, pv[i].y, pv[i].z, pv[i].w};
#pragma unroll
                for (int u = 0; u < 4; ++u) {
                    o[i][0] = fmaf(pr[u], vv[u].x, o[i][0]);
                    o[i][1] = fmaf(pr[u], vv[u].y, o[i][1]);
                    o[i][2] = fmaf(pr[u], vv[u].z, o[i][2]);
                    o[i][3] = fmaf(pr[u], vv[u].w, o[i][3]);
                }
            }
        }
    }
#pragma unroll
    for (int i = 0; i < 4; ++i) {
        const int qrow = q0 + ty * 4 + i;
        if (qrow < T) {
            const float inv = 1.0f / lrow[i];
            float4 v = make_float4(o[i][0] * inv, o[i][1] * inv, o[i][2] * inv, o[i][3] * inv);
            *reinterpret_cast<float4*>(y + ((size_t)b * T + qrow) * C + h * FA_HD + tx * 4) = v;
        }
    }
}

// qkv (B, T, 3*C) contiguous -> y (B, T, C); head_dim = C / n_heads must be 64.
at::Tensor causal_attention_fwd(at::Tensor qkv, int64_t n_heads) {
    TORCH_CHECK(qkv.is_cuda() && qkv.scalar_type() == at::kFloat && qkv.is_contiguous() && qkv.dim() == 3,
                "causal_attention_fwd: contiguous float32 CUDA (B, T, 3C) expected");
    const int B = qkv.size(0), T = qkv.size(1), C3 = qkv.size(2);
    TORCH_CHECK(C3 % 3 == 0 && (C3 / 3) % n_heads == 0 && (C3 / 3) / n_heads == FA_HD,
                "causal_attention_fwd: this kernel needs head_dim == 64");
    const int C = C3 / 3, H = (int)n_heads;
    auto y = at::empty({B, T, C}, qkv.options());
    if (B == 0 || T == 0) return y;
    const int smem = (FA_BQ * FA_LDQ + FA_BK * FA_LDQ + FA_BK * FA_HD + FA_BQ * FA_LDP) * (int)sizeof(float);
    C10_CUDA_CHECK(cudaFuncSetAttribute(causal_flash_fwd_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
    dim3 grid((T + FA_BQ - 1) / FA_BQ, B * H);
    causal_flash_fwd_kernel<<<grid, 256, smem, c10::cuda::getCurrentCUDAStream()>>>(
        qkv.data_ptr<float>(), y.data_ptr<float>(), B, T, H, 1.0f / sqrtf((float)FA_HD));
    C10_CUDA_KERNEL_LAUNCH_CHECK();
    return y;
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

// LayerNorm over the last dim: two-pass mean / variance with the row in registers.
__global__ void __launch_bounds__(1024)
layernorm_kernel(const float* __restrict__ x, const float* __restrict__ w, const float* __restrict__ b,
                 float* __restrict__ out, int C, float eps) {
    __shared__ float red[32];
    const int C4 = C / 4;
    const size_t row = blockIdx.x;
    const float4* x4 = reinterpret_cast<const float4*>(x + row * C);
    float4 v[NORM_MAX_VEC];
    float s = 0.f;
#pragma unroll
    for (int i = 0; i < NORM_MAX_VEC; ++i) {
        const int c = threadIdx.x + i * blockDim.x;
        if (c < C4) {
            v[i] = x4[c];
            s += (v[i].x + v[i].y) + (v[i].z + v[i].w);
        }
    }
    const float mean = block_sum(s, red) / (float)C;
    float q = 0.f;
#pragma unroll
    for (int i = 0; i < NORM_MAX_VEC; ++i) {
        const int c = threadIdx.x + i * blockDim.x;
        if (c < C4) {
            v[i].x -= mean; v[i].y -= mean; v[i].z -= mean; v[i].w -= mean;
            q += v[i].x * v[i].x + v[i].y * v[i].y + v[i].z * v[i].z + v[i].w * v[i].w;
        }
    }
    const float rstd = rsqrtf(block_sum(q, red) / (float)C + eps);
    const float4* w4 = reinterpret_cast<const float4*>(w);
    const float4* b4 = reinterpret_cast<const float4*>(b);
    float4* o4 = reinterpret_cast<float4*>(out + row * C);
#pragma unroll
    for (int i = 0; i < NORM_MAX_VEC; ++i) {
        const int c = threadIdx.x + i * blockDim.x;
        if (c < C4) {
            const float4 g = w4[c], bb = b4[c];
            o4[c] = make_float4(v[i].x * rstd * g.x + bb.x, v[i].y * rstd * g.y + bb.y,
                                v[i].z * rstd * g.z + bb.z, v[i].w * rstd * g.w + bb.w);
        }
    }
}

at::Tensor layernorm_fwd(at::Tensor x, at::Tensor weight, at::Tensor bias, double eps) {
    TORCH_CHECK(x.is_cuda() && weight.is_cuda() && bias.is_cuda(), "layernorm_fwd: CUDA tensors expected");
    TORCH_CHECK(x.scalar_type() == at::kFloat && weight.scalar_type() == at::kFloat && bias.scalar_type() == at::kFloat,
                "layernorm_fwd: float32 expected");
    TORCH_CHECK(x.is_contiguous() && weight.is_contiguous() && bias.is_contiguous(), "layernorm_fwd: contiguous");
    const int C = x.size(-1);
    TORCH_CHECK(weight.numel() == C && bias.numel() == C, "layernorm_fwd: affine parameter size");
    TORCH_CHECK(C % 4 == 0 && C / 4 <= 1024 * NORM_MAX_VEC, "layernorm_fwd: size must be a multiple of 4, <= 32768");
    auto out = at::empty_like(x);
    const long rows = x.numel() / C;
    if (rows == 0) return out;
    layernorm_kernel<<<(unsigned)rows, norm_threads(C / 4), 0, c10::cuda::getCurrentCUDAStream()>>>(
        x.data_ptr<float>(), weight.data_ptr<float>(), bias.data_ptr<float>(), out.data_ptr<float>(), C, (float)eps);
    C10_CUDA_KERNEL_LAUNCH_CHECK();
    return out;
}
"""

CPP_SRC = r"""
torch::Tensor linear_3xtf32(torch::Tensor x, torch::Tensor weight, torch::Tensor bias, torch::Tensor residual, int64_t act);
at::Tensor causal_attention_fwd(at::Tensor qkv, int64_t n_heads);
at::Tensor layernorm_fwd(at::Tensor x, at::Tensor weight, at::Tensor bias, double eps);
"""

_ext = load_inline(
    name="kb_l3_3_transformer_block",
    cpp_sources=CPP_SRC,
    cuda_sources=CUDA_SRC,
    functions=['linear_3xtf32', 'causal_attention_fwd', 'layernorm_fwd'],
    extra_cuda_cflags=["-O3"],
    verbose=False,
)


class _CausalSelfAttention(nn.Module):
    def __init__(self, d_model, n_heads):
        super().__init__()
        self.n_heads = n_heads
        self.qkv = nn.Linear(d_model, 3 * d_model)
        self.proj = nn.Linear(d_model, d_model)


class ModelNew(nn.Module):
    def __init__(self, d_model, n_heads, max_seq_len):
        super().__init__()
        self.ln1 = nn.LayerNorm(d_model)
        self.attn = _CausalSelfAttention(d_model, n_heads)
        self.ln2 = nn.LayerNorm(d_model)
        self.fc1 = nn.Linear(d_model, 4 * d_model)
        self.act = nn.GELU()
        self.fc2 = nn.Linear(4 * d_model, d_model)
        self.max_seq_len = max_seq_len

    def forward(self, x):
        x = x.contiguous()
        if x.shape[1] > self.max_seq_len:
            raise ValueError("sequence longer than max_seq_len")
        none = x.new_empty(0)
        a = self.attn
        h = _ext.layernorm_fwd(x, self.ln1.weight, self.ln1.bias, self.ln1.eps)
        qkv = _ext.linear_3xtf32(h, a.qkv.weight, a.qkv.bias, none, 0)
        y = _ext.causal_attention_fwd(qkv, a.n_heads)
        x1 = _ext.linear_3xtf32(y, a.proj.weight, a.proj.bias, x, 0)          # x + proj(y)
        h2 = _ext.layernorm_fwd(x1, self.ln2.weight, self.ln2.bias, self.ln2.eps)
        f = _ext.linear_3xtf32(h2, self.fc1.weight, self.fc1.bias, none, 2)    # GELU(fc1)
        return _ext.linear_3xtf32(f, self.fc2.weight, self.fc2.bias, x1, 0)    # x1 + fc2(f)
