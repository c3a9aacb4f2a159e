"""L2/56 Linear -> sigmoid -> row sum, simple candidate: tiled fp32 SIMT GEMM with a fused epilogue.

Idea. Classic shared-memory tiled SGEMM (CTA tile 128 rows x 64 columns, K step 16, each of the 256
threads computes an 8x4 block with fp32 FMAs), then bias + sigmoid in registers and per-row partial
sums of the CTA's 64 columns (in double) written to a (N/64, M) buffer; a second small kernel adds the
partials of each row in double. The 128x32768 pre-activation matrix never reaches memory, and no fp32
atomics are used (atomicAdd of 512 partials into values near 16384 would cost ~3e-7 relative error,
about 8x the fp32 reference's own error against fp64).
Floor: 4.29 GB of W at 4.2 TB/s = 1.02 ms; 275 GFLOP fp32 at ~67 TFLOP/s SIMT peak = 4.1 ms, so this
is compute-bound; expected ~7-10 ms (a straightforward SIMT kernel reaches 40-60% of SIMT peak).
Measured (H200, kbench check, results/H200/check-56-20261130-072927.jsonl): 15.58 ms vs eager 5.30 ms, 0.34x;
fp64-oracle error 1.8e-8 (reference 2.9e-8). Kept as the plain SIMT baseline the fast ones are judged by.
Measured (H200, 2026-12-04, results/H200/bench-20261204-s18.jsonl): 15.42 ms per call, 0.35x eager [0.34,
0.35], 0.35x torch.compile; 0.14 of the roofline floor (2.10 ms).
"""
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

CUDA_SRC = r"""
#include <torch/extension.h>
#include <c10/cuda/CUDAStream.h>
#include <c10/cuda/CUDAException.h>

namespace {

constexpr int BM = 128, BN = 64, BK = 16, TM = 8, TN = 4, THREADS = 256;

// C = x (M,K) . W^T with W (N,K); block (bx, by) computes rows by*BM.., columns bx*BN..
__global__ void __launch_bounds__(THREADS)
sgemm_sigmoid_rowsum(const float* __restrict__ x, const float* __restrict__ w,
                     const float* __restrict__ bias, double* __restrict__ partial,
                     int M, int N, int K) {
    __shared__ float As[BK][BM + 4];   // As[k][m]
    __shared__ float Bs[BK][BN + 4];   // Bs[k][n]
    __shared__ double red[BN / TN][BM];
    const int tid = threadIdx.x;
    const int tx = tid % (BN / TN);    // 16 column groups
    const int ty = tid / (BN / TN);    // 16 row groups
    const int m0 = blockIdx.y * BM, n0 = blockIdx.x * BN;

    float acc[TM][TN];
    for (int i = 0; i < TM; ++i)
        for (int j = 0; j < TN; ++j) acc[i][j] = 0.f;

    for (int k0 = 0; k0 < K; k0 += BK) {
        // load A tile: BM x BK = 2048 values, 8 per thread
        for (int i = tid; i < BM * BK; i += THREADS) {
            const int r = i / BK, c = i % BK;
            const int gm = m0 + r, gk = k0 + c;
            As[c][r] = (gm < M && gk < K) ? x[(size_t)gm * K + gk] : 0.f;
        }
        // load B tile: BN x BK = 1024 values, 4 per thread
        for (int i = tid; i < BN * BK; i += THREADS) {
            const int r = i / BK, c = i % BK;
            const int gn = n0 + r, gk = k0 + c;
            Bs[c][r] = (gn < N && gk < K) ? w[(size_t)gn * K + gk] : 0.f;
        }
        __syncthreads();
#pragma unroll
        for (int k = 0; k < BK; ++k) {
            float a[TM], b[TN];
#pragma unroll
            for (int i = 0; i < TM; ++i) a[i] = As[k][ty * TM + i];
#pragma unroll
            for (int j = 0; j < TN; ++j) b[j] = Bs[k][tx * TN + j];
#pragma unroll
            for (int i = 0; i < TM; ++i)
#pragma unroll
                for (int j = 0; j < TN; ++j) acc[i][j] = fmaf(a[i], b[j], acc[i][j]);
        }
        __syncthreads();
    }

    for (int i = 0; i < TM; ++i) {
        double s = 0.0;
        for (int j = 0; j < TN; ++j) {
            const int n = n0 + tx * TN + j;
            if (n < N) {
                const float v = acc[i][j] + bias[n];
                s += (double)(1.0f / (1.0f + expf(-v)));
            }
        }
        red[tx][ty * TM + i] = s;
    }
    __syncthreads();
    if (tid < BM && m0 + tid < M) {
        double s = 0.0;
        for (int j = 0; j < BN / TN; ++j) s += red[j][tid];
        partial[(size_t)blockIdx.x * M + m0 + tid] = s;
    }
}

__global__ void sum_partials(const double* __restrict__ partial, float* __restrict__ out, int nblk, int M) {
    const int row = blockIdx.x * blockDim.x + threadIdx.x;
    if (row >= M) return;
    double s = 0.0;
    for (int i = 0; i < nblk; ++i) s += partial[(size_t)i * M + row];
    out[row] = (float)s;
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
    TORCH_CHECK(M > 0 && N > 0, "empty shapes unsupported");
    auto out = torch::empty({M, 1}, x.options());
    const int nblk = (N + BN - 1) / BN;
    auto partial = torch::empty({(long)nblk, (long)M}, x.options().dtype(torch::kFloat64));
    auto stream = c10::cuda::getCurrentCUDAStream();
    dim3 grid(nblk, (M + BM - 1) / BM);
    sgemm_sigmoid_rowsum<<<grid, THREADS, 0, stream>>>(
        x.data_ptr<float>(), w.data_ptr<float>(), b.data_ptr<float>(), partial.data_ptr<double>(), M, N, K);
    C10_CUDA_KERNEL_LAUNCH_CHECK();
    sum_partials<<<(M + 127) / 128, 128, 0, stream>>>(partial.data_ptr<double>(), out.data_ptr<float>(), nblk, M);
    C10_CUDA_KERNEL_LAUNCH_CHECK();
    return out;
}
"""

CPP_SRC = "torch::Tensor linear_sigmoid_rowsum(torch::Tensor x, torch::Tensor w, torch::Tensor b);"

_ext = load_inline(
    name="l2_56_simple_sgemm",
    cpp_sources=CPP_SRC,
    cuda_sources=CUDA_SRC,
    functions=["linear_sigmoid_rowsum"],
    extra_cuda_cflags=["-O3", "-Xptxas=-v"],
    verbose=False,
)


class ModelNew(nn.Module):
    def __init__(self, input_size, hidden_size):
        super().__init__()
        self.linear = nn.Linear(input_size, hidden_size)

    def forward(self, x):
        return _ext.linear_sigmoid_rowsum(x.contiguous(), self.linear.weight, self.linear.bias)
