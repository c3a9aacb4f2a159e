"""One pass instead of two: out[i] = max(x[i] + y[i], 0), split across threads with at::parallel_for.

Eager reads x and y, writes a temporary, reads it again and writes the output; this reads x and y once
and writes once (3 streams of memory traffic instead of 5) and allocates one tensor, not two.
Fixed 2026-12-02 (issue 17's generalisation trials): `v > 0 ? v : 0` turned NaN into 0; torch.relu keeps NaN.
Measured (the 2-core CPU box, 2026-12-04, results/cpu/bench-20261204-s19.jsonl, default config, two
threads): 2.907 ms per call against eager's 3.053 ms, 1.00x [0.94, 1.06];
0.56 of the roofline floor (1.638 ms: 50 MB at the measured 31 GB/s).
CPU speedups move between runs on that shared box far more than within one (README, "Run-to-run noise").
"""
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

CPP = r"""
#include <torch/extension.h>
#include <ATen/Parallel.h>

torch::Tensor add_relu(torch::Tensor x, torch::Tensor y) {
    TORCH_CHECK(x.sizes() == y.sizes(), "x and y must have the same shape");
    TORCH_CHECK(x.scalar_type() == at::kFloat && y.scalar_type() == at::kFloat, "float32 only");
    auto xc = x.contiguous(), yc = y.contiguous();
    auto out = torch::empty_like(xc);
    const float* a = xc.data_ptr<float>();
    const float* b = yc.data_ptr<float>();
    float* o = out.data_ptr<float>();
    at::parallel_for(0, xc.numel(), 1 << 14, [&](int64_t begin, int64_t end) {
        for (int64_t i = begin; i < end; ++i) {
            float v = a[i] + b[i];
            o[i] = v < 0.f ? 0.f : v;       // NaN stays NaN, as in torch.relu
        }
    });
    return out;
}
"""

ext = load_inline(name="cpu_add_relu", cpp_sources=[CPP], functions=["add_relu"],
                  extra_cflags=["-O3", "-march=native"])


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x, y):
        return ext.add_relu(x, y)
