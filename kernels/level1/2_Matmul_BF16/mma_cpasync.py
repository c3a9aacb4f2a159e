"""bf16 GEMM C = A @ B with mma.sync m16n8k16 (fp32 accumulate), 4-stage cp.async pipeline.

Idea: 128 x 128 x 32 block tile, 8 warps in a 2 x 4 grid, each warp computes 64 x 32 with 4 x 4
m16n8k16 bf16 MMAs per k16 step. A ([M,K] row-major) and B ([K,N] row-major) tiles are copied
global->shared with 16-byte cp.async (zero-fill outside the matrix) into a 4-stage ring, row strides
padded by 16 bytes so ldmatrix reads are bank-conflict free; A fragments come from ldmatrix.x4 and
B fragments from ldmatrix.x4.trans (B is k-major in memory, the MMA wants it "col"). fp32 accumulators
are rounded once to bf16 on the store, like cuBLAS. Needs K and N multiples of 8 (16-byte rows);
M, N, K need not be multiples of the tile.
Expected: eager is cuBLAS with Hopper wgmma (~700+ TFLOP/s, ~190 us); mma.sync tops out near
60-70% of that, so ~0.5-0.7x. Kept as the sm_90-portable (no wgmma, the harness builds for 9.0)
tensor-core baseline.
Measured (H200, results/H200/bench-20261130-072328.jsonl): 427.5 us vs cuBLAS 184.6 us, 0.43x [0.43, 0.43];
wgmma.py beside it (sm_90a) reaches 0.89x.
Measured (H200, 2026-12-04, results/H200/bench-20261204-s18.jsonl): 419.9 µs per call, 0.44x eager [0.44,
0.45], 0.53x torch.compile; 0.44 of the roofline floor (186.8 µs).
"""
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cuda_src = r"""
#include <ATen/ATen.h>
#include <c10/cuda/CUDAStream.h>
#include <c10/cuda/CUDAException.h>
#include <cuda_runtime.h>
#include <cuda_bf16.h>
#include <cstdint>

constexpr int BM = 128, BN = 128, BK = 32, STAGES = 4;
constexpr int A_LD = BK + 8;    // 40 bf16 = 80 B row stride
constexpr int B_LD = BN + 8;    // 136 bf16 = 272 B row stride
constexpr int A_STAGE = BM * A_LD;   // elements
constexpr int B_STAGE = BK * B_LD;
constexpr int SMEM_BYTES = STAGES * (A_STAGE + B_STAGE) * 2;

__device__ __forceinline__ uint32_t smem_u32(const void* p) {
    return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}
__device__ __forceinline__ void cp_async16(uint32_t dst, const void* src, int src_bytes) {
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" :: "r"(dst), "l"(src), "r"(src_bytes));
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::); }
template <int N>
__device__ __forceinline__ void cp_async_wait() { asm volatile("cp.async.wait_group %0;\n" :: "n"(N)); }

__device__ __forceinline__ void ldsm_x4(uint32_t addr, uint32_t& r0, uint32_t& r1, uint32_t& r2, uint32_t& r3) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                 : "=r"(r0), "=r"(r1), "=r"(r2), "=r"(r3) : "r"(addr));
}
__device__ __forceinline__ void ldsm_x4_t(uint32_t addr, uint32_t& r0, uint32_t& r1, uint32_t& r2, uint32_t& r3) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                 : "=r"(r0), "=r"(r1), "=r"(r2), "=r"(r3) : "r"(addr));
}
__device__ __forceinline__ void mma_bf16(float* d, const uint32_t* a, uint32_t b0, uint32_t b1) {
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
        "{%0,%1,%2,%3};\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

__global__ void __launch_bounds__(256) gemm_bf16_mma(const __nv_bfloat16* __restrict__ A,
                                                    const __nv_bfloat16* __restrict__ B,
                                                    __nv_bfloat16* __restrict__ C, int M, int N, int K) {
    extern __shared__ __align__(16) unsigned char smem_raw[];
    __nv_bfloat16* As = reinterpret_cast<__nv_bfloat16*>(smem_raw);
    __nv_bfloat16* Bs = As + STAGES * A_STAGE;

    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
    const int wm = warp & 1, wn = warp >> 1;          // warp tile: rows wm*64, cols wn*32
    const int bm = blockIdx.y * BM, bn = blockIdx.x * BN;
    const int KT = (K + BK - 1) / BK;

    // each thread copies 2 16-byte chunks of A and 2 of B per stage
    auto load_stage = [&](int stage, int kt) {
        const int k0 = kt * BK;
#pragma unroll
        for (int h = 0; h < 2; ++h) {
            const int c = tid + h * 256;
            const int r = c >> 2, kc = (c & 3) * 8;        // A: 128 rows x 4 chunks
            const int gm = bm + r, gk = k0 + kc;
            const bool ok = gm < M && gk < K;
            const __nv_bfloat16* src = ok ? A + (size_t)gm * K + gk : A;
            cp_async16(smem_u32(As + stage * A_STAGE + r * A_LD + kc), src, ok ? 16 : 0);
        }
#pragma unroll
        for (int h = 0; h < 2; ++h) {
            const int c = tid + h * 256;
            const int r = c >> 4, nc = (c & 15) * 8;       // B: 32 rows x 16 chunks
            const int gk = k0 + r, gn = bn + nc;
            const bool ok = gk < K && gn < N;
            const __nv_bfloat16* src = ok ? B + (size_t)gk * N + gn : B;
            cp_async16(smem_u32(Bs + stage * B_STAGE + r * B_LD + nc), src, ok ? 16 : 0);
        }
    };

    float acc[4][4][4];
#pragma unroll
    for (int i = 0; i < 4; ++i)
#pragma unroll
        for (int j = 0; j < 4; ++j)
#pragma unroll
            for (int e = 0; e < 4; ++e) acc[i][j][e] = 0.f;

#pragma unroll
    for (int s = 0; s < STAGES - 1; ++s) {
        if (s < KT) load_stage(s, s);
        cp_async_commit();
    }

    // per-lane ldmatrix offsets (elements): row = lane % 16, 8-column half = lane / 16
    const int lrow = lane & 15, lhalf = (lane >> 4) * 8;

    for (int kt = 0; kt < KT; ++kt) {
        cp_async_wait<STAGES - 2>();
        __syncthreads();
        {
            const int nk = kt + STAGES - 1;
            if (nk < KT) load_stage(nk % STAGES, nk);
            cp_async_commit();
        }
        const int st = kt % STAGES;
        const __nv_bfloat16* as = As + st * A_STAGE;
        const __nv_bfloat16* bs = Bs + st * B_STAGE;
#pragma unroll
        for (int kk = 0; kk < BK; kk += 16) {
            uint32_t af[4][4], bf[4][2];
#pragma unroll
            for (int mi = 0; mi < 4; ++mi)
                ldsm_x4(smem_u32(as + (wm * 64 + mi * 16 + lrow) * A_LD + kk + lhalf),
                        af[mi][0], af[mi][1], af[mi][2], af[mi][3]);
#pragma unroll
            for (int p = 0; p < 2; ++p)
                ldsm_x4_t(smem_u32(bs + (kk + lrow) * B_LD + wn * 32 + p * 16 + lhalf),
                          bf[2 * p][0], bf[2 * p][1], bf[2 * p + 1][0], bf[2 * p + 1][1]);
#pragma unroll
            for (int mi = 0; mi < 4; ++mi)
#pragma unroll
                for (int ni = 0; ni < 4; ++ni) mma_bf16(acc[mi][ni], af[mi], bf[ni][0], bf[ni][1]);
        }
    }
    cp_async_wait<0>();

    // epilogue: c0,c1 at (row g, cols 2t, 2t+1); c2,c3 at row g+8
    const int g = lane >> 2, t4 = lane & 3;
#pragma unroll
    for (int mi = 0; mi < 4; ++mi) {
#pragma unroll
        for (int ni = 0; ni < 4; ++ni) {
            const int col = bn + wn * 32 + ni * 8 + t4 * 2;
            if (col >= N) continue;   // N % 8 == 0, so col + 1 < N too
#pragma unroll
            for (int hh = 0; hh < 2; ++hh) {
                const int row = bm + wm * 64 + mi * 16 + g + hh * 8;
                if (row < M) {
                    __nv_bfloat162 v = __floats2bfloat162_rn(acc[mi][ni][hh * 2], acc[mi][ni][hh * 2 + 1]);
                    *reinterpret_cast<__nv_bfloat162*>(C + (size_t)row * N + col) = v;
                }
            }
        }
    }
}

at::Tensor matmul_bf16(at::Tensor A, at::Tensor B) {
    TORCH_CHECK(A.is_cuda() && B.is_cuda() && A.scalar_type() == at::kBFloat16 && B.scalar_type() == at::kBFloat16,
                "matmul_bf16: expected CUDA bfloat16 tensors");
    TORCH_CHECK(A.dim() == 2 && B.dim() == 2 && A.size(1) == B.size(0), "matmul_bf16: expected [M,K] @ [K,N]");
    A = A.contiguous();
    B = B.contiguous();
    const int64_t M = A.size(0), K = A.size(1), N = B.size(1);
    TORCH_CHECK(K % 8 == 0 && N % 8 == 0, "matmul_bf16: K and N must be multiples of 8 (16-byte rows)");
    TORCH_CHECK(M < (1LL << 31) && N < (1LL << 31) && K < (1LL << 31), "matmul_bf16: too large");
    TORCH_CHECK(reinterpret_cast<uintptr_t>(A.data_ptr()) % 16 == 0 && reinterpret_cast<uintptr_t>(B.data_ptr()) % 16 == 0,
                "matmul_bf16: inputs must be 16-byte aligned");
    auto C = at::empty({M, N}, A.options());
    if (M == 0 || N == 0) return C;
    if (K == 0) return C.zero_();
    const int64_t gy = (M + BM - 1) / BM;
    TORCH_CHECK(gy < 65536, "matmul_bf16: M too large for this kernel");
    static bool attr_set = false;
    if (!attr_set) {
        C10_CUDA_CHECK(cudaFuncSetAttribute(gemm_bf16_mma, cudaFuncAttributeMaxDynamicSharedMemorySize, SMEM_BYTES));
        attr_set = true;
    }
    dim3 grid((unsigned)((N + BN - 1) / BN), (unsigned)gy);
    auto stream = c10::cuda::getCurrentCUDAStream();
    gemm_bf16_mma<<<grid, 256, SMEM_BYTES, stream>>>(
        reinterpret_cast<const __nv_bfloat16*>(A.data_ptr()), reinterpret_cast<const __nv_bfloat16*>(B.data_ptr()),
        reinterpret_cast<__nv_bfloat16*>(C.data_ptr()), (int)M, (int)N, (int)K);
    C10_CUDA_KERNEL_LAUNCH_CHECK();
    return C;
}
"""

cpp_src = "at::Tensor matmul_bf16(at::Tensor A, at::Tensor B);"

_ext = load_inline(
    name="kb_l1_matmul_bf16_mma",
    cpp_sources=cpp_src,
    cuda_sources=cuda_src,
    functions=["matmul_bf16"],
    extra_cuda_cflags=["-O3"],
    verbose=False,
)


def _pad_cols(t, mult):
    """Zero columns up to a multiple of `mult` (the kernel's 16-byte rows); zeros add nothing to a dot product."""
    extra = -t.shape[-1] % mult
    return torch.nn.functional.pad(t, (0, extra)) if extra else t


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, A, B):
        N = B.shape[-1]
        if A.shape[-1] % 8 or N % 8:     # other sizes: K and N zero-padded to the kernel's multiple of 8
            return _ext.matmul_bf16(_pad_cols(A, 8), _pad_cols(_pad_cols(B, 8).mT, 8).mT.contiguous())[:, :N]
        return _ext.matmul_bf16(A, B)
