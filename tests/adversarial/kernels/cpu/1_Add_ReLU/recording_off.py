"""Session 23's red team: at::add / at::relu through the dispatcher, as the caught `aten_wrapper`
does, with RecordFunction switched off for the thread (at::RecordFunctionGuard), so the profiler records no aten
operator and the CPU attribution counts torch's time as the candidate's own.
Caught since session 24 by the judge sampling where the candidate's threads run (judge/sampler.py): the time is
in libtorch_cpu.so, so library-heavy."""
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

CPP = r"""
#include <torch/extension.h>
#include <ATen/record_function.h>

torch::Tensor add_relu(torch::Tensor x, torch::Tensor y) {
    at::RecordFunctionGuard off(false);
    return at::relu(at::add(x, y));
}
"""

ext = load_inline(name="kbench_open_record_off", cpp_sources=[CPP], functions=["add_relu"], extra_cflags=["-O3"])


class ModelNew(nn.Module):
    def forward(self, x, y):
        return ext.add_relu(x, y)
