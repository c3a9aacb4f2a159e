"""fp32 SIMT GEMM C = A @ B: 128 x 128 x 8 block tiles, 8 x 8 outputs per thread, double buffer.

Idea: classic register-blocked SGEMM. 256 threads; each k-step loads a 128 x 8 slab of A (stored
transposed, padded to avoid bank conflicts) and an 8 x 128 slab of B into shared memory with 16-byte
loads, prefetching the next slab into registers while the current one is consumed; each thread
reads two float4 of A and two of B per k and does 64 FMAs. Plain fp32 FMA, so accuracy matches
cuBLAS fp32 (no TF32). Bounds-checked scalar loads/stores when M, N are not multiples of 128 or K
of 8.
Why kept although it is expected SLOWER than eager (~0.6-0.8x): with TF32 off, eager is cuBLAS's
tuned fp32 SIMT kernel at ~85-90% of the 67 TFLOP/s FMA peak; a hand SIMT kernel cannot beat that
without lower precision (TF32/bf16, flagged "precision"). It is the honest fp32 baseline of the suite.
Measured (H200, results/H200/bench-20261130-072328.jsonl): 3.075 ms vs eager 2.687 ms, 0.87x [0.87, 0.87];
the 3xTF32 tf32x3_fragperm*.py candidates beside it are the fast ones (1.17-1.20x).
Measured (H200, 2026-12-04, results/H200/bench-20261204-s18.jsonl): 3.08 ms per call, 0.88x eager [0.87,
0.89], 0.90x torch.compile; 0.34 of the roofline floor (1.05 ms).
"""
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cuda_src = r"""
#include <ATen/ATen.h>
#include <c10/cuda/CUDAStream.h>
#include <c10/cuda/CUDAException.h>
#include <cuda_runtime.h>

constexpr int BM = 128, BN = 128, BK = 8, APAD = 4;

template <bool CHECK>
__global__ void __launch_bounds__(256, 2) sgemm128(const float* __restrict__ A, const float* __restrict__ B,
                                                  float* __restrict__ C, int M, int N, int K) {
    __shared__ __align__(16) float As[2][BK][BM + APAD];
    __shared__ __align__(16) float Bs[2][BK][BN];
    const int tid = threadIdx.x;
    const int bm = blockIdx.y * BM, bn = blockIdx.x * BN;
    const int a_row = tid >> 1, a_k = (tid & 1) * 4;    // A slab: 128 rows x 8 k
    const int b_k = tid >> 5, b_col = (tid & 31) * 4;   // B slab: 8 k x 128 cols
    const int tx = tid & 15, ty = tid >> 4;
    float acc[8][8];
#pragma unroll
    for (int i = 0; i < 8; ++i)
#pragma unroll
        for (int j = 0; j < 8; ++j) acc[i][j] = 0.f;
    float ra[4], rb[4];

    auto load = [&](int k0) {
        const int gm = bm + a_row, gka = k0 + a_k;
        const int gkb = k0 + b_k, gn = bn + b_col;
        if (!CHECK) {
            float4 t = __ldg(reinterpret_cast<const float4*>(A + (size_t)gm * K + gka));
            ra[0] = t.x; ra[1] = t.y; ra[2] = t.z; ra[3] = t.w;
            float4 u = __ldg(reinterpret_cast<const float4*>(B + (size_t)gkb * N + gn));
            rb[0] = u.x; rb[1] = u.y; rb[2] = u.z; rb[3] = u.w;
        } else {
#pragma unroll
            for (int j = 0; j < 4; ++j) {
                ra[j] = (gm < M && gka + j < K) ? __ldg(A + (size_t)gm * K + gka + j) : 0.f;
                rb[j] = (gkb < K && gn + j < N) ? __ldg(B + (size_t)gkb * N + gn + j) : 0.f;
            }
        }
    };
    auto store = [&](int buf) {
#pragma unroll
        for (int j = 0; j < 4; ++j) As[buf][a_k + j][a_row] = ra[j];
        *reinterpret_cast<float4*>(&Bs[buf][b_k][b_col]) = make_float4(rb[0], rb[1], rb[2], rb[3]);
    };

    const int nk = (K + BK - 1) / BK;
    load(0);
    store(0);
    __syncthreads();
    for (int kt = 0; kt < nk; ++kt) {
        const int cur = kt & 1;
        if (kt + 1 < nk) load((kt + 1) * BK);
#pragma unroll
        for (int k = 0; k < BK; ++k) {
            const float4 a0 = *reinterpret_cast<const float4*>(&As[cur][k][ty * 4]);
            const float4 a1 = *reinterpret_cast<const float4*>(&As[cur][k][64 + ty * 4]);
            const float4 b0 = *reinterpret_cast<const float4*>(&Bs[cur][k][tx * 4]);
            const float4 b1 = *reinterpret_cast<const float4*>(&Bs[cur][k][64 + tx * 4]);
            const float a[8] = {a0.x, a0.y, a0.z, a0.w, a1.x, a1.y, a1.z, a1.w};
            const float b[8] = {b0.x, b0.y, b0.z, b0.w, b1.x, b1.y, b1.z, b1.w};
#pragma unroll
            for (int i = 0; i < 8; ++i)
#pragma unroll
                for (int j = 0; j < 8; ++j) acc[i][j] = fmaf(a[i], b[j], acc[i][j]);
        }
        if (kt + 1 < nk) store(cur ^ 1);
        __syncthreads();
    }
#pragma unroll
    for (int i = 0; i < 8; ++i) {
        const int gm = bm + (i < 4 ? ty * 4 + i : 64 + ty * 4 + (i - 4));
#pragma unroll
        for (int h = 0; h < 2; ++h) {
            const int gn = bn + h * 64 + tx * 4;
            if (!CHECK) {
                *reinterpret_cast<float4*>(C + (size_t)gm * N + gn) =
                    make_float4(acc[i][h * 4 + 0], acc[i][h * 4 + 1], acc[i][h * 4 + 2], acc[i][h * 4 + 3]);
            } else if (gm < M) {
#pragma unroll
                for (int j = 0; j < 4; ++j)
                    if (gn + j < N) C[(size_t)gm * N + gn + j] = acc[i][h * 4 + j];
            }
        }
    }
}

static bool al16(const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; }

at::Tensor matmul_fp32(at::Tensor A, at::Tensor B) {
    TORCH_CHECK(A.is_cuda() && B.is_cuda() && A.scalar_type() == at::kFloat && B.scalar_type() == at::kFloat,
                "matmul: expected CUDA float32 tensors");
    TORCH_CHECK(A.dim() == 2 && B.dim() == 2 && A.size(1) == B.size(0), "matmul: expected [M,K] @ [K,N]");
    A = A.contiguous();
    B = B.contiguous();
    const int64_t M = A.size(0), K = A.size(1), N = B.size(1);
    TORCH_CHECK(M < (1LL << 31) && N < (1LL << 31) && K < (1LL << 31), "matmul: too large");
    auto C = at::empty({M, N}, A.options());
    if (M == 0 || N == 0) return C;
    if (K == 0) return C.zero_();
    const int64_t gy = (M + BM - 1) / BM;
    TORCH_CHECK(gy < 65536, "matmul: M too large for this kernel");
    dim3 grid((unsigned)((N + BN - 1) / BN), (unsigned)gy);
    auto stream = c10::cuda::getCurrentCUDAStream();
    const bool fast = M % BM == 0 && N % BN == 0 && K % BK == 0 && al16(A.data_ptr()) && al16(B.data_ptr()) &&
                      al16(C.data_ptr());
    if (fast)
        sgemm128<false><<<grid, 256, 0, stream>>>(A.data_ptr<float>(), B.data_ptr<float>(), C.data_ptr<float>(), (int)M, (int)N, (int)K);
    else
        sgemm128<true><<<grid, 256, 0, stream>>>(A.data_ptr<float>(), B.data_ptr<float>(), C.data_ptr<float>(), (int)M, (int)N, (int)K);
    C10_CUDA_KERNEL_LAUNCH_CHECK();
    return C;
}
"""

cpp_src = "at::Tensor matmul_fp32(at::Tensor A, at::Tensor B);"

_ext = load_inline(
    name="kb_l1_matmul_fp32_simt128",
    cpp_sources=cpp_src,
    cuda_sources=cuda_src,
    functions=["matmul_fp32"],
    extra_cuda_cflags=["-O3"],
    verbose=False,
)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, A, B):
        return _ext.matmul_fp32(A, B)
