"""Conv2d (groups=1, any stride/padding/dilation/kernel, optional bias) as an implicit-GEMM 3xTF32
tensor-core kernel, adapted from kernels/level2/2_Conv2d_Bias_ReLU/implicit_gemm_3xtf32.py.

Idea: GEMM rows = output pixels (n, oh, ow), cols = output channels, K = Cin*KH*KW; 128x128x32 block
tiles, 8 warps (64x32 warp tiles), 3-stage cp.async pipeline, the im2col tile gathered straight from
the NCHW input into smem as [BK][BM] (4-byte cp.async, zero-fill for padding/out-of-range), no im2col
buffer. Products use the 3xTF32 split (x = tf32 hi + tf32 lo; hi*hi + hi*lo + lo*hi on
mma.sync.m16n8k8) and each 32-wide K slice is summed in a zeroed register tile before being added to
the fp32 accumulator (same numerics as level2/2). Bias (if any) is added before the only NCHW store.
Change vs level2/2 (cheap speed-up): when Cin % 32 == 0 (here 64) the K axis is reordered as
k = (kh*KW + kw)*Cin + ci ("channel-inner"). Every 32-wide K slice then has one (kh, kw): a thread's
16 gathered elements share one bounds test and differ only by a constant channel stride, replacing
level2/2's per-element table lookup (2 LDS) + bounds test + 64-bit address math (~12 instr/elem ->
~2). The matching weight order [Cout][KH*KW][Cin] is produced every call by a tiny permute kernel
(74K floats, ~2-3 us), which also makes the B tile loadable with 16-byte cp.async (4x fewer
load instructions than level2/2's 4-byte B loads). Other Cin use the level2/2 path (per-block smem
k -> offset table, or a global table when K is too large for smem), generalised to stride/dilation.
Expected: level2/2 ran 9.7 GFLOP in 316 us (~31 TFLOP/s); the same kernel on this 7.4 GFLOP problem
(392 blocks = 2.97 waves of 1 block/SM on 132 SMs vs 512 = 3.9 waves there) would take ~240-245 us,
and the cheaper gather trims issue slots by ~15-20% of a latency/issue-bound loop -> ~205-225 us
vs eager 260 us, i.e. ~1.15-1.25x (range 1.0-1.3x).
Measured (H200, kbench bench --all, results/H200/bench-20261130-072328.jsonl): 157.5 us vs eager 261.4 us,
1.65x [1.64, 1.66] (2.67x vs torch.compile), 47 TFLOP/s; better than predicted. fp64-oracle error 2.5e-7
(reference 2.3e-7).
Measured (H200, 2026-12-04, results/H200/bench-20261204-s18.jsonl): 193.4 µs per call, 1.36x eager [1.36,
1.36], 1.69x torch.compile; 0.29 of the roofline floor (56.5 µs).
"""
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

CUDA_SRC = r"""
#include <ATen/core/Tensor.h>
#include <ATen/ops/empty.h>
#include <c10/cuda/CUDAException.h>
#include <c10/cuda/CUDAStream.h>
#include <cuda_runtime.h>
#include <stdint.h>

// ---- 3xTF32 building blocks (as in level2/2) ---------------------------------------------
// x = hi + lo with hi = tf32(x) (round to nearest) and lo = tf32(x - hi); a*b is then
// hi*hi + hi*lo + lo*hi, dropping only lo*lo (~2^-22 relative), i.e. fp32-level accuracy.
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

constexpr int BK = 32;          // K slice per pipeline stage
constexpr int LDK = BK + 4;     // padded smem row (floats): conflict-free fragment loads
constexpr int STAGES = 3;       // cp.async pipeline depth
constexpr int BM = 128, BN = 128, WM = 2, WN = 4;
constexpr int NTHR = WM * WN * 32;
constexpr int LDA = BM + 8;     // [k][m] rows: conflict-free fragment loads (8t+g banks)
constexpr int TILE_FLOATS = STAGES * (BK * LDA + BN * LDK);

// Warp-level 3xTF32 product of one BK slice. As: [BK][LDA] (M-contiguous); Bs: [cols][LDK].
// tmp accumulates the slice (zeroed by the caller).
template <int MT, int NT>
__device__ __forceinline__ void warp_slice_3xtf32(const float* As, const float* Bs, int wm0, int wn0, int g, int t,
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
            const int r = wm0 + mt * 16 + g;
            const float* ap = As + (kk + t) * LDA + r;
            const float a[4] = {ap[0], ap[8], ap[4 * LDA], ap[4 * LDA + 8]};
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

struct ConvShape {
    int Nb, Cin, H, W, Cout, KH, KW, OH, OW, sh, sw, ph, pw, dh, dw;
};

// K-offset table entry for the general path: x offset of k = (ci, kh, kw) relative to the pixel's
// (ih0, iw0) corner, and the packed (kh*dh, kw*dw) input displacement for the bounds test.
__device__ __forceinline__ int2 make_ktab(int k, const ConvShape& s) {
    const int KHW = s.KH * s.KW;
    const int ci = k / KHW, r = k - ci * KHW, kh = r / s.KW, kw = r - kh * s.KW;
    const int dy = kh * s.dh, dx = kw * s.dw;
    return make_int2(ci * s.H * s.W + dy * s.W + dx, (dy << 16) | dx);
}

__global__ void build_ktab_kernel(int2* __restrict__ tab, int K, ConvShape s) {
    const int k = blockIdx.x * blockDim.x + threadIdx.x;
    if (k < K) tab[k] = make_ktab(k, s);
}

// w [Cout][Cin][KH*KW] -> wp [Cout][KH*KW][Cin] (channel-inner K order for the fast path).
__global__ void permute_weight_kernel(const float* __restrict__ w, float* __restrict__ wp, int Cout, int Cin,
                                      int KHW) {
    const long total = (long)Cout * Cin * KHW;
    for (long i = blockIdx.x * (long)blockDim.x + threadIdx.x; i < total; i += (long)gridDim.x * blockDim.x) {
        const long n = i / ((long)Cin * KHW);
        const int rem = (int)(i - n * Cin * KHW);
        const int r = rem / Cin, ci = rem - r * Cin;
        wp[i] = w[(n * Cin + ci) * KHW + r];
    }
}

// CHAN_INNER: K ordered (kh, kw, ci), Cin % BK == 0, B = permuted weight (K % 4 == 0, 16B aligned).
// Otherwise: K ordered (ci, kh, kw) as in PyTorch, offsets from tab (smem copy if TAB_SMEM).
template <bool CHAN_INNER, bool TAB_SMEM>
__global__ void __launch_bounds__(NTHR)
conv3x_kernel(const float* __restrict__ x, const float* __restrict__ w, const float* __restrict__ bias,
              const int2* __restrict__ gtab, float* __restrict__ out, ConvShape s) {
    constexpr int MT = BM / WM / 16, NT = BN / WN / 8;
    static_assert(NTHR % BM == 0 && BK % (NTHR / BM) == 0, "A-load mapping");
    static_assert((BN * BK / 4) % NTHR == 0, "B-load mapping");
    constexpr int KSTEP = NTHR / BM, AITER = BK / KSTEP;
    extern __shared__ __align__(16) float smem[];
    const int KHW = s.KH * s.KW;
    const int K = s.Cin * KHW;
    const int OHW = s.OH * s.OW;
    const int M = s.Nb * OHW;
    const int HW = s.H * s.W;
    float* As = smem;                              // [STAGES][BK][LDA]
    float* Bs = As + STAGES * BK * LDA;            // [STAGES][BN][LDK]
    int2* stab = (int2*)(Bs + STAGES * BN * LDK);  // general path, TAB_SMEM: per-k offsets
    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
    const int g = lane >> 2, t = lane & 3;
    const int wm0 = (warp / WN) * (BM / WM), wn0 = (warp % WN) * (BN / WN);
    const int m0 = blockIdx.x * BM, n0 = blockIdx.y * BN;
    const int ktiles = (K + BK - 1) / BK;

    const int2* tab = gtab;
    if (!CHAN_INNER && TAB_SMEM) {
        for (int k = tid; k < K; k += NTHR) stab[k] = make_ktab(k, s);
        __syncthreads();
        tab = stab;
    }

    // this thread's im2col pixel
    const int ml = tid % BM, kr0 = tid / BM;
    const int m = m0 + ml;
    const bool mvalid = m < M;
    const int nimg = mvalid ? m / OHW : 0;
    const int rem = m - nimg * OHW;
    const int oh = rem / s.OW, ow = rem - (rem / s.OW) * s.OW;
    const int ih0 = oh * s.sh - s.ph, iw0 = ow * s.sw - s.pw;
    const long xoff0 = (long)nimg * s.Cin * HW + (long)ih0 * s.W + iw0;

    // CHAN_INNER state of the next slice to load (slices are loaded strictly in order)
    int ci0 = 0, kh_n = 0, kw_n = 0;

    auto load_stage = [&](int stage, int kt) {
        const int k0 = kt * BK;
        float* as = As + stage * BK * LDA;
        float* bs = Bs + stage * BN * LDK;
        if (CHAN_INNER) {
            const int ih = ih0 + kh_n * s.dh, iw = iw0 + kw_n * s.dw;
            const bool p = mvalid && (unsigned)ih < (unsigned)s.H && (unsigned)iw < (unsigned)s.W;
            const float* src = p ? x + (xoff0 + (long)(kh_n * s.dh) * s.W + kw_n * s.dw + (long)(ci0 + kr0) * HW) : x;
            const long step = p ? (long)KSTEP * HW : 0;
#pragma unroll
            for (int i = 0; i < AITER; ++i) cp_async4(as + (kr0 + i * KSTEP) * LDA + ml, src + i * step, p);
            ci0 += BK;
            if (ci0 == s.Cin) {
                ci0 = 0;
                if (++kw_n == s.KW) { kw_n = 0; ++kh_n; }
            }
            // B: permuted weight rows are K-contiguous, K % 4 == 0 and k0 + 32 <= K -> 16B chunks
#pragma unroll
            for (int j = 0; j < BN * BK / 4 / NTHR; ++j) {
                const int c = tid + j * NTHR, r = c / (BK / 4), kc = (c % (BK / 4)) * 4, n = n0 + r;
                const bool pb = n < s.Cout;
                cp_async16(bs + r * LDK + kc, pb ? w + (size_t)n * K + k0 + kc : w, pb);
            }
        } else {
#pragma unroll
            for (int i = 0; i < AITER; ++i) {
                const int kl = kr0 + i * KSTEP, k = k0 + kl;
                bool p = mvalid && k < K;
                long off = 0;
                if (p) {
                    const int2 e = tab[k];
                    const int ih = ih0 + (e.y >> 16), iw = iw0 + (e.y & 0xffff);
                    p = (unsigned)ih < (unsigned)s.H && (unsigned)iw < (unsigned)s.W;
                    off = xoff0 + e.x;
                }
                cp_async4(as + kl * LDA + ml, p ? x + off : x, p);
            }
#pragma unroll 4
            for (int c = tid; c < BN * BK; c += NTHR) {
                const int r = c / BK, kc = c % BK, n = n0 + r, k = k0 + kc;
                const bool p = n < s.Cout && k < K;
                cp_async4(bs + r * LDK + kc, p ? w + (size_t)n * K + k : w, p);
            }
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
    for (int st = 0; st < STAGES - 1; ++st) {
        if (st < ktiles) load_stage(st, st);
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
        warp_slice_3xtf32<MT, NT>(As + st * BK * LDA, Bs + st * BN * LDK, wm0, wn0, g, t, tmp);
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
            float* obase = out + (size_t)n_o * s.Cout * OHW + p_o;
#pragma unroll
            for (int nt = 0; nt < NT; ++nt) {
#pragma unroll
                for (int e = 0; e < 2; ++e) {
                    const int co = n0 + wn0 + nt * 8 + 2 * t + e;
                    if (co < s.Cout) {
                        float v = acc[mt][nt][2 * h + e];
                        if (bias != nullptr) v += __ldg(bias + co);
                        obase[(size_t)co * OHW] = v;
                    }
                }
            }
        }
    }
}

// x (N, Cin, H, W), weight (Cout, Cin, KH, KW), optional bias (Cout); groups 1, zero padding.
at::Tensor conv2d_3xtf32(at::Tensor x, at::Tensor weight, c10::optional<at::Tensor> bias_opt, int64_t sh,
                         int64_t sw, int64_t ph, int64_t pw, int64_t dh, int64_t dw) {
    TORCH_CHECK(x.is_cuda() && weight.is_cuda(), "conv2d_3xtf32: CUDA tensors expected");
    TORCH_CHECK(x.scalar_type() == at::kFloat && weight.scalar_type() == at::kFloat,
                "conv2d_3xtf32: float32 tensors expected");
    TORCH_CHECK(x.device() == weight.device(), "conv2d_3xtf32: x and weight on different devices");
    TORCH_CHECK(x.dim() == 4 && weight.dim() == 4 && weight.size(1) == x.size(1),
                "conv2d_3xtf32: expected NCHW input and (Cout, Cin, KH, KW) weight (groups must be 1)");
    TORCH_CHECK(sh > 0 && sw > 0 && dh > 0 && dw > 0 && ph >= 0 && pw >= 0,
                "conv2d_3xtf32: bad stride/padding/dilation");
    x = x.contiguous();
    weight = weight.contiguous();
    const float* bp = nullptr;
    at::Tensor bias;
    if (bias_opt.has_value() && bias_opt->defined()) {
        bias = bias_opt->contiguous();
        TORCH_CHECK(bias.is_cuda() && bias.device() == x.device() && bias.scalar_type() == at::kFloat &&
                        bias.numel() == weight.size(0),
                    "conv2d_3xtf32: bias must be a float32 CUDA tensor with Cout elements");
        bp = bias.data_ptr<float>();
    }
    ConvShape s;
    s.Nb = (int)x.size(0); s.Cin = (int)x.size(1); s.H = (int)x.size(2); s.W = (int)x.size(3);
    s.Cout = (int)weight.size(0); s.KH = (int)weight.size(2); s.KW = (int)weight.size(3);
    s.sh = (int)sh; s.sw = (int)sw; s.ph = (int)ph; s.pw = (int)pw; s.dh = (int)dh; s.dw = (int)dw;
    const int64_t OH = (x.size(2) + 2 * ph - dh * (weight.size(2) - 1) - 1) / sh + 1;
    const int64_t OW = (x.size(3) + 2 * pw - dw * (weight.size(3) - 1) - 1) / sw + 1;
    TORCH_CHECK(OH > 0 && OW > 0, "conv2d_3xtf32: empty output (kernel larger than padded input)");
    s.OH = (int)OH; s.OW = (int)OW;
    auto out = at::empty({x.size(0), weight.size(0), OH, OW}, x.options());
    if (out.numel() == 0) return out;
    TORCH_CHECK(x.size(1) > 0 && weight.size(2) > 0 && weight.size(3) > 0, "conv2d_3xtf32: empty kernel");
    TORCH_CHECK(x.numel() < (1LL << 40) && (int64_t)x.size(1) * x.size(2) * x.size(3) < (1LL << 31) &&
                    x.size(0) * OH * OW < (1LL << 31) && (int64_t)x.size(1) * weight.size(2) * weight.size(3) < (1LL << 31) &&
                    (weight.size(2) - 1) * dh < 32768 && (weight.size(3) - 1) * dw < 32768,
                "conv2d_3xtf32: problem too large for 32-bit indexing");
    const int K = s.Cin * s.KH * s.KW;
    const int64_t M = (int64_t)s.Nb * s.OH * s.OW;
    const int64_t gx = (M + BM - 1) / BM, gy = (s.Cout + BN - 1) / BN;
    TORCH_CHECK(gx < (1LL << 31) && gy < 65536, "conv2d_3xtf32: grid too large");
    dim3 grid((unsigned)gx, (unsigned)gy);
    auto stream = c10::cuda::getCurrentCUDAStream();
    const size_t tile_smem = (size_t)TILE_FLOATS * sizeof(float);
    const float* xp = x.data_ptr<float>();
    float* op = out.data_ptr<float>();

    if (s.Cin % BK == 0) {
        // channel-inner K order: permute the weight once per call (no caching) into [Cout][KH*KW][Cin]
        auto wp = at::empty_like(weight);
        const long total = weight.numel();
        const int pblocks = (int)std::min<long>((total + 255) / 256, 4096);
        permute_weight_kernel<<<pblocks, 256, 0, stream>>>(weight.data_ptr<float>(), wp.data_ptr<float>(), s.Cout,
                                                           s.Cin, s.KH * s.KW);
        C10_CUDA_KERNEL_LAUNCH_CHECK();
        auto kern = conv3x_kernel<true, false>;
        C10_CUDA_CHECK(cudaFuncSetAttribute(kern, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)tile_smem));
        kern<<<grid, NTHR, tile_smem, stream>>>(xp, wp.data_ptr<float>(), bp, nullptr, op, s);
        C10_CUDA_KERNEL_LAUNCH_CHECK();
        return out;
    }
    const size_t smem_tab = tile_smem + (size_t)K * sizeof(int2);
    if (smem_tab <= 200 * 1024) {
        auto kern = conv3x_kernel<false, true>;
        C10_CUDA_CHECK(cudaFuncSetAttribute(kern, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem_tab));
        kern<<<grid, NTHR, smem_tab, stream>>>(xp, weight.data_ptr<float>(), bp, nullptr, op, s);
        C10_CUDA_KERNEL_LAUNCH_CHECK();
        return out;
    }
    // very large Cin*KH*KW: k-offset table in global memory (built every call)
    auto tab = at::empty({(int64_t)K * 2}, x.options().dtype(at::kInt));
    int2* tp = reinterpret_cast<int2*>(tab.data_ptr<int>());
    build_ktab_kernel<<<(K + 255) / 256, 256, 0, stream>>>(tp, K, s);
    C10_CUDA_KERNEL_LAUNCH_CHECK();
    auto kern = conv3x_kernel<false, false>;
    C10_CUDA_CHECK(cudaFuncSetAttribute(kern, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)tile_smem));
    kern<<<grid, NTHR, tile_smem, stream>>>(xp, weight.data_ptr<float>(), bp, tp, op, s);
    C10_CUDA_KERNEL_LAUNCH_CHECK();
    return out;
}
"""

CPP_SRC = r"""
at::Tensor conv2d_3xtf32(at::Tensor x, at::Tensor weight, c10::optional<at::Tensor> bias_opt, int64_t sh,
                         int64_t sw, int64_t ph, int64_t pw, int64_t dh, int64_t dw);
"""

_ext = load_inline(
    name="kb_l1_9_conv2d_3xtf32",
    cpp_sources=CPP_SRC,
    cuda_sources=CUDA_SRC,
    functions=["conv2d_3xtf32"],
    extra_cuda_cflags=["-O3"],
    verbose=False,
)


class ModelNew(nn.Module):
    def __init__(self, in_channels, out_channels, kernel_size, stride=1, padding=0, bias=False):
        super().__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, kernel_size, stride=stride, padding=padding,
                              bias=bias)

    def forward(self, x):
        c = self.conv
        if c.groups != 1 or isinstance(c.padding, str) or c.padding_mode != "zeros":
            raise ValueError("only groups=1, numeric zero padding is supported")
        if not (x.is_cuda and x.dtype == torch.float32):
            raise TypeError("implicit_gemm_3xtf32: expected a float32 CUDA input, got %s on %s" % (x.dtype, x.device))
        return _ext.conv2d_3xtf32(x.contiguous(), c.weight, c.bias, c.stride[0], c.stride[1], c.padding[0],
                                  c.padding[1], c.dilation[0], c.dilation[1])
