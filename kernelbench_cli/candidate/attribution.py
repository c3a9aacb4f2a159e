"""Attribution, measured in the candidate process: the share of one call's time spent in the candidate's own
code rather than in library code. CUDA: GPU kernel time in kernels whose names its own sources define
(integrity.kernel_names) against all kernel time (aten, cuBLAS, cuDNN). CPU: the call's wall time outside
top-level aten operators, whether called from Python or from inside the extension (the dispatcher records
both), against the whole call.

This runs where the candidate could interfere, so it is evidence, not proof: the profiler entry points are
taken when this module is imported, before any candidate code exists in the process (a later patch of
torch.autograd.profiler does not reach them), and the causal proof of custom work is the ablation
(judge/evidence.py). The judge decides on the number (integrity.check_custom_share).
"""
from __future__ import annotations

import time

import torch
from torch.autograd import profiler as _autograd_profiler

_PROFILE = _autograd_profiler.profile           # bound before the candidate is imported
_CUDA = torch.autograd.DeviceType.CUDA


def custom_share(fn, args, device: str, names: set[str]) -> tuple[float | None, str]:
    """(share of the call's time in the candidate's own code, the top entries), or (None, why)."""
    if device == "cuda":
        return _cuda_share(fn, args, names)
    return _cpu_share(fn, args)


def _cpu_share(fn, args) -> tuple[float | None, str]:
    with _PROFILE(use_kineto=True) as prof:
        t0 = time.perf_counter_ns()
        fn(*args)
        wall_us = (time.perf_counter_ns() - t0) / 1e3
    library, per = 0.0, {}
    for evt in prof.function_events:
        if not evt.name.startswith("aten::") or _inside_aten(evt):
            continue
        library += evt.cpu_time_total
        per[evt.name] = per.get(evt.name, 0.0) + evt.cpu_time_total
    if wall_us <= 0:
        return None, "no time measured"
    top = ", ".join(f"{k} {v / wall_us:.0%}" for k, v in sorted(per.items(), key=lambda kv: -kv[1])[:3])
    return max(0.0, 1.0 - library / wall_us), top or "no aten operator"


def _inside_aten(evt) -> bool:
    parent = evt.cpu_parent
    while parent is not None:
        if parent.name.startswith("aten::"):
            return True
        parent = parent.cpu_parent
    return False


def warm_up(device: str) -> None:
    """One profiled call before the sandbox is installed. CUDA: CUPTI cannot initialise inside it (measured on
    the H200: CUPTI_ERROR_NOT_INITIALIZED, no kernel events), and once initialised here it keeps working
    there; the launch cost after it was not raised (results/H200/harness-20261202.txt). CPU: the same for the
    profiler's own start (a CUDA build of torch brings its GPU tracing up with it, on a GPU host too)."""
    if device != "cuda":
        with _PROFILE(use_kineto=True):
            torch.ones(4).add_(1)
        return
    x = torch.ones(1, device="cuda")
    with _PROFILE(use_cpu=False, use_device="cuda", use_kineto=True):
        x.add_(1)
        torch.cuda.synchronize()


def _cuda_share(fn, args, names: set[str]) -> tuple[float | None, str]:
    """torch.autograd.profiler, not torch.profiler: the latter's start probes `hasattr(torch, "_inductor")`,
    which imports torch._inductor and torch._dynamo (~4 s on the H200)."""
    with _PROFILE(use_cpu=False, use_device="cuda", use_kineto=True) as prof:
        fn(*args)
        torch.cuda.synchronize()
    share, top = _kernel_share(prof.function_events, names)
    return share, top or "the profiler saw no kernel"


def _kernel_share(events, names: set[str]) -> tuple[float | None, str]:
    total, custom, per = 0.0, 0.0, {}
    for evt in events:
        if evt.device_type != _CUDA:
            continue
        t = evt.device_time_total if hasattr(evt, "device_time_total") else evt.cuda_time_total
        if t <= 0 or evt.name.startswith(("Memcpy", "Memset")):
            continue
        total += t
        per[evt.name] = per.get(evt.name, 0.0) + t
        if any(n in evt.name for n in names):
            custom += t
    top = ", ".join(f"{k[:40]} {v / total:.0%}" for k, v in sorted(per.items(), key=lambda kv: -kv[1])[:3]) if total else ""
    return (custom / total if total else None), top
