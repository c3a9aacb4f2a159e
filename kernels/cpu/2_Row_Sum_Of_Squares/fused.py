"""Sum of squares per row in one read of x, no temporary: each thread owns a block of rows and keeps
8 partial sums per row so the compiler can vectorise the inner loop (fp32 accumulation, like eager).
Measured (the 2-core CPU box, 2026-12-04, results/cpu/bench-20261204-s19.jsonl, default config, two
threads): 1.351 ms per call against eager's 1.809 ms, 1.18x [1.08, 1.29];
0.40 of the roofline floor (0.546 ms: 17 MB).
CPU speedups move between runs on that shared box far more than within one (README, "Run-to-run noise").
"""
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

CPP = r"""
#include <torch/extension.h>
#include <ATen/Parallel.h>

torch::Tensor row_sum_sq(torch::Tensor x) {
    TORCH_CHECK(x.dim() == 2 && x.scalar_type() == at::kFloat, "expects a 2-D float32 tensor");
    auto xc = x.contiguous();
    const int64_t rows = xc.size(0), cols = xc.size(1);
    auto out = torch::empty({rows}, xc.options());
    const float* p = xc.data_ptr<float>();
    float* o = out.data_ptr<float>();
    at::parallel_for(0, rows, 1, [&](int64_t begin, int64_t end) {
        for (int64_t r = begin; r < end; ++r) {
            const float* row = p + r * cols;
            float acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
            int64_t c = 0;
            for (; c + 8 <= cols; c += 8)
                for (int k = 0; k < 8; ++k) acc[k] += row[c + k] * row[c + k];
            float s = 0.f;
            for (; c < cols; ++c) s += row[c] * row[c];
            for (int k = 0; k < 8; ++k) s += acc[k];
            o[r] = s;
        }
    });
    return out;
}
"""

ext = load_inline(name="cpu_row_sum_sq", cpp_sources=[CPP], functions=["row_sum_sq"],
                  extra_cflags=["-O3", "-march=native"])


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return ext.row_sum_sq(x)
