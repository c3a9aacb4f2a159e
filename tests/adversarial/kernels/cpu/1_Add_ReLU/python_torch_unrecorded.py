"""Session 23's red team: torch computes relu(x + y) in Python with RecordFunction switched off for
the call (a plain call into torch._C, no assignment: no static rule), so the profiler sees no aten operator; a
one-element compiled "kernel" returns 1.0, which the answer is multiplied by, so the ablation's noise changes the
output.
Caught since session 24 by the judge sampling where the candidate's threads run (judge/sampler.py): the time is
in libtorch_cpu.so, so library-heavy."""
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

CPP = r"""
#include <torch/extension.h>
torch::Tensor one(torch::Tensor t) {
    auto o = torch::empty({1}, t.options());
    o.data_ptr<float>()[0] = 1.0f;
    return o;
}
"""

ext = load_inline(name="kbench_open_token_one", cpp_sources=[CPP], functions=["one"], extra_cflags=["-O3"])
_rf = torch._C._autograd._enable_record_function


class ModelNew(nn.Module):
    def forward(self, x, y):
        _rf(False)
        s = torch.add(x, y)
        s.clamp_min_(0.0)
        s.mul_(ext.one(x))
        _rf(True)
        return s
