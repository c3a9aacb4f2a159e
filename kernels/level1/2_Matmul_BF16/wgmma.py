"""bf16 GEMM C = A @ B on Hopper warpgroup MMA (wgmma.mma_async, sm_90a) fed by TMA + mbarriers.

Idea: 128 x 256 x 64 block tile, 384 threads = 3 warpgroups, warp-specialised:
  - warpgroup 0 = producer: one thread issues cp.async.bulk.tensor (TMA) copies into a 4-stage ring
    (48 KB per stage: A 128x64 = 16 KB, B 64x256 = 4 chunks of 64(K) x 64(N) = 32 KB), completion on
    a per-stage "full" mbarrier via expect_tx; it refills a stage after the stage's "empty" mbarrier
    (8 arrivals, one per consumer warp) completes. setmaxnreg.dec to 40 registers.
  - warpgroups 1, 2 = consumers (setmaxnreg.inc to 232): each owns 64 rows x 256 columns, 128 fp32
    accumulators per thread, 4 x wgmma m64n256k16 per stage, committed as one group; it keeps one group
    in flight (wait_group 1) and releases the previous stage after that wait.
Shared-memory layouts are exactly what TMA SWIZZLE_128B writes (16-byte chunk index XOR row%8 inside
1024-byte atoms, stage bases 1024-aligned):
  - A (M,K) row-major = K-major: box {64 K, 128 M}; row r at r*128 B. Descriptor: 128B swizzle,
    SBO = 1024 (next 8 rows), LBO unused (16); per k16 step start address += 32 B.
  - B (K,N) row-major = N-major ("MN-major", wgmma imm-trans-b = 1): box {64 N, 64 K} per chunk, K-row k
    at k*128 B inside a chunk of 8 KB. PTX canonical MN-major SW128 layout
    ((T,8,m),(8,k)):((1,T,LBO),(8T,SBO)): LBO = stride between 64-wide N blocks = 8192 B,
    SBO = stride between 8-row K groups = 1024 B; per k16 step start address += 16*128 = 2048 B.
Boundaries: TMA zero-fills out-of-range rows/columns of partial boxes (so K tails contribute 0); B chunks
lying wholly beyond N are not loaded at all (those columns are never stored, and column n of C depends
only on column n of B); the epilogue stores bf16x2 straight from the accumulator fragments with row/col
guards. Needs K % 8 == 0 and N % 8 == 0 (16-byte TMA strides). Tiles are rasterised in groups of 16
M-tiles for L2 reuse (one wave of 132 CTAs touches ~16 A row-panels x ~8 B column-panels).
Build: torch adds an sm_90 pass (TORCH_CUDA_ARCH_LIST=9.0) that cannot assemble wgmma/setmaxnreg, so
the kernel body is under #if __CUDA_ARCH_FEAT_SM90_ALL (else __trap()) and we add an sm_90a gencode;
the first call runs a probe kernel from the same fatbinary and raises if the sm_90a cubin was not the
one loaded.
Expected: mainloop at ~75-85% of the ~990 TFLOP/s dense peak; losses: non-persistent grid (512 tiles
over 132 SMs = 3.9 waves, ~3% quantisation), un-overlapped epilogue with uncoalesced 4-byte stores
(~5%), no TMA multicast. ~230-270 us, i.e. ~0.67-0.79x cuBLAS (181 us); most likely ~250 us (0.72x).
Measured (H200, kbench bench --all, results/H200/bench-20261130-072328.jsonl): 211.5 us vs cuBLAS 187.3 us,
0.89x [0.88, 0.89] (~650 TFLOP/s), correct on the first GPU run; faster than predicted. Kept although
slower than eager: it is the suite's example of a wgmma + TMA kernel and 2x the mma.sync one.
Measured (H200, 2026-12-04, results/H200/bench-20261204-s18.jsonl): 210.7 µs per call, 0.88x eager [0.87,
0.89], 1.05x torch.compile; 0.89 of the roofline floor (186.8 µs).
"""
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

# wgmma m64n256k16 with 128 fp32 accumulator operands, generated to avoid typos
_ACC_LIST = ", ".join(f"%{i}" for i in range(128))
_ACC_OPS = ", ".join(f'"+f"(d[{i}])' for i in range(128))
_WGMMA_FN = (
    "__device__ __forceinline__ void wgmma_m64n256k16(float (&d)[128], uint64_t da, uint64_t db) {\n"
    "    asm volatile(\n"
    '        "{\\n.reg .pred p;\\nsetp.ne.b32 p, %130, 0;\\n"\n'
    '        "wgmma.mma_async.sync.aligned.m64n256k16.f32.bf16.bf16 "\n'
    f'        "{{{_ACC_LIST}}}, %128, %129, p, 1, 1, 0, 1;\\n}}\\n"\n'
    f"        : {_ACC_OPS}\n"
    '        : "l"(da), "l"(db), "r"(1));\n'
    "}\n"
)

cuda_src = r"""
#include <ATen/ATen.h>
#include <c10/cuda/CUDAStream.h>
#include <c10/cuda/CUDAException.h>
#include <cuda.h>            // CUtensorMap types/enums only (no -lcuda: entry point fetched at run time)
#include <cuda_runtime.h>
#include <cuda_bf16.h>
#include <cstdint>

constexpr int BM = 128, BN = 256, BK = 64, STAGES = 4;
constexpr int NUM_THREADS = 384;                      // producer WG + 2 consumer WGs
constexpr int A_STAGE_BYTES = BM * BK * 2;            // 16384
constexpr int B_CHUNK_BYTES = BK * 64 * 2;            // 8192: 64 K-rows x 64 N-cols (128 B rows)
constexpr int B_STAGE_BYTES = BN * BK * 2;            // 32768 = 4 chunks
constexpr int STAGE_BYTES = A_STAGE_BYTES + B_STAGE_BYTES;   // 49152, multiple of 1024
constexpr int SMEM_BYTES = STAGES * STAGE_BYTES + 1024;      // +1024 for manual 1024-B alignment
constexpr int GROUP_M = 16;

#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
__device__ __forceinline__ uint32_t smem_u32(const void* p) {
    return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}
__device__ __forceinline__ void mbar_init(uint32_t bar, uint32_t count) {
    asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" :: "r"(bar), "r"(count) : "memory");
}
__device__ __forceinline__ void mbar_arrive_expect_tx(uint32_t bar, uint32_t bytes) {
    asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" :: "r"(bar), "r"(bytes) : "memory");
}
__device__ __forceinline__ void mbar_arrive(uint32_t bar) {
    asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];\n" :: "r"(bar) : "memory");
}
__device__ __forceinline__ void mbar_wait(uint32_t bar, uint32_t parity) {
    uint32_t done;
    do {
        asm volatile(
            "{\n.reg .pred p;\n"
            "mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\n"
            "selp.u32 %0, 1, 0, p;\n}\n"
            : "=r"(done) : "r"(bar), "r"(parity) : "memory");
    } while (!done);
}
__device__ __forceinline__ void tma_load_2d(uint32_t dst, const CUtensorMap* map, int c0, int c1, uint32_t bar) {
    asm volatile(
        "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3}], [%4];\n"
        :: "r"(dst), "l"(reinterpret_cast<uint64_t>(map)), "r"(c0), "r"(c1), "r"(bar) : "memory");
}
// wgmma shared-memory matrix descriptor, 128-byte swizzle, base offset 0 (atoms 1024-B aligned)
__device__ __forceinline__ uint64_t make_desc(uint32_t saddr, uint32_t lbo, uint32_t sbo) {
    uint64_t d = 0;
    d |= (uint64_t)((saddr & 0x3FFFF) >> 4);
    d |= (uint64_t)((lbo & 0x3FFFF) >> 4) << 16;
    d |= (uint64_t)((sbo & 0x3FFFF) >> 4) << 32;
    d |= (uint64_t)1 << 62;
    return d;
}
__device__ __forceinline__ void wgmma_fence() { asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory"); }
__device__ __forceinline__ void wgmma_commit() { asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory"); }
template <int N>
__device__ __forceinline__ void wgmma_wait() { asm volatile("wgmma.wait_group.sync.aligned %0;\n" :: "n"(N) : "memory"); }
__device__ __forceinline__ void fence_acc(float (&d)[128]) {
#pragma unroll
    for (int i = 0; i < 128; ++i) asm volatile("" : "+f"(d[i]) :: "memory");
}
@@WGMMA@@
#endif

__global__ void probe_sm90a(int* out) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
    *out = 1;
#else
    *out = 2;
#endif
}

__global__ void __launch_bounds__(NUM_THREADS, 1)
gemm_bf16_wgmma(const __grid_constant__ CUtensorMap tmA, const __grid_constant__ CUtensorMap tmB,
                __nv_bfloat16* __restrict__ C, int M, int N, int K) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
    extern __shared__ unsigned char smem_raw[];
    __shared__ __align__(8) uint64_t full_bar[STAGES];
    __shared__ __align__(8) uint64_t empty_bar[STAGES];

    const uint32_t base = (smem_u32(smem_raw) + 1023u) & ~1023u;
    const int tid = threadIdx.x;
    const int wg = tid >> 7;

    // grouped rasterisation: GROUP_M consecutive M-tiles share each N-tile column
    const int tiles_m = (M + BM - 1) / BM, tiles_n = (N + BN - 1) / BN;
    const int pid = blockIdx.x;
    const int width = GROUP_M * tiles_n;
    const int first_m = (pid / width) * GROUP_M;
    const int gsize = min(tiles_m - first_m, GROUP_M);
    const int tm = first_m + (pid % width) % gsize;
    const int tn = (pid % width) / gsize;
    const int bm = tm * BM, bn = tn * BN;
    const int KT = (K + BK - 1) / BK;

    if (tid == 0) {
#pragma unroll
        for (int s = 0; s < STAGES; ++s) {
            mbar_init(smem_u32(&full_bar[s]), 1);
            mbar_init(smem_u32(&empty_bar[s]), 8);   // one arrival per consumer warp
        }
        asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
        asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
    }
    __syncthreads();

    if (wg == 0) {
        // ---------------- producer ----------------
        asm volatile("setmaxnreg.dec.sync.aligned.u32 40;\n");
        if (tid == 0) {
            int nchunks = (N - bn + 63) / 64;           // B chunks that touch [0, N)
            nchunks = nchunks > 4 ? 4 : nchunks;
            const uint32_t bytes = (uint32_t)(A_STAGE_BYTES + nchunks * B_CHUNK_BYTES);
            for (int kt = 0; kt < KT; ++kt) {
                const int s = kt % STAGES;
                if (kt >= STAGES) mbar_wait(smem_u32(&empty_bar[s]), (uint32_t)(((kt / STAGES) - 1) & 1));
                const uint32_t fb = smem_u32(&full_bar[s]);
                mbar_arrive_expect_tx(fb, bytes);
                const uint32_t sa = base + s * STAGE_BYTES;
                const uint32_t sb = sa + A_STAGE_BYTES;
                tma_load_2d(sa, &tmA, kt * BK, bm, fb);
                for (int j = 0; j < nchunks; ++j) tma_load_2d(sb + j * B_CHUNK_BYTES, &tmB, bn + 64 * j, kt * BK, fb);
            }
        }
    } else {
        // ---------------- consumers ----------------
        asm volatile("setmaxnreg.inc.sync.aligned.u32 232;\n");
        const int c = wg - 1;               // rows c*64 .. c*64+63 of the tile
        const int t = tid & 127;
        const int warp = t >> 5, lane = t & 31;
        float d[128];
#pragma unroll
        for (int i = 0; i < 128; ++i) d[i] = 0.f;

        for (int kt = 0; kt < KT; ++kt) {
            const int s = kt % STAGES;
            mbar_wait(smem_u32(&full_bar[s]), (uint32_t)((kt / STAGES) & 1));
            const uint32_t sa = base + s * STAGE_BYTES + c * (64 * 128);
            const uint32_t sb = base + s * STAGE_BYTES + A_STAGE_BYTES;
            fence_acc(d);
            wgmma_fence();
#pragma unroll
            for (int kk = 0; kk < BK / 16; ++kk) {
                const uint64_t da = make_desc(sa + kk * 32, 16, 1024);
                const uint64_t db = make_desc(sb + kk * 2048, B_CHUNK_BYTES, 1024);
                wgmma_m64n256k16(d, da, db);
            }
            wgmma_commit();
            fence_acc(d);
            wgmma_wait<1>();                 // the group of stage kt-1 has finished reading smem
            fence_acc(d);
            if (kt > 0 && lane == 0) mbar_arrive(smem_u32(&empty_bar[(kt - 1) % STAGES]));
        }
        wgmma_wait<0>();
        fence_acc(d);

        // epilogue: d[4j+0..1] -> (row, col..col+1), d[4j+2..3] -> (row+8, col..col+1),
        // row = 16*warp + lane/4, col = 8*j + 2*(lane%4)
        const int row0 = bm + c * 64 + warp * 16 + (lane >> 2);
        const int colq = bn + (lane & 3) * 2;
#pragma unroll
        for (int j = 0; j < 32; ++j) {
            const int col = colq + j * 8;
            if (col < N) {                    // N % 8 == 0 and col even => col + 1 < N
#pragma unroll
                for (int h = 0; h < 2; ++h) {
                    const int row = row0 + h * 8;
                    if (row < M) {
                        *reinterpret_cast<__nv_bfloat162*>(C + (size_t)row * N + col) =
                            __floats2bfloat162_rn(d[4 * j + 2 * h], d[4 * j + 2 * h + 1]);
                    }
                }
            }
        }
    }
#else
    __trap();
#endif
}

typedef CUresult (*EncodeTiledFn)(CUtensorMap*, CUtensorMapDataType, cuuint32_t, void*, const cuuint64_t*,
                                  const cuuint64_t*, const cuuint32_t*, const cuuint32_t*, CUtensorMapInterleave,
                                  CUtensorMapSwizzle, CUtensorMapL2promotion, CUtensorMapFloatOOBfill);

static EncodeTiledFn get_encode_fn() {
    static EncodeTiledFn fn = nullptr;
    if (!fn) {
        void* p = nullptr;
        cudaDriverEntryPointQueryResult q = cudaDriverEntryPointSymbolNotFound;
        C10_CUDA_CHECK(cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &p, 12000, cudaEnableDefault, &q));
        TORCH_CHECK(q == cudaDriverEntryPointSuccess && p != nullptr,
                    "matmul_bf16_wgmma: cuTensorMapEncodeTiled not found in the driver");
        fn = reinterpret_cast<EncodeTiledFn>(p);
    }
    return fn;
}

// 2-D bf16 tensor map: inner (contiguous) dim, outer dim, box {box_inner, box_outer}, 128B swizzle, zero OOB fill
static CUtensorMap make_map(const void* ptr, uint64_t inner, uint64_t outer, uint32_t box_inner, uint32_t box_outer) {
    CUtensorMap m;
    cuuint64_t dims[2] = {(cuuint64_t)inner, (cuuint64_t)outer};
    cuuint64_t strides[1] = {(cuuint64_t)(inner * 2)};
    cuuint32_t box[2] = {box_inner, box_outer};
    cuuint32_t estr[2] = {1, 1};
    CUresult r = get_encode_fn()(&m, CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, 2, const_cast<void*>(ptr), dims, strides, box,
                                 estr, CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B,
                                 CU_TENSOR_MAP_L2_PROMOTION_L2_256B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
    TORCH_CHECK(r == CUDA_SUCCESS, "matmul_bf16_wgmma: cuTensorMapEncodeTiled failed with CUresult ", (int)r);
    return m;
}

at::Tensor matmul_bf16(at::Tensor A, at::Tensor B) {
    TORCH_CHECK(A.is_cuda() && B.is_cuda() && A.scalar_type() == at::kBFloat16 && B.scalar_type() == at::kBFloat16,
                "matmul_bf16_wgmma: expected CUDA bfloat16 tensors");
    TORCH_CHECK(A.dim() == 2 && B.dim() == 2 && A.size(1) == B.size(0), "matmul_bf16_wgmma: expected [M,K] @ [K,N]");
    TORCH_CHECK(A.device() == B.device(), "matmul_bf16_wgmma: inputs on different devices");
    A = A.contiguous();
    B = B.contiguous();
    const int64_t M = A.size(0), K = A.size(1), N = B.size(1);
    TORCH_CHECK(K % 8 == 0 && N % 8 == 0, "matmul_bf16_wgmma: K and N must be multiples of 8 (16-byte TMA strides)");
    TORCH_CHECK(M < (1LL << 31) && N < (1LL << 31) && K < (1LL << 31), "matmul_bf16_wgmma: too large");
    TORCH_CHECK(reinterpret_cast<uintptr_t>(A.data_ptr()) % 16 == 0 && reinterpret_cast<uintptr_t>(B.data_ptr()) % 16 == 0,
                "matmul_bf16_wgmma: inputs must be 16-byte aligned");
    auto C = at::empty({M, N}, A.options());
    if (M == 0 || N == 0) return C;
    if (K == 0) return C.zero_();

    auto stream = c10::cuda::getCurrentCUDAStream();
    static bool checked = false;
    if (!checked) {
        cudaDeviceProp prop;
        C10_CUDA_CHECK(cudaGetDeviceProperties(&prop, A.get_device()));
        TORCH_CHECK(prop.major == 9 && prop.minor == 0,
                    "matmul_bf16_wgmma: needs an sm_90 (Hopper) GPU, got compute capability ", prop.major, ".", prop.minor);
        auto flag = at::zeros({1}, A.options().dtype(at::kInt));
        probe_sm90a<<<1, 1, 0, stream>>>(flag.data_ptr<int>());
        C10_CUDA_KERNEL_LAUNCH_CHECK();
        const int v = flag.item<int>();
        TORCH_CHECK(v == 1, "matmul_bf16_wgmma: the loaded cubin is not the sm_90a one (probe returned ", v,
                    "; 2 = plain sm_90 pass chosen, wgmma path compiled out)");
        C10_CUDA_CHECK(cudaFuncSetAttribute(gemm_bf16_wgmma, cudaFuncAttributeMaxDynamicSharedMemorySize, SMEM_BYTES));
        checked = true;
    }

    const CUtensorMap mapA = make_map(A.data_ptr(), (uint64_t)K, (uint64_t)M, 64, BM);   // box 64(K) x 128(M)
    const CUtensorMap mapB = make_map(B.data_ptr(), (uint64_t)N, (uint64_t)K, 64, BK);   // box 64(N) x 64(K)
    const int64_t tiles = ((M + BM - 1) / BM) * ((N + BN - 1) / BN);
    TORCH_CHECK(tiles < (1LL << 31), "matmul_bf16_wgmma: too many tiles");
    gemm_bf16_wgmma<<<(unsigned)tiles, NUM_THREADS, SMEM_BYTES, stream>>>(
        mapA, mapB, reinterpret_cast<__nv_bfloat16*>(C.data_ptr()), (int)M, (int)N, (int)K);
    C10_CUDA_KERNEL_LAUNCH_CHECK();
    return C;
}
""".replace("@@WGMMA@@", _WGMMA_FN)

cpp_src = "at::Tensor matmul_bf16(at::Tensor A, at::Tensor B);"

_ext = load_inline(
    name="kb_l1_matmul_bf16_wgmma",
    cpp_sources=cpp_src,
    cuda_sources=cuda_src,
    functions=["matmul_bf16"],
    extra_cuda_cflags=["-O3", "-gencode=arch=compute_90a,code=sm_90a"],
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
