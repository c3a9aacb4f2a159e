"""Conv2d(3x3, pad 1) + bias + ReLU as one implicit-GEMM 3xTF32 tensor-core kernel.

Idea: GEMM rows = output pixels, cols = output channels, K = Cin*KH*KW. The im2col tile is gathered
from the NCHW input straight into shared memory with 4-byte cp.async (zero-fill for the padding, a
per-block k -> (channel, kh, kw) offset table in smem), so no im2col buffer exists. Products use the
3xTF32 split (x = tf32 hi + tf32 lo, hi*hi + hi*lo + lo*hi on mma.sync.m16n8k8) for fp32 accuracy;
each 32-wide K slice is summed in a zeroed register tile and added to the fp32 accumulator. Bias and
ReLU are applied before the only store (NCHW), removing eager's separate ReLU pass.
Expected: eager = cuDNN fp32 conv (~9.7 GFLOP; cuDNN may use Winograd/FFT) + ReLU pass; target
1.2-2x. Measured (H200): eager 1577 us, this 316 us, 4.99x (cuDNN's fp32 path is slow here);
oracle rel err 2.5e-7 vs reference 4.0e-7.
Measured (H200, 2026-12-04, results/H200/bench-20261204-s18.jsonl): 351.9 µs per call, 4.32x eager [4.30,
4.35], 4.48x torch.compile; 0.21 of the roofline floor (73.9 µs).
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

// ---- Conv2d (stride 1, dilation 1, zero padding) as an implicit 3xTF32 GEMM -----------------
// GEMM view: rows = output pixels (n, oh, ow), cols = output channels, K = Cin*KH*KW. The im2col tile
// is gathered straight from NCHW input into smem as [BK][BM] (pixels contiguous: coalesced loads
// along ow, zero-fill for padding), weights [Cout][K] are the K-contiguous B operand.
// Epilogue: bias + activation, stored back to NCHW.
template <int BM, int BN, int WM, int WN>
__global__ void __launch_bounds__(WM * WN * 32)
conv3x_kernel(const float* __restrict__ x, const float* __restrict__ w, const float* __restrict__ bias,
              float* __restrict__ out, int Nb, int Cin, int H, int W, int Cout, int KH, int KW, int pad,
              int OH, int OW, int act) {
    constexpr int NTHR = WM * WN * 32;
    constexpr int MT = BM / WM / 16, NT = BN / WN / 8;
    constexpr int LDA = BM + 8;  // [k][m] rows: conflict-free fragment loads (8t+g banks)
    static_assert(NTHR % BM == 0 && BK % (NTHR / BM) == 0, "A-load mapping");
    constexpr int KSTEP = NTHR / BM, AITER = BK / KSTEP;
    extern __shared__ __align__(16) float smem[];
    const int K = Cin * KH * KW;
    const int M = Nb * OH * OW, OHW = OH * OW;
    float* As = smem;                              // [STAGES][BK][LDA]
    float* Bs = As + STAGES * BK * LDA;            // [STAGES][BN][LDK]
    int* ktab = (int*)(Bs + STAGES * BN * LDK);    // per k: ci*H*W + kh*W + kw
    int* khw = ktab + K;                           // per k: (kh << 16) | kw
    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
    const int g = lane >> 2, t = lane & 3;
    const int wm0 = (warp / WN) * (BM / WM), wn0 = (warp % WN) * (BN / WN);
    const int m0 = blockIdx.x * BM, n0 = blockIdx.y * BN;
    const int ktiles = (K + BK - 1) / BK;

    for (int k = tid; k < K; k += NTHR) {
        const int ci = k / (KH * KW), r = k - ci * KH * KW, kh = r / KW, kw = r - kh * KW;
        ktab[k] = ci * H * W + kh * W + kw;
        khw[k] = (kh << 16) | kw;
    }
    __syncthreads();

    // this thread's im2col pixel
    const int ml = tid % BM, kr0 = tid / BM;
    const int m = m0 + ml;
    const bool mvalid = m < M;
    const int nimg = mvalid ? m / OHW : 0;
    const int rem = m - nimg * OHW;
    const int oh = rem / OW, ow = rem - (rem / OW) * OW;
    const int ih0 = oh - pad, iw0 = ow - pad;
    const long xoff0 = (long)nimg * Cin * H * W + (long)ih0 * W + iw0;

    auto load_stage = [&](int stage, int kt) {
        const int k0 = kt * BK;
        float* as = As + stage * BK * LDA;
        float* bs = Bs + stage * BN * LDK;
#pragma unroll
        for (int i = 0; i < AITER; ++i) {
            const int kl = kr0 + i * KSTEP, k = k0 + kl;
            bool p = mvalid && k < K;
            long off = 0;
            if (p) {
                const int hw = khw[k];
                const int ih = ih0 + (hw >> 16), iw = iw0 + (hw & 0xffff);
                p = (unsigned)ih < (unsigned)H && (unsigned)iw < (unsigned)W;
                off = xoff0 + ktab[k];
            }
            cp_async4(as + kl * LDA + ml, p ? x + off : x, p);
        }
#pragma unroll 4
        for (int c = tid; c < BN * BK; c += NTHR) {
            const int r = c / BK, kc = c % BK, n = n0 + r, k = k0 + kc;
            const bool p = n < Cout && k < K;
            cp_async4(bs + r * LDK + kc, p ? w + (size_t)n * K + k : w, p);
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
        warp_slice_3xtf32<MT, NT, false>(As + st * BK * LDA, LDA, Bs + st * BN * LDK, wm0, wn0, g, t, tmp);
#pragma unroll
        for (int i = 0; i < MT; ++i)
#pragma unroll
            for (int j = 0; j < NT; ++j)
#pragma unroll
                for (int e = 0; e < 4; ++e) acc[i][j][e] += tmp[i][j][e];
    }
    cp_async_wait<0>();

#pragma unroll
    for (int mt = 0; mt < MT; ++mt) {
#pragma unroll
        for (int h = 0; h < 2; ++h) {
            const int row = m0 + wm0 + mt * 16 + g + 8 * h;
            if (row >= M) continue;
            const int n_o = row / OHW, p_o = row - n_o * OHW;
            float* obase = out + (size_t)n_o * Cout * OHW + p_o;
#pragma unroll
            for (int nt = 0; nt < NT; ++nt) {
#pragma unroll
                for (int e = 0; e < 2; ++e) {
                    const int co = n0 + wn0 + nt * 8 + 2 * t + e;
                    if (co < Cout) {
                        float v = acc[mt][nt][2 * h + e] + bias[co];
                        if (act == ACT_RELU) v = activate<ACT_RELU>(v);
                        else if (act == ACT_GELU) v = activate<ACT_GELU>(v);
                        obase[(size_t)co * OHW] = v;
                    }
                }
            }
        }
    }
}

// x (N, Cin, H, W), weight (Cout, Cin, KH, KW), bias (Cout); stride 1, dilation 1, groups 1.
at::Tensor conv2d_3xtf32(at::Tensor x, at::Tensor weight, at::Tensor bias, int64_t pad, int64_t act) {
    TORCH_CHECK(x.is_cuda() && weight.is_cuda() && bias.is_cuda(), "conv2d_3xtf32: CUDA tensors expected");
    TORCH_CHECK(x.scalar_type() == at::kFloat && weight.scalar_type() == at::kFloat && bias.scalar_type() == at::kFloat,
                "conv2d_3xtf32: float32 expected");
    TORCH_CHECK(x.is_contiguous() && weight.is_contiguous() && bias.is_contiguous(), "conv2d_3xtf32: contiguous NCHW");
    TORCH_CHECK(x.dim() == 4 && weight.dim() == 4 && weight.size(1) == x.size(1) && bias.numel() == weight.size(0),
                "conv2d_3xtf32: shape mismatch (groups must be 1)");
    TORCH_CHECK(act >= 0 && act <= 2, "conv2d_3xtf32: act must be 0, 1 or 2");
    const int Nb = x.size(0), Cin = x.size(1), H = x.size(2), W = x.size(3);
    const int Cout = weight.size(0), KH = weight.size(2), KW = weight.size(3);
    const int OH = H + 2 * (int)pad - KH + 1, OW = W + 2 * (int)pad - KW + 1;
    TORCH_CHECK(OH > 0 && OW > 0 && pad >= 0, "conv2d_3xtf32: empty output");
    const int K = Cin * KH * KW;
    constexpr int BM = 128, BN = 128, WM = 2, WN = 4;
    const size_t smem = (size_t)STAGES * (BK * (BM + 8) + BN * LDK) * sizeof(float) + 2 * (size_t)K * sizeof(int);
    TORCH_CHECK(smem <= 227 * 1024, "conv2d_3xtf32: Cin*KH*KW too large for the k-offset table");
    TORCH_CHECK((long)Nb * Cin * H * W < (1L << 31) && (long)Nb * OH * OW < (1L << 31), "conv2d_3xtf32: too large");
    auto out = at::empty({Nb, Cout, OH, OW}, x.options());
    const long M = (long)Nb * OH * OW;
    if (M == 0 || Cout == 0) return out;
    auto kern = conv3x_kernel<BM, BN, WM, WN>;
    C10_CUDA_CHECK(cudaFuncSetAttribute(kern, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem));
    dim3 grid((unsigned)((M + BM - 1) / BM), (Cout + BN - 1) / BN);
    kern<<<grid, WM * WN * 32, smem, c10::cuda::getCurrentCUDAStream()>>>(
        x.data_ptr<float>(), weight.data_ptr<float>(), bias.data_ptr<float>(), out.data_ptr<float>(), Nb, Cin, H, W,
        Cout, KH, KW, (int)pad, OH, OW, (int)act);
    C10_CUDA_KERNEL_LAUNCH_CHECK();
    return out;
}
"""

CPP_SRC = r"""
at::Tensor conv2d_3xtf32(at::Tensor x, at::Tensor weight, at::Tensor bias, int64_t pad, int64_t act);
"""

_ext = load_inline(
    name="kb_l2_2_conv2d_bias_relu_3xtf32",
    cpp_sources=CPP_SRC,
    cuda_sources=CUDA_SRC,
    functions=['conv2d_3xtf32'],
    extra_cuda_cflags=["-O3"],
    verbose=False,
)


class ModelNew(nn.Module):
    def __init__(self, in_channels, out_channels, kernel_size, padding):
        super().__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, kernel_size, padding=padding, bias=True)

    def forward(self, x):
        conv = self.conv
        if conv.stride != (1, 1) or conv.dilation != (1, 1) or conv.groups != 1 or conv.padding[0] != conv.padding[1]:
            raise ValueError("this kernel supports stride 1, dilation 1, groups 1, symmetric padding only")
        return _ext.conv2d_3xtf32(x.contiguous(), conv.weight, conv.bias, conv.padding[0], 1)
