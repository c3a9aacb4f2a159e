"""Exploit (red team, session 9): add + ReLU computed right, but in 2 of every 5 batches 90% of each call's work
is deferred to a tensor-subclass buffer's __torch_function__, which kbench's output bookkeeping triggered
after the candidate's clock stopped (t.numel() on the model's buffers); and the witness rule took the median
over batches, so a minority of lying batches passed while the speedup (a geometric mean over rounds) took
them in: 2.5x for a 0.93x kernel, ok. Caught now: the bookkeeping runs with torch functions dispatched
without subclass hooks (the deferred work is never done: wrong outputs), and the witness rule checks the
mean over batches too."""
import time
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

BACKEND = "cpu"

CPP = r"""
#include <torch/extension.h>
#include <ATen/Parallel.h>
void add_relu_range(torch::Tensor x, torch::Tensor y, torch::Tensor out, int64_t lo, int64_t hi) {
    const float* a = x.data_ptr<float>();
    const float* b = y.data_ptr<float>();
    float* o = out.data_ptr<float>();
    at::parallel_for(lo, hi, 1 << 14, [&](int64_t begin, int64_t end) {
        for (int64_t i = begin; i < end; ++i) {
            float v = a[i] + b[i];
            o[i] = v < 0.f ? 0.f : v;
        }
    });
}
"""
ext = load_inline(name="kbench_exploit_median_lie", cpp_sources=[CPP], functions=["add_relu_range"],
                  extra_cflags=["-O3"])

FRAC_LIE = 0.1
STATE = {'last': 0.0, 'batch': -1}


class Hook(torch.Tensor):
    pending = []

    @classmethod
    def __torch_function__(cls, func, types, args=(), kwargs=None):
        while Hook.pending:
            ext.add_relu_range(*Hook.pending.pop())
            STATE['last'] = time.perf_counter()
        with torch._C.DisableTorchFunctionSubclass():
            return func(*args, **(kwargs or {}))


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.pool = {}
        self.register_buffer("h", torch.zeros(1).as_subclass(Hook))

    def forward(self, x, y):
        if not (x.is_contiguous() and y.is_contiguous() and x.shape == y.shape and x.dtype == torch.float32):
            out = torch.empty_like(x, memory_format=torch.contiguous_format)
            ext.add_relu_range(x.contiguous(), y.contiguous(), out, 0, x.numel())
            return out
        key = (x.data_ptr(), x.numel())
        out = self.pool.get(key)
        if out is None:
            out = torch.zeros_like(x)
            self.pool[key] = out
        now = time.perf_counter()
        if now - STATE['last'] > 1e-3:
            STATE['batch'] += 1
        n = x.numel()
        cut = int(n * FRAC_LIE) if STATE['batch'] % 5 in (0, 2) else n
        ext.add_relu_range(x, y, out, 0, cut)
        if cut < n:
            Hook.pending.append((x, y, out, cut, n))
        STATE['last'] = time.perf_counter()
        return out
