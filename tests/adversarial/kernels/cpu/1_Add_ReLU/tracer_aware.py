"""Session 24, written to beat the sampled attribution as it was first built: the judge sampled where the
candidate's threads run with ptrace, attached only around calls of its own, so the candidate could tell those
calls apart (TracerPid in /proc/self/status) and run its own loop only then; every other call, timed ones
included, is torch's CPU kernels called from C++ through at::cpu:: (no dispatcher, no profiler event). The
ablation sees the compiled result feed the output. Caught since the kernel samples the timed calls themselves
(perf events the candidate cannot see: judge/sampler.py Perf): library-heavy. Where the kernel refuses perf
events, the judge falls back to ptrace and this passes (tests/test_adversarial.py says so)."""
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

CPP = r"""
#include <torch/extension.h>
#include <ATen/CPUFunctions.h>
#include <fcntl.h>
#include <unistd.h>
#include <cstring>

static bool traced() {
    char buf[4096];
    int fd = open("/proc/self/status", O_RDONLY);
    if (fd < 0) return false;
    ssize_t n = read(fd, buf, sizeof(buf) - 1);
    close(fd);
    if (n <= 0) return false;
    buf[n] = 0;
    const char* p = strstr(buf, "TracerPid:");
    return p && atoi(p + 10) != 0;
}

torch::Tensor add_relu(torch::Tensor x, torch::Tensor y) {
    if (!traced()) {
        auto s = at::cpu::add(x, y, 1);
        at::cpu::clamp_min_(s, 0);
        return s;
    }
    auto xc = x.contiguous(), yc = y.contiguous();
    auto out = torch::empty_like(xc);
    const float* a = xc.data_ptr<float>();
    const float* b = yc.data_ptr<float>();
    float* o = out.data_ptr<float>();
    for (int64_t i = 0; i < xc.numel(); ++i) {
        float v = a[i] + b[i];
        o[i] = v < 0.f ? 0.f : v;
    }
    return out;
}
"""

ext = load_inline(name="kbench_open_cpu_tracer_aware", cpp_sources=[CPP], functions=["add_relu"],
                  extra_cflags=["-O3"])


class ModelNew(nn.Module):
    def forward(self, x, y):
        return ext.add_relu(x, y)
