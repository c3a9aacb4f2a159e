"""L2/101 per-token mix of fake-int8 x and x, then Linear: fast candidate, ONE fused launch.

Idea. One kernel launched as clusters of 8 CTAs (sm_90 thread-block clusters, no sm_90a feature), each
CTA owning 8 tokens. The whole-tensor max|x| is needed by every token, so each cluster computes it
itself: every CTA of the cluster reduces 1/8 of x (32 KB) and the 8 partial maxima are exchanged through
distributed shared memory (cluster barrier + mapa), so no second launch, no atomics, no reset.
Meanwhile the 128x128 weight (64 KB) streams into shared memory with cp.async. Each CTA then builds its
8 mixed rows in shared memory with torch's exact rounding sequence: scale = max(m, 1e-8) * (1/127)
(torch multiplies by the reciprocal of a CPU scalar), q = rint(x / scale) (true IEEE division, half to
even), clamp, * scale, alpha * x_q + (1 - alpha) * x with every product/sum rounded separately (no FMA
contraction), and does the 8 x 128 x 128 matvec from shared memory; the mixed tensor never hits memory.
Floor: eager 92 us is launch-bound; data is only 256 KB x + 64 KB W + 256 KB out (~0.2 us at HBM speed),
so the floor is one launch (~2-3 us as CUDA events see it). Predicted: ~4 us (about 20x eager).
Measured (H200, kbench check, results/H200/check-101-20261130-072927.jsonl): 13.2 us vs eager 207.3 us,
14.07x [13.13, 14.99] (9.69x vs torch.compile); exact (max err 0). Eager is ~15 host-bound launches.
Measured (H200, 2026-12-04, results/H200/bench-20261204-s18.jsonl): 20.3 µs per call, 12.62x eager [11.27,
14.00], 10.01x torch.compile; 0.01 of the roofline floor (0.2 µs).
"""
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

CUDA_SRC = r"""
#include <torch/extension.h>
#include <c10/cuda/CUDAStream.h>
#include <c10/cuda/CUDAException.h>
#include <cooperative_groups.h>
#include <stdint.h>

namespace cg = cooperative_groups;

namespace {

constexpr int CLUSTER = 8;     // CTAs per cluster (portable maximum)
constexpr int TPB = 8;         // tokens per CTA
constexpr int THREADS = 256;

// max and clamp that keep NaN, as torch.max and torch.clamp do (fmaxf/fminf drop it)
__device__ __forceinline__ float nan_max(float a, float b) { return (a > b || a != a) ? a : b; }
__device__ __forceinline__ float nan_clamp(float v, float lo, float hi) { return v < lo ? lo : (v > hi ? hi : v); }

__device__ __forceinline__ void cp_async16(void* dst, const void* src) {
    const uint32_t d = static_cast<uint32_t>(__cvta_generic_to_shared(dst));
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" :: "r"(d), "l"(src));
}

__device__ __forceinline__ float block_max(float v, float* red) {
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) v = nan_max(v, __shfl_xor_sync(0xffffffffu, v, o));
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    if (lane == 0) red[warp] = v;
    __syncthreads();
    if (warp == 0) {
        v = lane < (THREADS / 32) ? red[lane] : 0.f;
#pragma unroll
        for (int o = 16; o > 0; o >>= 1) v = nan_max(v, __shfl_xor_sync(0xffffffffu, v, o));
        if (lane == 0) red[0] = v;
    }
    __syncthreads();
    return red[0];
}

// x: (ntok, D), logits: (ntok), w: (N, D), b: (N), out: (ntok, N). Dynamic smem: W [N][D+4], mixed [TPB][D].
__global__ void __cluster_dims__(CLUSTER, 1, 1) __launch_bounds__(THREADS)
layoutmix_fakeint8_linear(const float* __restrict__ x, const float* __restrict__ logits,
                          const float* __restrict__ w, const float* __restrict__ bias,
                          float* __restrict__ out, int ntok, int D, int N) {
    extern __shared__ __align__(16) float smem[];
    __shared__ float red[THREADS / 32];
    __shared__ float cta_max;
    const int DP = D + 4;
    float* Ws = smem;                 // [N][DP]
    float* mixed = smem + N * DP;     // [TPB][D]
    const int tid = threadIdx.x;

    // 1. start streaming W into shared memory
    const int d4 = D / 4;
    for (int i = tid; i < N * d4; i += THREADS) {
        const int r = i / d4, c = (i - r * d4) * 4;
        cp_async16(Ws + r * DP + c, w + (size_t)r * D + c);
    }
    asm volatile("cp.async.commit_group;\n" ::);

    // 2. this CTA's share of max|x| (x has ntok*D elements, a multiple of 4)
    cg::cluster_group cluster = cg::this_cluster();
    const int rank = (int)cluster.block_rank();
    const long n4 = (long)ntok * D / 4;
    const long per = (n4 + CLUSTER - 1) / CLUSTER;
    const long beg = per * rank, end = min(n4, beg + per);
    const float4* x4 = reinterpret_cast<const float4*>(x);
    float m = 0.f;
    for (long i = beg + tid; i < end; i += THREADS) {
        const float4 v = __ldg(x4 + i);
        m = nan_max(m, nan_max(nan_max(fabsf(v.x), fabsf(v.y)), nan_max(fabsf(v.z), fabsf(v.w))));
    }
    m = block_max(m, red);
    if (tid == 0) cta_max = m;
    cluster.sync();                       // partial maxima visible cluster-wide
    float gmax = 0.f;
#pragma unroll
    for (int r = 0; r < CLUSTER; ++r) gmax = nan_max(gmax, *cluster.map_shared_rank(&cta_max, r));
    // nobody may exit before every CTA has read its neighbours' cta_max: arrive now, wait at the end
    asm volatile("barrier.cluster.arrive.release.aligned;\n" ::: "memory");

    // 3. scale exactly as torch: clamp_min(1e-8) then multiply by the float reciprocal of 127
    const float scale = __fmul_rn(nan_max(gmax, 1e-8f), 1.0f / 127.0f);

    // 4. build the mixed rows of this CTA's tokens
    const int tok0 = blockIdx.x * TPB;
    for (int i = tid; i < TPB * D; i += THREADS) {
        const int t = i / D, k = i - t * D;
        const int tok = tok0 + t;
        float v = 0.f;
        if (tok < ntok) {
            const float xv = x[(size_t)tok * D + k];
            const float l = logits[tok];
            const float a = __fdiv_rn(1.0f, __fadd_rn(1.0f, expf(-l)));
            float q = rintf(__fdiv_rn(xv, scale));
            q = nan_clamp(q, -127.0f, 127.0f);
            const float xq = __fmul_rn(q, scale);
            v = __fadd_rn(__fmul_rn(a, xq), __fmul_rn(__fsub_rn(1.0f, a), xv));
        }
        mixed[i] = v;
    }
    asm volatile("cp.async.wait_all;\n" ::);
    __syncthreads();

    // 5. out[tok][j] = bias[j] + sum_k mixed[tok][k] * W[j][k]
    constexpr int HALF = TPB / 2;
    for (int jj = tid % 128; jj < N; jj += 128) {
        const int tg = tid / 128;   // token group: tokens tg*HALF .. tg*HALF+HALF-1 (THREADS == 256)
        float acc[HALF];
#pragma unroll
        for (int t = 0; t < HALF; ++t) acc[t] = 0.f;
        const float4* wr = reinterpret_cast<const float4*>(Ws + jj * DP);
        for (int k4 = 0; k4 < d4; ++k4) {
            const float4 wv = wr[k4];
#pragma unroll
            for (int t = 0; t < HALF; ++t) {
                const float4 mv = reinterpret_cast<const float4*>(mixed + (tg * HALF + t) * D)[k4];
                acc[t] = fmaf(mv.x, wv.x, acc[t]);
                acc[t] = fmaf(mv.y, wv.y, acc[t]);
                acc[t] = fmaf(mv.z, wv.z, acc[t]);
                acc[t] = fmaf(mv.w, wv.w, acc[t]);
            }
        }
        const float bj = bias[jj];
#pragma unroll
        for (int t = 0; t < HALF; ++t) {
            const int tok = tok0 + tg * HALF + t;
            if (tok < ntok) out[(size_t)tok * N + jj] = acc[t] + bj;
        }
    }
    asm volatile("barrier.cluster.wait.acquire.aligned;\n" ::: "memory");
}

}  // namespace

torch::Tensor layoutmix_linear(torch::Tensor x, torch::Tensor logits, torch::Tensor w, torch::Tensor b) {
    TORCH_CHECK(x.is_cuda() && logits.is_cuda() && w.is_cuda() && b.is_cuda(), "CUDA tensors expected");
    TORCH_CHECK(x.scalar_type() == torch::kFloat32 && logits.scalar_type() == torch::kFloat32 &&
                w.scalar_type() == torch::kFloat32 && b.scalar_type() == torch::kFloat32, "float32 expected");
    TORCH_CHECK(x.is_contiguous() && logits.is_contiguous() && w.is_contiguous() && b.is_contiguous(),
                "contiguous tensors expected");
    TORCH_CHECK(x.dim() == 3 && logits.dim() == 2 && x.size(0) == logits.size(0) && x.size(1) == logits.size(1),
                "x (B,T,D) and layout_logits (B,T) expected");
    const int D = x.size(2), N = w.size(0);
    const long ntok = x.size(0) * x.size(1);
    TORCH_CHECK(w.dim() == 2 && w.size(1) == D && b.dim() == 1 && b.size(0) == N, "weight (N,D), bias (N) expected");
    TORCH_CHECK(((uintptr_t)x.data_ptr() | (uintptr_t)w.data_ptr()) % 16 == 0, "x and weight must be 16-byte aligned");
    TORCH_CHECK(D % 4 == 0 && D > 0, "D must be a positive multiple of 4");
    TORCH_CHECK(ntok > 0 && ntok < (1L << 30), "token count out of range");
    const size_t smem = ((size_t)N * (D + 4) + (size_t)TPB * D) * sizeof(float);
    TORCH_CHECK(smem <= 200 * 1024, "weight too large for the shared-memory resident kernel");
    auto out = torch::empty({x.size(0), x.size(1), (long)N}, x.options());
    const int nblk = (int)((ntok + TPB - 1) / TPB);
    const int grid = (nblk + CLUSTER - 1) / CLUSTER * CLUSTER;
    static size_t smem_set = 48 * 1024;   // raise the opt-in limit once, not on every call
    if (smem > smem_set) {
        C10_CUDA_CHECK(cudaFuncSetAttribute(layoutmix_fakeint8_linear, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem));
        smem_set = smem;
    }
    layoutmix_fakeint8_linear<<<grid, THREADS, smem, c10::cuda::getCurrentCUDAStream()>>>(
        x.data_ptr<float>(), logits.data_ptr<float>(), w.data_ptr<float>(), b.data_ptr<float>(),
        out.data_ptr<float>(), (int)ntok, D, N);
    C10_CUDA_KERNEL_LAUNCH_CHECK();
    return out;
}
"""

CPP_SRC = "torch::Tensor layoutmix_linear(torch::Tensor x, torch::Tensor logits, torch::Tensor w, torch::Tensor b);"

_ext = load_inline(
    name="l2_101_fast_cluster",
    cpp_sources=CPP_SRC,
    cuda_sources=CUDA_SRC,
    functions=["layoutmix_linear"],
    extra_cuda_cflags=["-O3", "-Xptxas=-v"],
    verbose=False,
)


def _pad_cols(t, mult):
    """Zero columns up to a multiple of `mult` (the kernel's 16-byte rows); zeros add nothing to a dot product."""
    extra = -t.shape[-1] % mult
    return torch.nn.functional.pad(t, (0, extra)) if extra else t


class ModelNew(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.proj = nn.Linear(dim, dim)

    def forward(self, x, layout_logits):
        # other D: x and the weight's columns zero-padded to a multiple of 4 (a zero changes neither max|x| nor
        # any dot product)
        return _ext.layoutmix_linear(_pad_cols(x.contiguous(), 4), layout_logits.contiguous(),
                                     _pad_cols(self.proj.weight, 4), self.proj.bias)
