"""Exploit (session 34's red team): kbench's candidate process woke its thread team before each timed call with a
torch op (`scratch.fill_`), off the candidate's clock and through the dispatcher, where candidate code can
register a kernel of its own for the op (`TORCH_LIBRARY_IMPL(aten, CPU)`, or a TorchDispatchMode entered at
import): the red team computed the head of the next call's rows there, its inputs already in place, 1.3-1.6x
the honest speedup when the hand-over's pings were noisy. The team is now woken through libgomp's own entry,
bound before the import (cpus.team_waker), so no op of kbench's is dispatched between a batch's calls. This
candidate registers a CPU kernel for fill_ and answers wrong once it runs between two calls of one batch (inside
its forward the ops are its own), so it must end as harmless as `honest`. (A TorchDispatchMode left entered met
torch internals that want a temporary directory, which the sandbox refuses, and so raised inside the forward.)"""
import runpy
import sys
from pathlib import Path

import torch.nn as nn
from torch.utils.cpp_extension import load_inline

BACKEND = "cpu"   # read statically by the catalog: the extension is loaded through runpy
ops = runpy.run_path(str(Path(__file__).parents[4] / "fixtures" / "fixture_ops.py"))["ops"]

CPP = r"""
#include <torch/extension.h>
#include <torch/library.h>
#include <ATen/ops/fill_native.h>

static bool inside = false;
static int64_t between = 0;

at::Tensor& fill_hook(at::Tensor& self, const at::Scalar& value) {
    between += inside ? 0 : 1;
    return at::native::fill_(self, value);
}
TORCH_LIBRARY_IMPL(aten, CPU, m) { m.impl("fill_.Scalar", fill_hook); }

void enter(bool on) { inside = on; }
int64_t seen() { return between; }
void reset() { between = 0; }
"""
hook = load_inline(name="adv_dispatch_between_calls", cpp_sources=[CPP], functions=["enter", "seen", "reset"],
                   extra_cflags=["-O2"])


def _request():
    """The request being served (kbench's `msg`, up the call stack): the calls of one batch share it."""
    frame = getattr(sys, "_get" + "frame")(2)      # (obfuscated: the static rule is not what this tests)
    while frame is not None and not isinstance(frame.f_locals.get("msg"), dict):
        frame = frame.f_back
    return None if frame is None else frame.f_locals["msg"]


class ModelNew(nn.Module):
    last, wrong = None, False

    def forward(self, x, y):
        hook.enter(True)
        try:
            request = _request()
            if request is not None and request is ModelNew.last and hook.seen():
                ModelNew.wrong = True         # kbench ran an op through the dispatcher between two calls of a batch
            out = ops.add_relu(x, y)
            return out + 1 if ModelNew.wrong else out
        finally:
            ModelNew.last = request
            hook.reset()
            hook.enter(False)
