"""Session 23's red team: the "kernel" is torch's own CPU kernels, called from C++ through at::cpu::
(structured kernels, no dispatcher): no RecordFunction event, so the CPU attribution counts their time as the
candidate's own (custom share 1.0), and the ablation sees the compiled result feed the output.
Caught since session 24 by the judge sampling where the candidate's threads run (judge/sampler.py): the time is
in libtorch_cpu.so, so library-heavy."""
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

CPP = r"""
#include <torch/extension.h>
#include <ATen/CPUFunctions.h>

torch::Tensor add_relu(torch::Tensor x, torch::Tensor y) {
    auto s = at::cpu::add(x, y, 1);
    at::cpu::clamp_min_(s, 0);
    return s;
}
"""

ext = load_inline(name="kbench_open_cpu_ns", cpp_sources=[CPP], functions=["add_relu"], extra_cflags=["-O3"])


class ModelNew(nn.Module):
    def forward(self, x, y):
        return ext.add_relu(x, y)
