"""relu(x @ W^T + b) as one 3xTF32 tensor-core GEMM (K-permuted smem tiles, LDS.128 fragments), bias+ReLU fused.

Idea: the core of kernels/level1/1_Matmul_FP32/tf32x3_fragperm.py with W[N,K] K-contiguous: mma.sync
m16n8k8 TF32, x = hi + lo (hi = tf32_rn(x), lo = tf32_rn(x - hi)), hi*hi + hi*lo + lo*hi all kept;
128x128x32 block tiles, 8 warps of 64x32, 4-stage cp.async (128 KB smem, 1 block/SM); every 16-wide
K group of both tiles stored in the same permuted K order so each lane loads its A rows and its W row
with one 16-byte LDS per two k-steps (XOR-swizzled, conflict-free, no padding); per-32-K-slice
register sums (first mma with zero C) added to the fp32 accumulator; grouped rasterization.
Bias + ReLU applied in registers before the single (float2) store. Any shape: zero-filled cp.async at
the edges, 4-byte cp.async path when K % 4 != 0, bounds-checked stores.
Expected: 4096x2048 @ 2048x4096 (68.7 GFLOP): ~85-95 TFLOP/s effective -> ~0.75-0.8 ms vs eager 1.40 ms
and the old gemm3xtf32_relu 1.32 ms (~1.75x eager). Set LO_ROUND = false for the cheaper split (see
tf32x3_fragperm_fastsplit.py) if its accuracy passes on L1.
Measured (H200, kbench bench --all, results/H200/bench-20261130-072328.jsonl): 1.124 ms vs eager 1.402 ms,
1.25x [1.25, 1.25] (old core 1.09x); short of the 0.75-0.8 ms predicted. fp64-oracle error 2.8e-7
(reference 8.1e-7).
Measured (H200, 2026-12-04, results/H200/bench-20261204-s18.jsonl): 1.46 ms per call, 0.97x eager [0.97,
0.98], 0.99x torch.compile; 0.36 of the roofline floor (525.2 µs).
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

namespace {

constexpr int STAGES = 4;  // cp.async pipeline depth
constexpr bool LO_ROUND = true;  // round lo to tf32 (false: let the tensor core truncate it)

// ---- tiling ---------------------------------------------------------------------------------
constexpr int BM = 128, BN = 128, BK = 32;   // block tile, K slice per pipeline stage
constexpr int WM = 2, WN = 4;                // warps along M / N -> 64 x 32 warp tiles
constexpr int NTHR = WM * WN * 32;
constexpr int WTM = BM / WM, WTN = BN / WN;
constexpr int MT = WTM / 16, NT = WTN / 8;   // m16n8k8 tiles per warp: 4 x 4
constexpr int A_STAGE = BM * BK, B_STAGE = BN * BK;  // floats (no padding: XOR swizzle)
constexpr int SMEM_BYTES = STAGES * (A_STAGE + B_STAGE) * (int)sizeof(float);
constexpr int GROUP_M = 8;                   // block rasterization: 8 M-tiles share each B panel in L2
static_assert(BK % 16 == 0 && MT >= 1 && NT >= 1, "tiling");

// ---- 3xTF32 split ---------------------------------------------------------------------------
// hi = tf32(x) rounded to nearest (integer add on the 13 dropped bits, then mask; inputs finite),
// lo = x - hi (exact in fp32). LO_ROUND also rounds lo to tf32; otherwise the tensor core ignores
// lo's 13 low bits (truncation of a value already < 2^-11 |x|).
__device__ __forceinline__ uint32_t tf32_rn(float x) {
    // NaN stays NaN: the GPU's canonical NaN (0x7fffffff) would carry into the sign bit and round to -0
    const uint32_t u = __float_as_uint(x);
    return ((u & 0x7fffffffu) > 0x7f800000u ? (u | 0x00400000u) : u + 0x1000u) & 0xffffe000u;
}
__device__ __forceinline__ void split_tf32(float x, uint32_t& hi, uint32_t& lo) {
    hi = tf32_rn(x);
    const float r = x - __uint_as_float(hi);
    lo = LO_ROUND ? tf32_rn(r) : __float_as_uint(r);
}
// D = A(16x8 row) * B(8x8 col) + D
__device__ __forceinline__ void mma_acc(float (&d)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
    asm("mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
        "{%0,%1,%2,%3};\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}
// D = A * B + 0 (starts a K-slice sum without zeroing registers first)
__device__ __forceinline__ void mma_zero(float (&d)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
    asm("mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
        "{%10,%11,%12,%13};\n"
        : "=f"(d[0]), "=f"(d[1]), "=f"(d[2]), "=f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1),
          "f"(0.0f), "f"(0.0f), "f"(0.0f), "f"(0.0f));
}
__device__ __forceinline__ void cp_async16(void* smem, const void* gmem, bool pred) {
    const unsigned s = (unsigned)__cvta_generic_to_shared(smem);
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(s), "l"(gmem), "r"(pred ? 16 : 0));
}
__device__ __forceinline__ void cp_async4(void* smem, const void* gmem, bool pred) {
    const unsigned s = (unsigned)__cvta_generic_to_shared(smem);
    asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;\n" ::"r"(s), "l"(gmem), "r"(pred ? 4 : 0));
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::); }
template <int N>
__device__ __forceinline__ void cp_async_wait() { asm volatile("cp.async.wait_group %0;\n" ::"n"(N)); }

enum { EPI_NONE = 0, EPI_BIAS = 1, EPI_BIAS_RELU = 2, EPI_BIAS_GELU = 3 };
template <int EPI>
__device__ __forceinline__ float epilogue_op(float v, float b) {
    if (EPI == EPI_NONE) return v;
    v += b;
    if (EPI == EPI_BIAS_RELU) return v < 0.0f ? 0.0f : v;   // not fmaxf: NaN stays NaN, as in torch.relu
    if (EPI == EPI_BIAS_GELU) return 0.5f * v * (1.0f + erff(v * 0.70710678118654752f));
    return v;
}

// ---- shared-memory layout ---------------------------------------------------------------------
// K-contiguous tiles (A always; B = W[N,K] when B_KCONTIG): [rows][BK] floats, 16-byte chunk c of
// row r stored at chunk c ^ ((r & 1) << 2).
// Within every 16-wide K group the physical order is a permutation of the logical one: physical
// 4t+2q+h holds logical k-step q (of the group's two m16n8k8 steps), column t+4h. So a lane
// (g = lane/4, t = lane%4) gets, with ONE 16-byte load per row, {a0|a2 of step 0, a0|a2 of step 1}
// (row g) or {b0, b1, b0', b1'} (W row n); A and B use the same permutation, so the sum over K is
// unchanged (zero-filled out-of-range K positions are zero in both operands).
// The lane loads of a quarter warp touch rows 2i and 2i+1 at chunk (4*grp + t), which the swizzle
// sends to disjoint bank quads: conflict-free, and the cp.async writes (8 chunks of one row per
// quarter warp) are too.
// N-contiguous B (B[K,N] row-major, level-1 matmul): [BK][BN] floats, chunk c of row k stored at
// c ^ (((k >> 2) & 3) << 1); read as scalars: lane (g,t) reads rows 16*grp + 4t + j, columns n0+g,
// banks ((chunk ^ 2t) & 7)*4 + g%4 -> 32 distinct banks.
__device__ __forceinline__ int kc_off(int r, int chunk) { return r * BK + ((chunk ^ ((r & 1) << 2)) << 2); }
__device__ __forceinline__ int nc_off(int k, int n) {
    return k * BN + ((((n >> 2) ^ (((k >> 2) & 3) << 1))) << 2) + (n & 3);
}

template <bool VEC, int ROWS>
__device__ __forceinline__ void load_kcontig(float* s, const float* __restrict__ G, int rows_total, int K,
                                             int r0, int k0, int tid) {
    static_assert((ROWS * BK) % (4 * NTHR) == 0, "tile load split");
    if (VEC) {
#pragma unroll
        for (int it = 0; it < ROWS * (BK / 4) / NTHR; ++it) {
            const int i = tid + it * NTHR;
            const int r = i / (BK / 4), c = i % (BK / 4);
            const int gr = r0 + r, gk = k0 + c * 4;
            const bool p = gr < rows_total && gk < K;
            cp_async16(s + kc_off(r, c), p ? G + (size_t)gr * K + gk : G, p);
        }
    } else {
#pragma unroll 4
        for (int it = 0; it < ROWS * BK / NTHR; ++it) {
            const int i = tid + it * NTHR;
            const int r = i / BK, kl = i % BK;
            const int gr = r0 + r, gk = k0 + kl;
            const bool p = gr < rows_total && gk < K;
            cp_async4(s + kc_off(r, kl >> 2) + (kl & 3), p ? G + (size_t)gr * K + gk : G, p);
        }
    }
}
template <bool VEC>
__device__ __forceinline__ void load_ncontig(float* s, const float* __restrict__ G, int K, int N, int k0,
                                             int n0, int tid) {
    static_assert((BN * BK) % (4 * NTHR) == 0, "tile load split");
    if (VEC) {
#pragma unroll
        for (int it = 0; it < BK * (BN / 4) / NTHR; ++it) {
            const int i = tid + it * NTHR;
            const int k = i / (BN / 4), c = i % (BN / 4);
            const int gk = k0 + k, gn = n0 + c * 4;
            const bool p = gk < K && gn < N;
            cp_async16(s + nc_off(k, c * 4), p ? G + (size_t)gk * N + gn : G, p);
        }
    } else {
#pragma unroll 4
        for (int it = 0; it < BK * BN / NTHR; ++it) {
            const int i = tid + it * NTHR;
            const int k = i / BN, nl = i % BN;
            const int gk = k0 + k, gn = n0 + nl;
            const bool p = gk < K && gn < N;
            cp_async4(s + nc_off(k, nl), p ? G + (size_t)gk * N + gn : G, p);
        }
    }
}

// C[M,N] = epi(A[M,K] @ B + bias); B is W[N,K] (B_KCONTIG) or B[K,N].
template <bool B_KCONTIG, bool VEC, int EPI>
__global__ void __launch_bounds__(NTHR, 1)
gemm3xtf32_kernel(const float* __restrict__ A, const float* __restrict__ B, const float* __restrict__ bias,
                  float* __restrict__ C, int M, int N, int K) {
    extern __shared__ __align__(16) float smem[];
    float* As = smem;
    float* Bs = smem + STAGES * A_STAGE;
    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
    const int g = lane >> 2, t = lane & 3;
    const int wm0 = (warp / WN) * WTM, wn0 = (warp % WN) * WTN;

    // grouped rasterization of the 1-D grid
    const int nbm = (M + BM - 1) / BM, nbn = (N + BN - 1) / BN;
    const int per_group = GROUP_M * nbn;
    const int pid = blockIdx.x;
    const int first_m = (pid / per_group) * GROUP_M;
    const int gsz = min(nbm - first_m, GROUP_M);
    const int m0 = (first_m + (pid % per_group) % gsz) * BM;
    const int n0 = ((pid % per_group) / gsz) * BN;
    const int ktiles = (K + BK - 1) / BK;

    auto load_stage = [&](int stage, int kt) {
        const int k0 = kt * BK;
        load_kcontig<VEC, BM>(As + stage * A_STAGE, A, M, K, m0, k0, tid);
        if (B_KCONTIG) load_kcontig<VEC, BN>(Bs + stage * B_STAGE, B, N, K, n0, k0, tid);
        else load_ncontig<VEC>(Bs + stage * B_STAGE, B, K, N, k0, n0, tid);
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
        __syncthreads();  // stage kt visible; everyone is done with stage kt-1, which is refilled next
        {
            const int nk = kt + STAGES - 1;
            if (nk < ktiles) load_stage(nk % STAGES, nk);
            cp_async_commit();
        }
        const float* as = As + (kt % STAGES) * A_STAGE;
        const float* bs = Bs + (kt % STAGES) * B_STAGE;

        float tmp[MT][NT][4];  // this K slice's sum (tensor-core accumulation bounded to BK products)
#pragma unroll
        for (int grp = 0; grp < BK / 16; ++grp) {
            float ra[MT][2][4];
#pragma unroll
            for (int mt = 0; mt < MT; ++mt)
#pragma unroll
                for (int h = 0; h < 2; ++h) {
                    const int r = wm0 + mt * 16 + g + 8 * h;
                    const float4 v = *reinterpret_cast<const float4*>(as + kc_off(r, grp * 4 + t));
                    ra[mt][h][0] = v.x; ra[mt][h][1] = v.y; ra[mt][h][2] = v.z; ra[mt][h][3] = v.w;
                }
            float rb[NT][4];
#pragma unroll
            for (int nt = 0; nt < NT; ++nt) {
                const int n = wn0 + nt * 8 + g;
                if (B_KCONTIG) {
                    const float4 v = *reinterpret_cast<const float4*>(bs + kc_off(n, grp * 4 + t));
                    rb[nt][0] = v.x; rb[nt][1] = v.y; rb[nt][2] = v.z; rb[nt][3] = v.w;
                } else {
#pragma unroll
                    for (int j = 0; j < 4; ++j) rb[nt][j] = bs[nc_off(grp * 16 + 4 * t + j, n)];
                }
            }
#pragma unroll
            for (int q = 0; q < 2; ++q) {
                uint32_t ah[MT][4], al[MT][4], bh[NT][2], bl[NT][2];
#pragma unroll
                for (int mt = 0; mt < MT; ++mt) {
                    split_tf32(ra[mt][0][2 * q], ah[mt][0], al[mt][0]);      // row g,   col t
                    split_tf32(ra[mt][1][2 * q], ah[mt][1], al[mt][1]);      // row g+8, col t
                    split_tf32(ra[mt][0][2 * q + 1], ah[mt][2], al[mt][2]);  // row g,   col t+4
                    split_tf32(ra[mt][1][2 * q + 1], ah[mt][3], al[mt][3]);  // row g+8, col t+4
                }
#pragma unroll
                for (int nt = 0; nt < NT; ++nt) {
                    split_tf32(rb[nt][2 * q], bh[nt][0], bl[nt][0]);      // k = t,   n = g
                    split_tf32(rb[nt][2 * q + 1], bh[nt][1], bl[nt][1]);  // k = t+4, n = g
                }
                // small products first, independent mma back to back (MT*NT chains)
#pragma unroll
                for (int mt = 0; mt < MT; ++mt)
#pragma unroll
                    for (int nt = 0; nt < NT; ++nt) {
                        if (grp == 0 && q == 0) mma_zero(tmp[mt][nt], al[mt], bh[nt][0], bh[nt][1]);
                        else mma_acc(tmp[mt][nt], al[mt], bh[nt][0], bh[nt][1]);
                    }
#pragma unroll
                for (int mt = 0; mt < MT; ++mt)
#pragma unroll
                    for (int nt = 0; nt < NT; ++nt) mma_acc(tmp[mt][nt], ah[mt], bl[nt][0], bl[nt][1]);
#pragma unroll
                for (int mt = 0; mt < MT; ++mt)
#pragma unroll
                    for (int nt = 0; nt < NT; ++nt) mma_acc(tmp[mt][nt], ah[mt], bh[nt][0], bh[nt][1]);
            }
        }
#pragma unroll
        for (int i = 0; i < MT; ++i)
#pragma unroll
            for (int j = 0; j < NT; ++j)
#pragma unroll
                for (int e = 0; e < 4; ++e) acc[i][j][e] += tmp[i][j][e];
    }
    cp_async_wait<0>();

    // epilogue: c0,c1 -> (row g, cols 2t, 2t+1), c2,c3 -> row g+8
    const bool pair_ok = (N & 1) == 0;
#pragma unroll
    for (int nt = 0; nt < NT; ++nt) {
        const int col = n0 + wn0 + nt * 8 + 2 * t;
        float b0 = 0.0f, b1 = 0.0f;
        if (EPI != EPI_NONE) {
            if (col < N) b0 = __ldg(bias + col);
            if (col + 1 < N) b1 = __ldg(bias + col + 1);
        }
#pragma unroll
        for (int mt = 0; mt < MT; ++mt)
#pragma unroll
            for (int h = 0; h < 2; ++h) {
                const int row = m0 + wm0 + mt * 16 + g + 8 * h;
                if (row >= M) continue;
                const float v0 = epilogue_op<EPI>(acc[mt][nt][2 * h], b0);
                const float v1 = epilogue_op<EPI>(acc[mt][nt][2 * h + 1], b1);
                float* cp = C + (size_t)row * N + col;
                if (pair_ok && col + 1 < N) {
                    *reinterpret_cast<float2*>(cp) = make_float2(v0, v1);
                } else {
                    if (col < N) cp[0] = v0;
                    if (col + 1 < N) cp[1] = v1;
                }
            }
    }
}

template <bool B_KCONTIG, bool VEC, int EPI>
void launch_gemm(const float* A, const float* B, const float* bias, float* C, int M, int N, int K,
                 cudaStream_t stream) {
    auto kern = gemm3xtf32_kernel<B_KCONTIG, VEC, EPI>;
    static bool attr_set = false;  // per template instance
    if (!attr_set) {
        C10_CUDA_CHECK(cudaFuncSetAttribute(kern, cudaFuncAttributeMaxDynamicSharedMemorySize, SMEM_BYTES));
        attr_set = true;
    }
    const long long blocks = (long long)((M + BM - 1) / BM) * ((N + BN - 1) / BN);
    TORCH_CHECK(blocks < (1LL << 31), "gemm3xtf32: problem too large");
    kern<<<(unsigned)blocks, NTHR, SMEM_BYTES, stream>>>(A, B, bias, C, M, N, K);
    C10_CUDA_KERNEL_LAUNCH_CHECK();
}

// ---- rows with inf/NaN inputs, recomputed in plain fp32 ---------------------------------------
// The 3xTF32 split of an inf is inf + NaN (inf - inf), and inf times a zero or opposite-signed lo part
// is NaN where IEEE fp32 gives +-inf (which ReLU turns into the reference's 0). Keeping the split finite
// inside the GEMM costs registers it has none to spare for (it spilled: 2x slower), so the GEMM stays as
// it is and the rows of x holding a non-finite value are found (one read of x, ~1% of the GEMM) and
// recomputed here with IEEE fp32 FMAs; a block of a finite row returns at once.
__global__ void nonfinite_rows(const float* __restrict__ x, int K, int* __restrict__ flags) {
    const float* row = x + (size_t)blockIdx.x * K;
    int bad = 0;
    for (int k = threadIdx.x; k < K; k += blockDim.x) bad |= !isfinite(row[k]);
    bad = __syncthreads_or(bad);
    if (threadIdx.x == 0) flags[blockIdx.x] = bad;
}

template <int EPI>
__global__ void fix_rows(const float* __restrict__ x, const float* __restrict__ W, const float* __restrict__ bias,
                         float* __restrict__ C, const int* __restrict__ flags, int N, int K) {
    if (!flags[blockIdx.x]) return;
    const float* xr = x + (size_t)blockIdx.x * K;
    for (int n = threadIdx.x; n < N; n += blockDim.x) {
        const float* wr = W + (size_t)n * K;
        float acc = 0.0f;
        for (int k = 0; k < K; ++k) acc = fmaf(xr[k], wr[k], acc);
        C[(size_t)blockIdx.x * N + n] = epilogue_op<EPI>(acc, bias[n]);
    }
}

template <int EPI>
void fix_nonfinite_rows(const float* x, const float* W, const float* bias, float* C, int M, int N, int K,
                        int* flags, cudaStream_t stream) {
    nonfinite_rows<<<M, 256, 0, stream>>>(x, K, flags);
    fix_rows<EPI><<<M, 128, 0, stream>>>(x, W, bias, C, flags, N, K);
    C10_CUDA_KERNEL_LAUNCH_CHECK();
}

bool aligned16(const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; }

}  // namespace

// epi(x @ W^T + b): x (..., K), W (N, K), b (N); epi 1 = bias, 2 = bias+ReLU, 3 = bias+GELU(erf).
at::Tensor linear_3xtf32(at::Tensor x, at::Tensor W, at::Tensor b, int64_t epi) {
    TORCH_CHECK(x.is_cuda() && W.is_cuda() && b.is_cuda(), "linear_3xtf32: CUDA tensors expected");
    TORCH_CHECK(x.scalar_type() == at::kFloat && W.scalar_type() == at::kFloat && b.scalar_type() == at::kFloat,
                "linear_3xtf32: float32 expected");
    TORCH_CHECK(x.dim() >= 1 && W.dim() == 2, "linear_3xtf32: bad ranks");
    x = x.contiguous();
    W = W.contiguous();
    b = b.contiguous();
    const int64_t K = x.size(-1), N = W.size(0);
    TORCH_CHECK(W.size(1) == K && b.numel() == N, "linear_3xtf32: shape mismatch");
    TORCH_CHECK(epi >= 1 && epi <= 3, "linear_3xtf32: epi must be 1, 2 or 3");
    const int64_t M = K > 0 ? x.numel() / K : 0;
    TORCH_CHECK(M < (1LL << 31) && N < (1LL << 31) && K < (1LL << 31), "linear_3xtf32: dimension too large");
    auto out_sizes = x.sizes().vec();
    out_sizes.back() = N;
    auto out = at::empty(out_sizes, x.options());
    if (out.numel() == 0) return out;
    const int64_t Mrows = out.numel() / N;  // also right when K == 0
    cudaStream_t stream = c10::cuda::getCurrentCUDAStream();
    const float* xp = x.data_ptr<float>();
    const float* wp = W.data_ptr<float>();
    const float* bp = b.data_ptr<float>();
    float* op = out.data_ptr<float>();
    const bool vec = K % 4 == 0 && aligned16(xp) && aligned16(wp);
    const int m = (int)Mrows, n = (int)N, k = (int)K;
#define KB_LIN(V, E) launch_gemm<true, V, E>(xp, wp, bp, op, m, n, k, stream)
    if (vec) {
        if (epi == EPI_BIAS) KB_LIN(true, EPI_BIAS);
        else if (epi == EPI_BIAS_RELU) KB_LIN(true, EPI_BIAS_RELU);
        else KB_LIN(true, EPI_BIAS_GELU);
    } else {
        if (epi == EPI_BIAS) KB_LIN(false, EPI_BIAS);
        else if (epi == EPI_BIAS_RELU) KB_LIN(false, EPI_BIAS_RELU);
        else KB_LIN(false, EPI_BIAS_GELU);
    }
#undef KB_LIN
    auto flags = at::empty({Mrows}, x.options().dtype(at::kInt));
    int* fp = flags.data_ptr<int>();
    if (epi == EPI_BIAS) fix_nonfinite_rows<EPI_BIAS>(xp, wp, bp, op, m, n, k, fp, stream);
    else if (epi == EPI_BIAS_RELU) fix_nonfinite_rows<EPI_BIAS_RELU>(xp, wp, bp, op, m, n, k, fp, stream);
    else fix_nonfinite_rows<EPI_BIAS_GELU>(xp, wp, bp, op, m, n, k, fp, stream);
    return out;
}
"""

CPP_SRC = "at::Tensor linear_3xtf32(at::Tensor x, at::Tensor W, at::Tensor b, int64_t epi);"

_ext = load_inline(
    name="kb_l2_1_gemm_relu_3xtf32_fragperm",
    cpp_sources=CPP_SRC,
    cuda_sources=CUDA_SRC,
    functions=["linear_3xtf32"],
    extra_cuda_cflags=["-O3"],
    verbose=False,
)


class ModelNew(nn.Module):
    def __init__(self, in_features, out_features):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)

    def forward(self, x):
        return _ext.linear_3xtf32(x.contiguous(), self.linear.weight, self.linear.bias, 2)  # bias + ReLU
