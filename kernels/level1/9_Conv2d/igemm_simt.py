"""Conv2d (groups=1, any stride/padding/dilation, optional bias) as an fp32 implicit GEMM.

Idea: out[co, pix] = sum_k W[co, k] * im2col(x)[k, pix] with k = (ci, kh, kw) and pix = (n, oh, ow),
never materialising im2col. 128 (co) x 128 (pix) x 8 (k) block tiles, 256 threads, 8 x 8 outputs per
thread, shared-memory double buffer with the next slab prefetched into registers. Each thread gathers
4 consecutive output pixels of one k row (their n/oh/ow are decoded once, outside the k loop), with
zero padding by bounds test; weights are read as [CO][K] rows and stored k-major. Plain fp32 FMA
(no TF32), so accuracy is that of an fp32 direct convolution. Bias added in the epilogue.
Expected: 7.4 GFLOP at ~35-45 TFLOP/s => ~170-210 us. Eager (cuDNN, TF32 off) may use Winograd or
a tuned implicit GEMM, so this is likely ~0.5-0.9x; kept as the correct fp32 baseline for conv.
Measured (H200, results/H200/bench-20261130-072328.jsonl): 321.5 us vs eager 262.0 us, 0.81x [0.81, 0.82];
implicit_gemm_3xtf32.py beside it reaches 1.65x.
Measured (H200, 2026-12-04, results/H200/bench-20261204-s18.jsonl): 321.9 µs per call, 0.82x eager [0.81,
0.83], 1.02x torch.compile; 0.18 of the roofline floor (56.5 µs).
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

struct ConvShape {
    int N, C, H, W, CO, KH, KW, OH, OW, sh, sw, ph, pw, dh, dw;
};

__global__ void __launch_bounds__(256, 2) conv_igemm(const float* __restrict__ x, const float* __restrict__ w,
                                                    const float* __restrict__ bias, float* __restrict__ y,
                                                    ConvShape s) {
    __shared__ __align__(16) float As[2][BK][BM + APAD];   // weights, k-major
    __shared__ __align__(16) float Bs[2][BK][BN];          // im2col slab
    const int tid = threadIdx.x;
    const int M = s.CO;
    const int KHW = s.KH * s.KW;
    const int K = s.C * KHW;
    const int OHW = s.OH * s.OW;
    const long long P = (long long)s.N * OHW;
    const int bm = blockIdx.y * BM;
    const long long bp = (long long)blockIdx.x * BN;
    const int a_row = tid >> 1, a_k = (tid & 1) * 4;
    const int b_k = tid >> 5, b_pix = (tid & 31) * 4;
    const int tx = tid & 15, ty = tid >> 4;

    // decode this thread's 4 gather pixels once
    long long g_base[4];
    int g_ih0[4], g_iw0[4];
#pragma unroll
    for (int j = 0; j < 4; ++j) {
        const long long p = bp + b_pix + j;
        if (p < P) {
            const int n = (int)(p / OHW);
            const int r = (int)(p - (long long)n * OHW);
            const int oh = r / s.OW, ow = r - oh * s.OW;
            g_base[j] = (long long)n * s.C * s.H * s.W;
            g_ih0[j] = oh * s.sh - s.ph;
            g_iw0[j] = ow * s.sw - s.pw;
        } else {
            g_base[j] = 0;
            g_ih0[j] = -(1 << 29);   // always out of bounds
            g_iw0[j] = -(1 << 29);
        }
    }

    float acc[8][8];
#pragma unroll
    for (int i = 0; i < 8; ++i)
#pragma unroll
        for (int j = 0; j < 8; ++j) acc[i][j] = 0.f;
    float ra[4], rb[4];

    auto load = [&](int k0) {
        const int gm = bm + a_row;
#pragma unroll
        for (int j = 0; j < 4; ++j) {
            const int gk = k0 + a_k + j;
            ra[j] = (gm < M && gk < K) ? __ldg(w + (size_t)gm * K + gk) : 0.f;
        }
        const int gk = k0 + b_k;
        if (gk < K) {
            const int ci = gk / KHW;
            const int rem = gk - ci * KHW;
            const int kh = rem / s.KW, kw = rem - kh * s.KW;
            const long long coff = (long long)ci * s.H * s.W;
#pragma unroll
            for (int j = 0; j < 4; ++j) {
                const int ih = g_ih0[j] + kh * s.dh, iw = g_iw0[j] + kw * s.dw;
                rb[j] = (ih >= 0 && ih < s.H && iw >= 0 && iw < s.W)
                            ? __ldg(x + g_base[j] + coff + (long long)ih * s.W + iw) : 0.f;
            }
        } else {
#pragma unroll
            for (int j = 0; j < 4; ++j) rb[j] = 0.f;
        }
    };
    auto store = [&](int buf) {
#pragma unroll
        for (int j = 0; j < 4; ++j) As[buf][a_k + j][a_row] = ra[j];
        *reinterpret_cast<float4*>(&Bs[buf][b_k][b_pix]) = make_float4(rb[0], rb[1], rb[2], rb[3]);
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

    // epilogue: rows = output channels, cols = pixels
    long long o_base[8];
    bool o_ok[8];
#pragma unroll
    for (int j = 0; j < 8; ++j) {
        const long long p = bp + (j < 4 ? tx * 4 + j : 64 + tx * 4 + (j - 4));
        o_ok[j] = p < P;
        const long long n = o_ok[j] ? p / OHW : 0;
        o_base[j] = n * (long long)M * OHW + (p - n * OHW);
    }
#pragma unroll
    for (int i = 0; i < 8; ++i) {
        const int co = bm + (i < 4 ? ty * 4 + i : 64 + ty * 4 + (i - 4));
        if (co >= M) continue;
        const float bv = bias ? __ldg(bias + co) : 0.f;
#pragma unroll
        for (int j = 0; j < 8; ++j)
            if (o_ok[j]) y[o_base[j] + (long long)co * OHW] = acc[i][j] + bv;
    }
}

at::Tensor conv2d_fwd(at::Tensor x, at::Tensor w, c10::optional<at::Tensor> bias, int64_t sh, int64_t sw,
                      int64_t ph, int64_t pw, int64_t dh, int64_t dw) {
    TORCH_CHECK(x.is_cuda() && w.is_cuda() && x.scalar_type() == at::kFloat && w.scalar_type() == at::kFloat,
                "conv2d: expected CUDA float32 tensors");
    TORCH_CHECK(x.dim() == 4 && w.dim() == 4 && x.size(1) == w.size(1), "conv2d: expected NCHW input, groups=1 weight");
    TORCH_CHECK(sh > 0 && sw > 0 && dh > 0 && dw > 0 && ph >= 0 && pw >= 0, "conv2d: bad stride/padding/dilation");
    x = x.contiguous();
    w = w.contiguous();
    const float* bp = nullptr;
    at::Tensor bc;
    if (bias.has_value() && bias->defined()) {
        bc = bias->contiguous();
        TORCH_CHECK(bc.is_cuda() && bc.scalar_type() == at::kFloat && bc.numel() == w.size(0), "conv2d: bad bias");
        bp = bc.data_ptr<float>();
    }
    ConvShape s;
    s.N = (int)x.size(0); s.C = (int)x.size(1); s.H = (int)x.size(2); s.W = (int)x.size(3);
    s.CO = (int)w.size(0); s.KH = (int)w.size(2); s.KW = (int)w.size(3);
    s.sh = (int)sh; s.sw = (int)sw; s.ph = (int)ph; s.pw = (int)pw; s.dh = (int)dh; s.dw = (int)dw;
    const int64_t OH = (x.size(2) + 2 * ph - dh * (s.KH - 1) - 1) / sh + 1;
    const int64_t OW = (x.size(3) + 2 * pw - dw * (s.KW - 1) - 1) / sw + 1;
    TORCH_CHECK(OH > 0 && OW > 0, "conv2d: empty output");
    TORCH_CHECK(x.numel() < (1LL << 40) && (int64_t)s.C * s.KH * s.KW < (1LL << 31), "conv2d: too large");
    s.OH = (int)OH; s.OW = (int)OW;
    auto y = at::empty({x.size(0), w.size(0), OH, OW}, x.options());
    if (y.numel() == 0) return y;
    const long long P = (long long)s.N * OH * OW;
    const int64_t gx = (P + BN - 1) / BN, gy = (s.CO + BM - 1) / BM;
    TORCH_CHECK(gx < (1LL << 31) && gy < 65536, "conv2d: grid too large");
    auto stream = c10::cuda::getCurrentCUDAStream();
    conv_igemm<<<dim3((unsigned)gx, (unsigned)gy), 256, 0, stream>>>(x.data_ptr<float>(), w.data_ptr<float>(), bp,
                                                                   y.data_ptr<float>(), s);
    C10_CUDA_KERNEL_LAUNCH_CHECK();
    return y;
}
"""

cpp_src = ("at::Tensor conv2d_fwd(at::Tensor x, at::Tensor w, c10::optional<at::Tensor> bias, int64_t sh, "
           "int64_t sw, int64_t ph, int64_t pw, int64_t dh, int64_t dw);")

_ext = load_inline(
    name="kb_l1_conv2d_igemm_simt",
    cpp_sources=cpp_src,
    cuda_sources=cuda_src,
    functions=["conv2d_fwd"],
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
        return _ext.conv2d_fwd(x, c.weight, c.bias, c.stride[0], c.stride[1], c.padding[0], c.padding[1],
                               c.dilation[0], c.dilation[1])
