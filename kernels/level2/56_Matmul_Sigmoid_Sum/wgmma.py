"""L2/56 Linear -> sigmoid -> row sum on Hopper warpgroup MMA: TF32 main product + BF16 correction, W in registers.

Idea. out[b] = sum_j sigmoid(x[b,:] . W[j,:] + bias[j]), x 128 x 32768, W 32768 x 32768 (4.3 GB, read once).
The product is computed transposed, out^T = W . x^T, so that W is wgmma's A operand and can come from
registers: each consumer thread ldmatrix-loads its W fragment from the TMA-filled stage, splits it in
registers (W_hi = W with the 13 low mantissa bits cleared, an exact tf32 value; W_lo = W - W_hi exactly)
and issues, per 8-wide k chunk, one wgmma m64n128k8 tf32 (W_hi . x_hi) and one wgmma m64n128k16 bf16 whose
16 k-slots hold the two correction products [W_lo, W] . [x, x_lo] (the same split and pairing as fast.py,
whose accuracy was measured at 0.6x the fp32 reference's fp64 error). W never goes back to shared memory.
x is small (16 MB) and is prepared once per call by a pre-pass into the two B operands the wgmmas read
from shared memory: x_hi (fp32 holding tf32 values) and xcat (bf16, per 8-chunk the slots
x[0],x[4],x[1],x[5],x[2],x[6],x[3],x[7], then x_lo in the same order: the k order each thread's W fragment
pairs with, so no shuffles are needed).
CTA: 384 threads = a producer warpgroup (one thread issues TMA: W box 32(k) x 128(rows), evict-first;
x_hi and xcat boxes, evict-last) and two consumer warpgroups, each owning 64 W rows x 128 batch rows.
With CLUSTER = 2 the two CTAs of a cluster work on neighbouring W row blocks and share x: each loads half
of the x rows and multicasts it to both, halving x's L2 traffic (x is re-read by every CTA: without
multicast it is as many bytes again as W). Each stage's products go to a register tile started with
scale-d = 0 and are added to the fp32 accumulator with one IEEE add per stage (the tensor core's own
accumulation is not round-to-nearest: fast.py measured 5.9x the reference's error without it).
Epilogue: bias + sigmoid (accurate expf), per-batch-row sums in double over the CTA's 128 W rows, one
double partial per (row block, batch row); a second kernel adds the partials of a row in double, and a
third recomputes any row of x that holds inf/NaN (the split of an inf is NaN), as in fast.py.
Floor: W read once, 4.29 GB / 4.2 TB/s = 1.02 ms; tensor work one tf32 pass + one bf16 pass of twice
the k = 2 x 0.56 ms = 1.11 ms at the dense peaks. Prediction: ~1.6-1.9 ms (60-70% of peak), 2.8-3.3x eager.
Measured (H200): first version (scalar prep_x stores) in kbench bench --all --config configs/quick.yaml
(results/H200/pytest-gpu-20261203-s11.txt): 1.99 ms vs eager 5.45 ms, 2.74x [2.73, 2.76], fp32 class (fp64
error 3.6e-8 vs the reference's 5.0e-8), custom share 100% (prep_x 6% of it), no flag. This version
(results/H200/dev56-20261203-s11.txt, scripts/dev_kernel_56.py, CUDA events): 1.87 ms, 2.85x; CLUSTER = 1
1.94 ms, 4 2.41 ms (the 4-CTA multicast costs more than the L2 traffic it saves), the bf16 and tf32 wgmmas
grouped per stage instead of alternating 1.98 ms; without the correction 1.26 ms. 1.87 ms is 57% of the
tensor peak, 55% of SOL by the memory floor. This version in the whole-suite run with both baselines
(results/H200/bench-20261203-s12.jsonl, quick.yaml): 1.88 ms vs eager 5.45 ms, 2.90x [2.88, 2.91], 2.98x over
torch.compile, fp32 class, every generalisation class passed, no flag (54% of SOL). Written, not yet run on a GPU: PIPELINE = True splits the next
stage's fragments while this stage's wgmmas run (ptxas allocates past the launch bound's 168 registers inside
the consumers' setmaxnreg region: no spills; `python3 scripts/dev_kernel_56.py --variants cl2,cl2-pipe`).
Measured (H200, 2026-12-04, results/H200/bench-20261204-s18.jsonl): 1.91 ms per call, 2.82x eager [2.80,
2.85], 2.84x torch.compile; 1.10 of the roofline floor (2.10 ms).
"""
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

CLUSTER = 2   # CTAs sharing one x tile by TMA multicast (1 = no cluster)
PIPELINE = False   # overlap the next stage's fragment split with this stage's wgmmas (not yet run on a GPU)

_D64 = ", ".join(f"%{i}" for i in range(64))
_DOPS = ", ".join(f'"+f"(d[{i}])' for i in range(64))


def _wgmma_rs(name, shape, types, tail):
    return (
        f"__device__ __forceinline__ void {name}(float (&d)[64], const uint32_t (&a)[4], uint64_t db, int scale_d) {{\n"
        "    asm volatile(\n"
        '        "{\\n.reg .pred p;\\nsetp.ne.b32 p, %69, 0;\\n"\n'
        f'        "wgmma.mma_async.sync.aligned.{shape}.f32.{types} "\n'
        f'        "{{{_D64}}}, {{%64, %65, %66, %67}}, %68, p, 1, 1{tail};\\n}}\\n"\n'
        f"        : {_DOPS}\n"
        '        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(db), "r"(scale_d));\n'
        "}\n"
    )


_WGMMA_FNS = (_wgmma_rs("wgmma_tf32", "m64n128k8", "tf32.tf32", "")
              + _wgmma_rs("wgmma_bf16", "m64n128k16", "bf16.bf16", ", 0"))   # B K-major: no transpose

CUDA_SRC = r"""
#include <ATen/ATen.h>
#include <c10/cuda/CUDAStream.h>
#include <c10/cuda/CUDAException.h>
#include <cuda.h>            // CUtensorMap types/enums only (entry point fetched at run time, no -lcuda)
#include <cuda_runtime.h>
#include <cuda_bf16.h>
#include <cstdint>

namespace {

constexpr int CL = @@CLUSTER@@;
constexpr bool PIPE = @@PIPELINE@@;     // split the next stage's fragments while this stage's wgmmas run
constexpr int BN = 128;                 // W rows per CTA (MMA M: 2 consumer warpgroups x 64)
constexpr int BM = 128;                 // batch rows per CTA (MMA N)
constexpr int BK = 32;                  // k per stage
constexpr int STAGES = 4;
constexpr int THREADS = 384;
constexpr int SLICE = BM / CL;          // x rows each CTA of a cluster loads and multicasts
constexpr int W_BYTES = BN * BK * 4;    // 16384: 128 rows of 128 B
constexpr int X_BYTES = BM * BK * 4;    // 16384: x_hi, 128 rows of 128 B
constexpr int C_BYTES = BM * BK * 4;    // 16384: xcat, 128 rows of 64 bf16 slots
constexpr int STAGE_BYTES = W_BYTES + X_BYTES + C_BYTES;
constexpr int SMEM_BYTES = STAGES * STAGE_BYTES + 1024;

#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
__device__ __forceinline__ uint32_t smem_u32(const void* p) { return static_cast<uint32_t>(__cvta_generic_to_shared(p)); }
__device__ __forceinline__ void mbar_init(uint32_t bar, uint32_t count) {
    asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" :: "r"(bar), "r"(count) : "memory");
}
__device__ __forceinline__ void mbar_arrive_expect_tx(uint32_t bar, uint32_t bytes) {
    asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" :: "r"(bar), "r"(bytes) : "memory");
}
// arrive on the barrier at the same offset in CTA `rank` of the cluster (itself included)
__device__ __forceinline__ void mbar_arrive_cluster(uint32_t bar, uint32_t rank) {
    asm volatile("{\n.reg .b32 ra;\nmapa.shared::cluster.u32 ra, %0, %1;\n"
                 "mbarrier.arrive.shared::cluster.b64 _, [ra];\n}\n" :: "r"(bar), "r"(rank) : "memory");
}
__device__ __forceinline__ void mbar_wait(uint32_t bar, uint32_t parity) {
    uint32_t done;
    do {
        asm volatile("{\n.reg .pred p;\nmbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\nselp.u32 %0, 1, 0, p;\n}\n"
                     : "=r"(done) : "r"(bar), "r"(parity) : "memory");
    } while (!done);
}
__device__ __forceinline__ void tma_load(uint32_t dst, const CUtensorMap* map, int c0, int c1, uint32_t bar, uint64_t pol) {
    asm volatile("cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes.L2::cache_hint"
                 " [%0], [%1, {%2, %3}], [%4], %5;\n"
                 :: "r"(dst), "l"(reinterpret_cast<uint64_t>(map)), "r"(c0), "r"(c1), "r"(bar), "l"(pol) : "memory");
}
__device__ __forceinline__ void tma_load_mc(uint32_t dst, const CUtensorMap* map, int c0, int c1, uint32_t bar,
                                            uint16_t mask, uint64_t pol) {
    asm volatile("cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes.multicast::cluster"
                 ".L2::cache_hint [%0], [%1, {%2, %3}], [%4], %5, %6;\n"
                 :: "r"(dst), "l"(reinterpret_cast<uint64_t>(map)), "r"(c0), "r"(c1), "r"(bar), "h"(mask), "l"(pol)
                 : "memory");
}
__device__ __forceinline__ void cluster_sync() {
    asm volatile("barrier.cluster.arrive.release.aligned;\nbarrier.cluster.wait.acquire.aligned;\n" ::: "memory");
}
__device__ __forceinline__ uint32_t cluster_rank() {
    uint32_t r;
    asm volatile("mov.u32 %0, %%cluster_ctarank;\n" : "=r"(r));
    return r;
}
// K-major operand, 128-byte swizzle: rows of 128 B, 8-row groups 1024 B apart (SBO); LBO unused
__device__ __forceinline__ uint64_t make_desc(uint32_t saddr) {
    return (uint64_t)((saddr & 0x3FFFF) >> 4) | ((uint64_t)1 << 16) | ((uint64_t)(1024 >> 4) << 32) | ((uint64_t)1 << 62);
}
__device__ __forceinline__ void ldmatrix_x4(uint32_t addr, uint32_t (&r)[4]) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]) : "r"(addr));
}
__device__ __forceinline__ uint32_t pack_bf16(float lo, float hi) {   // lo -> low half (smaller k-slot), RN
    uint32_t d;
    asm("cvt.rn.bf16x2.f32 %0, %1, %2;\n" : "=r"(d) : "f"(hi), "f"(lo));
    return d;
}
__device__ __forceinline__ void wgmma_fence() { asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory"); }
__device__ __forceinline__ void wgmma_commit() { asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory"); }
__device__ __forceinline__ void wgmma_wait0() { asm volatile("wgmma.wait_group.sync.aligned 0;\n" ::: "memory"); }
__device__ __forceinline__ void fence_f(float (&d)[64]) {
#pragma unroll
    for (int i = 0; i < 64; ++i) asm volatile("" : "+f"(d[i]) :: "memory");
}
__device__ __forceinline__ void fence_u(uint32_t (&a)[4][4]) {
#pragma unroll
    for (int i = 0; i < 4; ++i)
#pragma unroll
        for (int j = 0; j < 4; ++j) asm volatile("" : "+r"(a[i][j]) :: "memory");
}
@@WGMMA@@
#endif

// bf16x2 with `lo` in the low half (the smaller k-slot), round to nearest
__device__ __forceinline__ uint32_t pack_bf16_host(float lo, float hi) {
    const __nv_bfloat162 p = __floats2bfloat162_rn(lo, hi);   // .x = lo (low half), .y = hi
    return *reinterpret_cast<const uint32_t*>(&p);
}

__global__ void probe_sm90a(int* out) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
    *out = 1;
#else
    *out = 2;
#endif
}

// x (M, K) -> x_hi (M, Kp) fp32 tf32 values and xcat (M, 2 Kp) bf16 (see the docstring); Kp % 8 == 0, zero tail.
// One thread per 8-group of a row: two 16-byte loads where the group is whole (K % 4 == 0, so rows are 16-byte
// aligned), 16-byte stores (the first version's scalar stores took 6% of the call).
__global__ void prep_x(const float* __restrict__ x, float* __restrict__ xhi, __nv_bfloat16* __restrict__ xcat,
                       int M, int K, int Kp) {
    const int gpr = Kp / 8;
    const long groups = (long)M * gpr;
    for (long gi = blockIdx.x * (long)blockDim.x + threadIdx.x; gi < groups; gi += (long)gridDim.x * blockDim.x) {
        const int m = (int)(gi / gpr), k0 = (int)(gi - (long)m * gpr) * 8;
        const float* src = x + (long)m * K + k0;
        float v[8], h[8], l[8];
        if (k0 + 8 <= K) {
            const float4 a = *reinterpret_cast<const float4*>(src), b = *reinterpret_cast<const float4*>(src + 4);
            v[0] = a.x; v[1] = a.y; v[2] = a.z; v[3] = a.w; v[4] = b.x; v[5] = b.y; v[6] = b.z; v[7] = b.w;
        } else {
#pragma unroll
            for (int i = 0; i < 8; ++i) v[i] = (k0 + i < K) ? src[i] : 0.f;
        }
#pragma unroll
        for (int i = 0; i < 8; ++i) {
            h[i] = __uint_as_float(__float_as_uint(v[i]) & 0xffffe000u);
            l[i] = v[i] - h[i];
        }
        float4* dh = reinterpret_cast<float4*>(xhi + (long)m * Kp + k0);
        dh[0] = make_float4(h[0], h[1], h[2], h[3]);
        dh[1] = make_float4(h[4], h[5], h[6], h[7]);
        uint4 c0, c1;   // slots 0..7: x[0], x[4], x[1], x[5], ...; slots 8..15: the same of x_lo
        c0.x = pack_bf16_host(v[0], v[4]); c0.y = pack_bf16_host(v[1], v[5]);
        c0.z = pack_bf16_host(v[2], v[6]); c0.w = pack_bf16_host(v[3], v[7]);
        c1.x = pack_bf16_host(l[0], l[4]); c1.y = pack_bf16_host(l[1], l[5]);
        c1.z = pack_bf16_host(l[2], l[6]); c1.w = pack_bf16_host(l[3], l[7]);
        uint4* dc = reinterpret_cast<uint4*>(xcat + (long)m * 2 * Kp + 2 * k0);
        dc[0] = c0;
        dc[1] = c1;
    }
}

__global__ void __launch_bounds__(THREADS, 1) @@CLUSTER_DIMS@@
wgmma_sigmoid_rowsum(const __grid_constant__ CUtensorMap tmW, const __grid_constant__ CUtensorMap tmX,
                     const __grid_constant__ CUtensorMap tmC, const float* __restrict__ bias,
                     double* __restrict__ partial, int M, int N, int Kp) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
    extern __shared__ unsigned char smem_raw[];
    __shared__ __align__(8) uint64_t full_bar[STAGES];
    __shared__ __align__(8) uint64_t empty_bar[STAGES];
    __shared__ double red[8][BM];

    const uint32_t base = (smem_u32(smem_raw) + 1023u) & ~1023u;
    const int tid = threadIdx.x, wg = tid >> 7;
    const int n0 = blockIdx.x * BN, m0 = blockIdx.y * BM;
    const int KT = (Kp + BK - 1) / BK;
    const uint32_t rank = (CL > 1) ? cluster_rank() : 0u;

    if (tid == 0) {
        for (int s = 0; s < STAGES; ++s) {
            mbar_init(smem_u32(&full_bar[s]), 1);
            mbar_init(smem_u32(&empty_bar[s]), 8 * CL);   // every consumer warp of every CTA that writes here
        }
        asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
    }
    if (CL > 1) cluster_sync(); else __syncthreads();

    if (wg == 0) {
        // ---------------- producer ----------------
        asm volatile("setmaxnreg.dec.sync.aligned.u32 40;\n");
        if (tid == 0) {
            uint64_t pol_first, pol_last;
            asm volatile("createpolicy.fractional.L2::evict_first.b64 %0, 1.0;\n" : "=l"(pol_first));
            asm volatile("createpolicy.fractional.L2::evict_last.b64 %0, 1.0;\n" : "=l"(pol_last));
            const int wrow = n0 < N ? n0 : 0;   // a cluster's padding CTA loads a real block; its sums are masked
            for (int kt = 0; kt < KT; ++kt) {
                const int s = kt % STAGES;
                if (kt >= STAGES) mbar_wait(smem_u32(&empty_bar[s]), (uint32_t)(((kt / STAGES) - 1) & 1));
                const uint32_t fb = smem_u32(&full_bar[s]);
                mbar_arrive_expect_tx(fb, STAGE_BYTES);
                const uint32_t sw = base + s * STAGE_BYTES, sx = sw + W_BYTES, sc = sx + X_BYTES;
                tma_load(sw, &tmW, kt * BK, wrow, fb, pol_first);
                const int r0 = (int)rank * SLICE;
                if (CL > 1) {   // a slice wholly past M loads real rows instead (their columns are never stored)
                    const int xr = m0 + r0 < M ? m0 + r0 : m0;
                    tma_load_mc(sx + r0 * 128, &tmX, kt * BK, xr, fb, (uint16_t)((1u << CL) - 1), pol_last);
                    tma_load_mc(sc + r0 * 128, &tmC, kt * 2 * BK, xr, fb, (uint16_t)((1u << CL) - 1), pol_last);
                } else {
                    tma_load(sx, &tmX, kt * BK, m0, fb, pol_last);
                    tma_load(sc, &tmC, kt * 2 * BK, m0, fb, pol_last);
                }
            }
        }
    } else {
        // ---------------- consumers ----------------
        asm volatile("setmaxnreg.inc.sync.aligned.u32 232;\n");
        const int c = wg - 1, t128 = tid & 127, warp = t128 >> 5, lane = tid & 31;
        const int g = lane >> 2, t = lane & 3;
        // ldmatrix.x4 lane address: matrix mi = lane/8 holds rows (mi&1)*8 + lane%8 of this warp's 16, k-chunk mi>>1
        const int mi = lane >> 3;
        const int lrow = c * 64 + warp * 16 + (mi & 1) * 8 + (lane & 7);
        float acc[64], part[64];
#pragma unroll
        for (int i = 0; i < 64; ++i) acc[i] = 0.f;

        // Stage kt's W fragment, split: hi = tf32 A operand, cr = bf16 k16 A operand (see the docstring).
        auto load_frags = [&](int kt, uint32_t (&hi)[4][4], uint32_t (&cr)[4][4]) {
            const int s = kt % STAGES;
            mbar_wait(smem_u32(&full_bar[s]), (uint32_t)((kt / STAGES) & 1));
            const uint32_t sw = base + s * STAGE_BYTES;
#pragma unroll
            for (int kk = 0; kk < 4; ++kk) {
                const int chunk = 2 * kk + (mi >> 1);
                uint32_t r[4];   // r0 = W[g][t], r1 = W[g+8][t], r2 = W[g][t+4], r3 = W[g+8][t+4] (k in this k8 chunk)
                ldmatrix_x4(sw + lrow * 128 + ((chunk ^ (lrow & 7)) << 4), r);
                float lo[4];
#pragma unroll
                for (int i = 0; i < 4; ++i) {
                    hi[kk][i] = r[i] & 0xffffe000u;
                    lo[i] = __uint_as_float(r[i]) - __uint_as_float(hi[kk][i]);
                }
                // bf16 k16 A: reg0 row g slots (2t, 2t+1) = (W_lo[t], W_lo[t+4]), reg1 row g+8; reg2/3: W itself
                cr[kk][0] = pack_bf16(lo[0], lo[2]);
                cr[kk][1] = pack_bf16(lo[1], lo[3]);
                cr[kk][2] = pack_bf16(__uint_as_float(r[0]), __uint_as_float(r[2]));
                cr[kk][3] = pack_bf16(__uint_as_float(r[1]), __uint_as_float(r[3]));
            }
        };
        auto issue = [&](int kt, uint32_t (&hi)[4][4], uint32_t (&cr)[4][4]) {
            const uint32_t sx = base + (kt % STAGES) * STAGE_BYTES + W_BYTES, sc = sx + X_BYTES;
            fence_u(hi);
            fence_u(cr);
            wgmma_fence();
#pragma unroll
            for (int kk = 0; kk < 4; ++kk) {
                wgmma_bf16(part, cr[kk], make_desc(sc + kk * 32), kk > 0);   // [W_lo, W] . [x, x_lo]
                wgmma_tf32(part, hi[kk], make_desc(sx + kk * 32), 1);        // W_hi . x_hi
            }
            wgmma_commit();
        };
        // after the stage's wgmmas: its buffer back to the producers, its products into the accumulator
        auto retire = [&](int kt, uint32_t (&hi)[4][4], uint32_t (&cr)[4][4]) {
            wgmma_wait0();
            fence_f(part);
            fence_u(hi);     // the wgmmas read these registers until the wait: keep them live to here
            fence_u(cr);
            const int s = kt % STAGES;
            if (kt + STAGES < KT && lane == 0) {
                if (CL > 1) {
                    for (uint32_t r = 0; r < (uint32_t)CL; ++r) mbar_arrive_cluster(smem_u32(&empty_bar[s]), r);
                } else {
                    asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];\n" :: "r"(smem_u32(&empty_bar[s])) : "memory");
                }
            }
#pragma unroll
            for (int i = 0; i < 64; ++i) acc[i] += part[i];
        };
        if constexpr (PIPE) {
            // the next stage's split runs while this stage's wgmmas do (two fragment sets: ~200 registers,
            // inside the consumers' 232)
            uint32_t hA[4][4], cA[4][4], hB[4][4], cB[4][4];
            load_frags(0, hA, cA);
            for (int kt = 0; kt < KT; kt += 2) {
                issue(kt, hA, cA);
                if (kt + 1 < KT) load_frags(kt + 1, hB, cB);
                retire(kt, hA, cA);
                if (kt + 1 < KT) {
                    issue(kt + 1, hB, cB);
                    if (kt + 2 < KT) load_frags(kt + 2, hA, cA);
                    retire(kt + 1, hB, cB);
                }
            }
        } else {
            for (int kt = 0; kt < KT; ++kt) {
                uint32_t hi[4][4], cr[4][4];
                load_frags(kt, hi, cr);
                issue(kt, hi, cr);
                retire(kt, hi, cr);
            }
        }

        // epilogue: acc[4j+h] = (W row 16*warp+g, batch col 8j+2t+h), acc[4j+2+h] = (row +8, same col)
        const int nA = n0 + c * 64 + warp * 16 + g, nB = nA + 8;
        const bool vA = nA < N, vB = nB < N;
        const float bA = vA ? bias[nA] : 0.f, bB = vB ? bias[nB] : 0.f;
#pragma unroll
        for (int j = 0; j < 16; ++j)
#pragma unroll
            for (int h = 0; h < 2; ++h) {
                double sum = 0.0;
                if (vA) sum += (double)(1.0f / (1.0f + expf(-(acc[4 * j + h] + bA))));
                if (vB) sum += (double)(1.0f / (1.0f + expf(-(acc[4 * j + 2 + h] + bB))));
                sum += __shfl_xor_sync(0xffffffffu, sum, 4);
                sum += __shfl_xor_sync(0xffffffffu, sum, 8);
                sum += __shfl_xor_sync(0xffffffffu, sum, 16);
                if (g == 0) red[c * 4 + warp][8 * j + 2 * t + h] = sum;
            }
        asm volatile("bar.sync 1, 256;\n" ::: "memory");
        const int ci = tid - 128;
        if (ci < BM && m0 + ci < M) {
            double s = 0.0;
#pragma unroll
            for (int i = 0; i < 8; ++i) s += red[i][ci];
            partial[(long)blockIdx.x * M + m0 + ci] = s;
        }
    }
    if (CL > 1) cluster_sync();   // no CTA leaves while a peer may still arrive on its barriers
#else
    __trap();
#endif
}

__global__ void sum_partials(const double* __restrict__ partial, float* __restrict__ out, int nblk, int M) {
    const int row = blockIdx.x * (blockDim.x / 32) + (threadIdx.x >> 5);   // one warp per row
    const int lane = threadIdx.x & 31;
    if (row >= M) return;
    double s = 0.0;
    for (int i = lane; i < nblk; i += 32) s += partial[(size_t)i * M + row];
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) s += __shfl_xor_sync(0xffffffffu, s, o);
    if (lane == 0) out[row] = (float)s;
}

// Rows of x holding inf/NaN: the split of an inf is inf + NaN, so the GEMM's value is wrong where IEEE fp32
// gives +-inf or NaN. One block per row: a finite row returns after one read; otherwise each x.w_n is decided
// by the non-finite x[k] alone, so only those positions are multiplied (all of K past MAX_POS).
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
        double tot = 0.0;
        for (int i = 0; i < FIX_THREADS / 32; ++i) tot += red[i];
        out[blockIdx.x] = (float)tot;
    }
}

typedef CUresult (*EncodeTiledFn)(CUtensorMap*, CUtensorMapDataType, cuuint32_t, void*, const cuuint64_t*,
                                  const cuuint64_t*, const cuuint32_t*, const cuuint32_t*, CUtensorMapInterleave,
                                  CUtensorMapSwizzle, CUtensorMapL2promotion, CUtensorMapFloatOOBfill);

EncodeTiledFn get_encode_fn() {
    static EncodeTiledFn fn = nullptr;
    if (!fn) {
        void* p = nullptr;
        cudaDriverEntryPointQueryResult q = cudaDriverEntryPointSymbolNotFound;
        C10_CUDA_CHECK(cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &p, 12000, cudaEnableDefault, &q));
        TORCH_CHECK(q == cudaDriverEntryPointSuccess && p != nullptr, "l2_56_wgmma: cuTensorMapEncodeTiled not found");
        fn = reinterpret_cast<EncodeTiledFn>(p);
    }
    return fn;
}

// 2-D map, 128-byte swizzle, zero fill out of bounds; box inner extent is 128 bytes
CUtensorMap make_map(const void* ptr, CUtensorMapDataType dt, int esize, uint64_t inner, uint64_t outer,
                     uint32_t box_inner, uint32_t box_outer) {
    CUtensorMap m;
    cuuint64_t dims[2] = {(cuuint64_t)inner, (cuuint64_t)outer};
    cuuint64_t strides[1] = {(cuuint64_t)(inner * esize)};
    cuuint32_t box[2] = {box_inner, box_outer};
    cuuint32_t estr[2] = {1, 1};
    CUresult r = get_encode_fn()(&m, dt, 2, const_cast<void*>(ptr), dims, strides, box, estr,
                                 CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B,
                                 CU_TENSOR_MAP_L2_PROMOTION_L2_256B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
    TORCH_CHECK(r == CUDA_SUCCESS, "l2_56_wgmma: cuTensorMapEncodeTiled failed with CUresult ", (int)r);
    return m;
}

}  // namespace

at::Tensor linear_sigmoid_rowsum(at::Tensor x, at::Tensor w, at::Tensor b) {
    TORCH_CHECK(x.is_cuda() && w.is_cuda() && b.is_cuda(), "l2_56_wgmma: CUDA tensors expected");
    TORCH_CHECK(x.scalar_type() == at::kFloat && w.scalar_type() == at::kFloat && b.scalar_type() == at::kFloat,
                "l2_56_wgmma: float32 expected");
    TORCH_CHECK(x.dim() == 2 && w.dim() == 2 && b.dim() == 1, "l2_56_wgmma: x (M,K), w (N,K), b (N) expected");
    TORCH_CHECK(x.is_contiguous() && w.is_contiguous() && b.is_contiguous(), "l2_56_wgmma: contiguous tensors expected");
    const int64_t M = x.size(0), K = x.size(1), N = w.size(0);
    TORCH_CHECK(w.size(1) == K && b.size(0) == N, "l2_56_wgmma: shape mismatch");
    TORCH_CHECK(K % 4 == 0 && reinterpret_cast<uintptr_t>(w.data_ptr()) % 16 == 0,
                "l2_56_wgmma: w rows must be 16-byte multiples, 16-byte aligned");
    TORCH_CHECK(M > 0 && N > 0 && K > 0 && M < (1LL << 31) && N < (1LL << 31) && K < (1LL << 30),
                "l2_56_wgmma: unsupported shape");
    auto stream = c10::cuda::getCurrentCUDAStream();
    static bool checked = false;
    if (!checked) {
        cudaDeviceProp prop;
        C10_CUDA_CHECK(cudaGetDeviceProperties(&prop, x.get_device()));
        TORCH_CHECK(prop.major == 9 && prop.minor == 0, "l2_56_wgmma: needs an sm_90 (Hopper) GPU");
        auto flag = at::zeros({1}, x.options().dtype(at::kInt));
        probe_sm90a<<<1, 1, 0, stream>>>(flag.data_ptr<int>());
        C10_CUDA_KERNEL_LAUNCH_CHECK();
        TORCH_CHECK(flag.item<int>() == 1, "l2_56_wgmma: the loaded cubin is not the sm_90a one");
        C10_CUDA_CHECK(cudaFuncSetAttribute(wgmma_sigmoid_rowsum, cudaFuncAttributeMaxDynamicSharedMemorySize, SMEM_BYTES));
        checked = true;
    }
    if (reinterpret_cast<uintptr_t>(x.data_ptr()) % 16) x = x.clone();   // prep_x's 16-byte loads
    const int64_t Kp = (K + 7) / 8 * 8;
    auto xhi = at::empty({M, Kp}, x.options());
    auto xcat = at::empty({M, 2 * Kp}, x.options().dtype(at::kBFloat16));
    const int64_t groups = M * (Kp / 8);
    const int pblocks = (int)std::min<int64_t>((groups + 255) / 256, 4096);
    prep_x<<<pblocks, 256, 0, stream>>>(x.data_ptr<float>(), xhi.data_ptr<float>(),
                                        reinterpret_cast<__nv_bfloat16*>(xcat.data_ptr()), (int)M, (int)K, (int)Kp);
    C10_CUDA_KERNEL_LAUNCH_CHECK();

    const CUtensorMap mW = make_map(w.data_ptr(), CU_TENSOR_MAP_DATA_TYPE_FLOAT32, 4, (uint64_t)K, (uint64_t)N, BK, BN);
    const CUtensorMap mX = make_map(xhi.data_ptr(), CU_TENSOR_MAP_DATA_TYPE_FLOAT32, 4, (uint64_t)Kp, (uint64_t)M, BK, SLICE);
    const CUtensorMap mC = make_map(xcat.data_ptr(), CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, 2, (uint64_t)(2 * Kp), (uint64_t)M,
                                    2 * BK, SLICE);
    const int64_t tiles_n = (N + BN - 1) / BN, gx = (tiles_n + CL - 1) / CL * CL, gy = (M + BM - 1) / BM;
    TORCH_CHECK(gx < (1LL << 31) && gy < 65536, "l2_56_wgmma: too many tiles");
    auto partial = at::empty({gx, M}, x.options().dtype(at::kDouble));
    wgmma_sigmoid_rowsum<<<dim3((unsigned)gx, (unsigned)gy), THREADS, SMEM_BYTES, stream>>>(
        mW, mX, mC, b.data_ptr<float>(), partial.data_ptr<double>(), (int)M, (int)N, (int)Kp);
    C10_CUDA_KERNEL_LAUNCH_CHECK();
    auto out = at::empty({M, 1}, x.options());
    sum_partials<<<(unsigned)((M + 7) / 8), 256, 0, stream>>>(partial.data_ptr<double>(), out.data_ptr<float>(), (int)gx, (int)M);
    C10_CUDA_KERNEL_LAUNCH_CHECK();
    fix_nonfinite_rows<<<(unsigned)M, FIX_THREADS, 0, stream>>>(x.data_ptr<float>(), w.data_ptr<float>(),
                                                                b.data_ptr<float>(), out.data_ptr<float>(), (int)N, (int)K);
    C10_CUDA_KERNEL_LAUNCH_CHECK();
    return out;
}
"""

CPP_SRC = "at::Tensor linear_sigmoid_rowsum(at::Tensor x, at::Tensor w, at::Tensor b);"

_ext = load_inline(
    name=f"l2_56_wgmma_tf32_bf16corr_cl{CLUSTER}{'_pipe' if PIPELINE else ''}",
    cpp_sources=CPP_SRC,
    cuda_sources=CUDA_SRC.replace("@@CLUSTER@@", str(CLUSTER)).replace("@@WGMMA@@", _WGMMA_FNS)
    .replace("@@PIPELINE@@", "true" if PIPELINE else "false")
    .replace("@@CLUSTER_DIMS@@", f"__cluster_dims__({CLUSTER}, 1, 1)" if CLUSTER > 1 else ""),
    functions=["linear_sigmoid_rowsum"],
    extra_cuda_cflags=["-O3", "-gencode=arch=compute_90a,code=sm_90a"],
    verbose=False,
)


def _pad_cols(t, mult):
    """Zero columns up to a multiple of `mult` (16-byte TMA rows); zeros add nothing to a dot product."""
    extra = -t.shape[-1] % mult
    return torch.nn.functional.pad(t, (0, extra)) if extra else t


class ModelNew(nn.Module):
    def __init__(self, input_size, hidden_size):
        super().__init__()
        self.linear = nn.Linear(input_size, hidden_size)

    def forward(self, x):
        return _ext.linear_sigmoid_rowsum(_pad_cols(x.contiguous(), 4), _pad_cols(self.linear.weight, 4),
                                          self.linear.bias)      # other K: zero-padded to a multiple of 4
