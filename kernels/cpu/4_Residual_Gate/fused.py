"""x + 0.5 * y * z in one pass: three inputs read once, one output written, no temporaries.
Evaluated as x + (0.5 * y) * z, the same order as eager, so results match bit for bit.
Measured (the 2-core CPU box, 2026-12-04, results/cpu/bench-20261204-s19.jsonl, default config, two
threads): 3.496 ms per call against eager's 5.211 ms, 1.52x [1.47, 1.58];
0.62 of the roofline floor (2.184 ms: 67 MB).
CPU speedups move between runs on that shared box far more than within one (README, "Run-to-run noise").
"""
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

CPP = r"""
#include <torch/extension.h>
#include <ATen/Parallel.h>

torch::Tensor residual_gate(torch::Tensor x, torch::Tensor y, torch::Tensor z) {
    TORCH_CHECK(x.sizes() == y.sizes() && x.sizes() == z.sizes(), "x, y, z must have the same shape");
    TORCH_CHECK(x.scalar_type() == at::kFloat, "float32 only");
    auto xc = x.contiguous(), yc = y.contiguous(), zc = z.contiguous();
    auto out = torch::empty_like(xc);
    const float *a = xc.data_ptr<float>(), *b = yc.data_ptr<float>(), *c = zc.data_ptr<float>();
    float* o = out.data_ptr<float>();
    at::parallel_for(0, xc.numel(), 1 << 14, [&](int64_t begin, int64_t end) {
        for (int64_t i = begin; i < end; ++i) o[i] = a[i] + (0.5f * b[i]) * c[i];
    });
    return out;
}
"""

ext = load_inline(name="cpu_residual_gate", cpp_sources=[CPP], functions=["residual_gate"],
                  extra_cflags=["-O3", "-march=native"])


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x, y, z):
        return ext.residual_gate(x, y, z)
