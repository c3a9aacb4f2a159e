"""clamp(x * w + b, -1, 1) in one pass: eager makes three passes and two temporaries.
Keeps Model's parameter names (weight, bias) so the harness copies the reference's values in.
Measured (the 2-core CPU box, 2026-12-04, results/cpu/bench-20261204-s19.jsonl, default config, two
threads): 1.834 ms per call against eager's 3.637 ms, 2.03x [1.90, 2.15];
0.60 of the roofline floor (1.092 ms: 34 MB).
CPU speedups move between runs on that shared box far more than within one (README, "Run-to-run noise").
"""
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

CPP = r"""
#include <torch/extension.h>
#include <ATen/Parallel.h>

torch::Tensor scale_bias_clamp(torch::Tensor x, torch::Tensor w, torch::Tensor b) {
    TORCH_CHECK(x.dim() == 2 && x.scalar_type() == at::kFloat, "expects a 2-D float32 x");
    TORCH_CHECK(w.numel() == x.size(1) && b.numel() == x.size(1), "weight/bias must match x's last dim");
    auto xc = x.contiguous(), wc = w.contiguous(), bc = b.contiguous();
    const int64_t rows = xc.size(0), cols = xc.size(1);
    auto out = torch::empty_like(xc);
    const float *px = xc.data_ptr<float>(), *pw = wc.data_ptr<float>(), *pb = bc.data_ptr<float>();
    float* po = out.data_ptr<float>();
    at::parallel_for(0, rows, 16, [&](int64_t begin, int64_t end) {
        for (int64_t r = begin; r < end; ++r) {
            const float* xr = px + r * cols;
            float* orow = po + r * cols;
            for (int64_t c = 0; c < cols; ++c) {
                float v = xr[c] * pw[c] + pb[c];
                orow[c] = v < -1.f ? -1.f : (v > 1.f ? 1.f : v);
            }
        }
    });
    return out;
}
"""

ext = load_inline(name="cpu_scale_bias_clamp", cpp_sources=[CPP], functions=["scale_bias_clamp"],
                  extra_cflags=["-O3", "-march=native"])


class ModelNew(nn.Module):
    def __init__(self, features):
        super().__init__()
        self.weight = nn.Parameter(torch.randn(features) * 0.5)
        self.bias = nn.Parameter(torch.randn(features) * 0.1)

    def forward(self, x):
        return ext.scale_bias_clamp(x, self.weight, self.bias)
