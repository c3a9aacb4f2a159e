"""L2/56 Linear -> sigmoid -> row sum, 3xTF32 candidate (reference for fast.py, 1.5x more tensor work).

Idea. out[b] = sum_j sigmoid(x[b,:] . W[j,:] + bias[j]). Each CTA owns BN=128 output columns j and a
block of 128 rows b (the whole batch here), loops over K with a 4-stage cp.async pipeline (W tiles
streamed from HBM exactly once with an L2 evict-first hint, x tiles re-read from L2 with evict-last),
and multiplies with mma.sync.m16n8k8 tf32 using the 3xTF32 split a = a_hi + a_lo (a_hi = a with the
low 13 mantissa bits cleared, a_lo = the exact remainder, truncated to tf32 too):
acc += a_lo*b_hi + a_hi*b_lo + a_hi*b_hi (the a_lo*b_lo term, ~2^-22 relative, is dropped).
Epilogue: bias + sigmoid (accurate expf) and per-row partial sums in double, written as one double
per (column block, row); a second tiny kernel adds the 256 partials per row in double.
Accuracy (CPU emulation on 4x4096 slices): pre-activation error std 2.4e-8 for 3xTF32 vs 9.5e-5 for
TF32, i.e. the output error is dominated by the final fp32 rounding; 2 of the 3 products give
1.5e-7..1.8e-7 relative output error (about 5x the fp32 reference's 3.3e-8), so all three are kept.
Floor: W read once, 4.29 GB / 4.2 TB/s = 1.02 ms; tensor work 3 * 275 GFLOP = 825 GFLOP at 495 TFLOP/s
= 1.67 ms (mma.sync likely reaches less than wgmma's peak), so this kernel is tensor-bound.
Measured (H200, kbench check, results/H200/check-56-20261130-072927.jsonl): 4.289 ms vs eager 5.325 ms,
1.24x [1.24, 1.25]; fp64-oracle error 1.7e-8, 0.6x the reference's (9.0x, flagged precision, before the
per-stage register sums).
Measured (H200, 2026-12-04, results/H200/bench-20261204-s18.jsonl): 4.30 ms per call, 1.24x eager [1.24,
1.24], 1.25x torch.compile; 0.49 of the roofline floor (2.10 ms).
"""
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

CUDA_SRC = r"""
#include <torch/extension.h>
#include <c10/cuda/CUDAStream.h>
#include <c10/cuda/CUDAException.h>
#include <cuda_runtime.h>
#include <stdint.h>

namespace {

constexpr int BM = 128;          // rows (batch) per CTA
constexpr int BN = 128;          // output columns per CTA
constexpr int BK = 32;           // K per pipeline stage
constexpr int BKP = BK + 4;      // padded smem row (floats): conflict-free ldmatrix
constexpr int STAGES = 4;
constexpr int THREADS = 256;     // 8 warps: 2 (M) x 4 (N), warp tile 64 x 32
constexpr int STAGE_FLOATS = (BM + BN) * BKP;
constexpr size_t SMEM_BYTES = (size_t)STAGES * STAGE_FLOATS * sizeof(float);

__device__ __forceinline__ uint32_t smem_u32(const void* p) {
    return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}

__device__ __forceinline__ void cp_async16(uint32_t dst, const void* src, int src_bytes, uint64_t policy) {
    asm volatile("cp.async.cg.shared.global.L2::cache_hint [%0], [%1], 16, %2, %3;\n"
                 :: "r"(dst), "l"(src), "r"(src_bytes), "l"(policy));
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::); }
template <int N>
__device__ __forceinline__ void cp_async_wait() { asm volatile("cp.async.wait_group %0;\n" :: "n"(N)); }

__device__ __forceinline__ void ldmatrix_x4(uint32_t addr, uint32_t& r0, uint32_t& r1, uint32_t& r2, uint32_t& r3) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                 : "=r"(r0), "=r"(r1), "=r"(r2), "=r"(r3) : "r"(addr));
}

__device__ __forceinline__ void mma_tf32(float* c, const uint32_t* a, const uint32_t* b) {
    asm volatile("mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 "
                 "{%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
                 : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}

// a = hi + lo exactly (hi: low 13 bits cleared); lo truncated to tf32 as well.
__device__ __forceinline__ void split_tf32(uint32_t v, uint32_t& hi, uint32_t& lo) {
    hi = v & 0xffffe000u;
    float r = __uint_as_float(v) - __uint_as_float(hi);
    lo = __float_as_uint(r) & 0xffffe000u;
}

__global__ void __launch_bounds__(THREADS, 1)
gemm3xtf32_sigmoid_rowsum(const float* __restrict__ x, const float* __restrict__ w,
                          const float* __restrict__ bias, double* __restrict__ partial,
                          int M, int N, int K) {
    extern __shared__ __align__(16) float smem[];
    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
    const int warp_m = warp >> 2, warp_n = warp & 3;
    const int n0 = blockIdx.x * BN, m0 = blockIdx.y * BM;

    uint64_t pol_first, pol_last;
    asm volatile("createpolicy.fractional.L2::evict_first.b64 %0, 1.0;\n" : "=l"(pol_first));
    asm volatile("createpolicy.fractional.L2::evict_last.b64 %0, 1.0;\n" : "=l"(pol_last));

    const int KT = (K + BK - 1) / BK;

    // Each thread copies 4 float4 of A and 4 of B per stage: row = (tid>>3) + 32*i, chunk = tid&7.
    auto load_stage = [&](int stage, int kt) {
        float* As = smem + stage * STAGE_FLOATS;
        float* Bs = As + BM * BKP;
        const int kc = kt * BK + (tid & 7) * 4;
        const int kbytes = (kc < K) ? 16 : 0;   // K % 4 == 0 is checked on the host
#pragma unroll
        for (int i = 0; i < 4; ++i) {
            const int r = (tid >> 3) + 32 * i;
            const int gm = m0 + r;
            const float* src = x + (size_t)(gm < M ? gm : 0) * K + (kbytes ? kc : 0);
            cp_async16(smem_u32(As + r * BKP + (tid & 7) * 4), src, (gm < M) ? kbytes : 0, pol_last);
        }
#pragma unroll
        for (int i = 0; i < 4; ++i) {
            const int r = (tid >> 3) + 32 * i;
            const int gn = n0 + r;
            const float* src = w + (size_t)(gn < N ? gn : 0) * K + (kbytes ? kc : 0);
            cp_async16(smem_u32(Bs + r * BKP + (tid & 7) * 4), src, (gn < N) ? kbytes : 0, pol_first);
        }
    };

    float acc[4][4][4];
#pragma unroll
    for (int i = 0; i < 4; ++i)
#pragma unroll
        for (int j = 0; j < 4; ++j)
#pragma unroll
            for (int c = 0; c < 4; ++c) acc[i][j][c] = 0.f;

#pragma unroll
    for (int s = 0; s < STAGES - 1; ++s) {
        if (s < KT) load_stage(s, s);
        cp_async_commit();
    }

    // ldmatrix lane offsets (in floats) inside a stage.
    const int a_row = warp_m * 64 + (lane & 15);
    const int a_col = (lane >> 4) * 4;
    const int b_row = warp_n * 32 + (lane & 7) + ((lane >> 4) << 3);
    const int b_col = ((lane >> 3) & 1) * 4;

    for (int kt = 0; kt < KT; ++kt) {
        cp_async_wait<STAGES - 2>();
        __syncthreads();
        {   // prefetch stage kt + STAGES - 1 (its buffer was consumed at iteration kt - 1)
            const int nk = kt + STAGES - 1;
            if (nk < KT) load_stage(nk % STAGES, nk);
            cp_async_commit();
        }
        const float* As = smem + (kt % STAGES) * STAGE_FLOATS;
        const float* Bs = As + BM * BKP;
        const uint32_t a_base = smem_u32(As + a_row * BKP + a_col);
        const uint32_t b_base = smem_u32(Bs + b_row * BKP + b_col);
        // This stage's products go to a zeroed tile first, then one IEEE add into acc: the tensor core's
        // own accumulation is not round-to-nearest. Accumulating all of K (4096 k8 steps) in the mma
        // measured 5.9x (fast) / 9.0x (3xTF32) the fp32 reference's fp64 error; per stage, 0.6x.
        float part[4][4][4];
#pragma unroll
        for (int i = 0; i < 4; ++i)
#pragma unroll
            for (int j = 0; j < 4; ++j)
#pragma unroll
                for (int c = 0; c < 4; ++c) part[i][j][c] = 0.f;
#pragma unroll
        for (int kk = 0; kk < BK; kk += 8) {
            uint32_t bh[4][2], bl[4][2];
#pragma unroll
            for (int p = 0; p < 2; ++p) {   // two n-tiles per ldmatrix.x4
                uint32_t r0, r1, r2, r3;
                ldmatrix_x4(b_base + (uint32_t)((p * 16 * BKP + kk) * 4), r0, r1, r2, r3);
                split_tf32(r0, bh[2 * p][0], bl[2 * p][0]);
                split_tf32(r1, bh[2 * p][1], bl[2 * p][1]);
                split_tf32(r2, bh[2 * p + 1][0], bl[2 * p + 1][0]);
                split_tf32(r3, bh[2 * p + 1][1], bl[2 * p + 1][1]);
            }
#pragma unroll
            for (int mt = 0; mt < 4; ++mt) {
                uint32_t ar[4], ah[4], al[4];
                ldmatrix_x4(a_base + (uint32_t)((mt * 16 * BKP + kk) * 4), ar[0], ar[1], ar[2], ar[3]);
#pragma unroll
                for (int c = 0; c < 4; ++c) split_tf32(ar[c], ah[c], al[c]);
#pragma unroll
                for (int nt = 0; nt < 4; ++nt) {
                    mma_tf32(part[mt][nt], al, bh[nt]);
                    mma_tf32(part[mt][nt], ah, bl[nt]);
                    mma_tf32(part[mt][nt], ah, bh[nt]);
                }
            }
        }
#pragma unroll
        for (int i = 0; i < 4; ++i)
#pragma unroll
            for (int j = 0; j < 4; ++j)
#pragma unroll
                for (int c = 0; c < 4; ++c) acc[i][j][c] += part[i][j][c];
    }
    cp_async_wait<0>();
    __syncthreads();

    // Epilogue: sigmoid(acc + bias), per-row sums in double.
    const int g = lane >> 2, t = lane & 3;
    double* red = reinterpret_cast<double*>(smem);   // [4 warp_n][BM]
    float bv[4][2];
    bool nv[4][2];
#pragma unroll
    for (int nt = 0; nt < 4; ++nt)
#pragma unroll
        for (int h = 0; h < 2; ++h) {
            const int n = n0 + warp_n * 32 + nt * 8 + 2 * t + h;
            nv[nt][h] = n < N;
            bv[nt][h] = nv[nt][h] ? bias[n] : 0.f;
        }
#pragma unroll
    for (int mt = 0; mt < 4; ++mt)
#pragma unroll
        for (int hr = 0; hr < 2; ++hr) {
            double s = 0.0;
#pragma unroll
            for (int nt = 0; nt < 4; ++nt)
#pragma unroll
                for (int h = 0; h < 2; ++h) {
                    const float v = acc[mt][nt][hr * 2 + h] + bv[nt][h];
                    const float sg = 1.0f / (1.0f + expf(-v));
                    if (nv[nt][h]) s += (double)sg;
                }
            s += __shfl_xor_sync(0xffffffffu, s, 1);
            s += __shfl_xor_sync(0xffffffffu, s, 2);
            if (t == 0) red[warp_n * BM + warp_m * 64 + mt * 16 + hr * 8 + g] = s;
        }
    __syncthreads();
    if (tid < BM && m0 + tid < M) {
        const double s = red[tid] + red[BM + tid] + red[2 * BM + tid] + red[3 * BM + tid];
        partial[(size_t)blockIdx.x * M + m0 + tid] = s;
    }
}

__global__ void sum_partials(const double* __restrict__ partial, float* __restrict__ out, int nblk, int M) {
    // one warp per row
    const int row = blockIdx.x * (blockDim.x / 32) + (threadIdx.x >> 5);
    const int lane = threadIdx.x & 31;
    if (row >= M) return;
    double s = 0.0;
    for (int i = lane; i < nblk; i += 32) s += partial[(size_t)i * M + row];
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) s += __shfl_xor_sync(0xffffffffu, s, o);
    if (lane == 0) out[row] = (float)s;
}

// ---- rows with inf/NaN inputs -------------------------------------------------------------------
// The split of an inf is inf + NaN (inf - inf), and inf times a zero or opposite-signed lo part is NaN
// where IEEE fp32 gives +-inf (which sigmoid turns into 1 or 0). A finite split inside the GEMM costs
// registers it has none to spare for, so the GEMM stays as it is and this kernel, one block per row of x,
// finds a row holding a non-finite value (one read of x, ~1% of the GEMM; a finite row returns) and
// recomputes its sum: each x.w_n is then non-finite, decided by the non-finite x[k] alone (inf*w, NaN, and
// inf + -inf fold the same in any order), so only those positions are multiplied (all K past MAX_POS).
constexpr int FIX_THREADS = 256, MAX_POS = 1024;
__global__ void __launch_bounds__(FIX_THREADS)
fix_nonfinite_rows(const float* __restrict__ x, const float* __restrict__ w, const float* __restrict__ bias,
                   float* __restrict__ out, int N, int K) {
    __shared__ int pos[MAX_POS];
    __shared__ int npos;
    __shared__ double red[FIX_THREADS / 32];
    const float* xr = x + (size_t)blockIdx.x * K;
    if (threadIdx.x == 0) npos = 0;
    __syncthreads();
    for (int k = threadIdx.x; k < K; k += FIX_THREADS)
        if (!isfinite(xr[k])) {
            const int i = atomicAdd(&npos, 1);
            if (i < MAX_POS) pos[i] = k;
        }
    __syncthreads();
    const int np = npos;
    if (np == 0) return;
    double s = 0.0;
    for (int n = threadIdx.x; n < N; n += FIX_THREADS) {
        const float* wr = w + (size_t)n * K;
        float v = 0.0f;
        if (np <= MAX_POS) for (int i = 0; i < np; ++i) v += xr[pos[i]] * wr[pos[i]];
        else for (int k = 0; k < K; ++k) v = fmaf(xr[k], wr[k], v);
        v += bias[n];
        s += (double)(1.0f / (1.0f + expf(-v)));
    }
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) s += __shfl_xor_sync(0xffffffffu, s, o);
    if ((threadIdx.x & 31) == 0) red[threadIdx.x >> 5] = s;
    __syncthreads();
    if (threadIdx.x == 0) {
        double t = 0.0;
        for (int i = 0; i < FIX_THREADS / 32; ++i) t += red[i];
        out[blockIdx.x] = (float)t;
    }
}

}  // namespace

torch::Tensor linear_sigmoid_rowsum(torch::Tensor x, torch::Tensor w, torch::Tensor b) {
    TORCH_CHECK(x.is_cuda() && w.is_cuda() && b.is_cuda(), "CUDA tensors expected");
    TORCH_CHECK(x.scalar_type() == torch::kFloat32 && w.scalar_type() == torch::kFloat32 &&
                b.scalar_type() == torch::kFloat32, "float32 expected");
    TORCH_CHECK(x.dim() == 2 && w.dim() == 2 && b.dim() == 1, "x (M,K), w (N,K), b (N) expected");
    TORCH_CHECK(x.is_contiguous() && w.is_contiguous() && b.is_contiguous(), "contiguous tensors expected");
    const int M = x.size(0), K = x.size(1), N = w.size(0);
    TORCH_CHECK(w.size(1) == K && b.size(0) == N, "shape mismatch");
    TORCH_CHECK(((uintptr_t)x.data_ptr() | (uintptr_t)w.data_ptr()) % 16 == 0, "x and w must be 16-byte aligned");
    TORCH_CHECK(K % 4 == 0, "K must be a multiple of 4 (16-byte cp.async rows)");
    TORCH_CHECK(M > 0 && N > 0 && K > 0, "empty shapes unsupported");
    auto out = torch::empty({M, 1}, x.options());
    const int nblk = (N + BN - 1) / BN;
    auto partial = torch::empty({(long)nblk, (long)M}, x.options().dtype(torch::kFloat64));
    auto stream = c10::cuda::getCurrentCUDAStream();
    static bool attr_set = false;
    if (!attr_set) {
        cudaFuncSetAttribute(gemm3xtf32_sigmoid_rowsum, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)SMEM_BYTES);
        attr_set = true;
    }
    dim3 grid(nblk, (M + BM - 1) / BM);
    gemm3xtf32_sigmoid_rowsum<<<grid, THREADS, SMEM_BYTES, stream>>>(
        x.data_ptr<float>(), w.data_ptr<float>(), b.data_ptr<float>(), partial.data_ptr<double>(), M, N, K);
    C10_CUDA_KERNEL_LAUNCH_CHECK();
    sum_partials<<<(M + 7) / 8, 256, 0, stream>>>(partial.data_ptr<double>(), out.data_ptr<float>(), nblk, M);
    C10_CUDA_KERNEL_LAUNCH_CHECK();
    fix_nonfinite_rows<<<M, FIX_THREADS, 0, stream>>>(x.data_ptr<float>(), w.data_ptr<float>(), b.data_ptr<float>(),
                                                      out.data_ptr<float>(), N, K);
    C10_CUDA_KERNEL_LAUNCH_CHECK();
    return out;
}
"""

CPP_SRC = "torch::Tensor linear_sigmoid_rowsum(torch::Tensor x, torch::Tensor w, torch::Tensor b);"

_ext = load_inline(
    name="l2_56_fast_3xtf32_ref",
    cpp_sources=CPP_SRC,
    cuda_sources=CUDA_SRC,
    functions=["linear_sigmoid_rowsum"],
    extra_cuda_cflags=["-O3", "-Xptxas=-v"],
    verbose=False,
)


def _pad_cols(t, mult):
    """Zero columns up to a multiple of `mult` (the kernel's 16-byte rows); zeros add nothing to a dot product."""
    extra = -t.shape[-1] % mult
    return torch.nn.functional.pad(t, (0, extra)) if extra else t


class ModelNew(nn.Module):
    def __init__(self, input_size, hidden_size):
        super().__init__()
        self.linear = nn.Linear(input_size, hidden_size)

    def forward(self, x):
        return _ext.linear_sigmoid_rowsum(_pad_cols(x.contiguous(), 4), _pad_cols(self.linear.weight, 4),
                                          self.linear.bias)      # other K: zero-padded to a multiple of 4
