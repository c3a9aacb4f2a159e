"""Integrity: the candidate is untrusted. Every verdict kbench can raise is registered here once, with its
severity and the exploit it stops; static (AST) rules run in the parent without importing the candidate,
runtime checks run in the worker around the candidate's calls.

Severity "error" fails the job like an incorrect result; "warning" is reported for review only.
"""
from __future__ import annotations

import ast
import re
import threading
import time
from dataclasses import dataclass

import torch

from .results import Flag


@dataclass(frozen=True)
class Check:
    severity: str
    stops: str     # the exploit class this verdict exists for


REGISTRY: dict[str, Check] = {
    # runtime, correctness phase
    "no-custom-kernel": Check("error", "torch fallback, try/except fallback, subclassing Model: the forward "
                                       "never called the candidate's compiled functions"),
    "bad-output": Check("error", "lazy/subclass tensors, outputs aliasing inputs or parameters, wrong dtype/device"),
    "input-mutated": Check("error", "zeroing or editing the inputs so a reference run on them would agree"),
    "precision": Check("error", "lower precision inside (TF32, fp16) that allclose alone lets through"),
    "background-thread": Check("error", "work left running on a thread after forward returns"),
    "degenerate-problem": Check("warning", "a problem where zeros, a constant or an input-independent output "
                                           "passes: verdicts on it prove little"),
    # runtime, timing phase
    "cached-result": Check("error", "returning results cached by pointer or content instead of computing"),
    "side-stream": Check("error", "work on another stream or thread, invisible to the timed stream's events"),
    "timer-tampered": Check("error", "monkeypatched clocks, events or synchronisation"),
    "suspicious-speed": Check("warning", "speedups too good to be true: for manual review"),
    "library-heavy": Check("warning", "most GPU time in library kernels (aten, cuBLAS, cuDNN), not the candidate's"),
    # static (AST) rules
    "exception-handler": Check("warning", "try/except around the forward: a silent fallback path"),
    "thread-or-stream": Check("warning", "creating threads, processes or CUDA streams"),
    "monkeypatch": Check("error", "assigning to torch/time/timing attributes"),
    "introspection": Check("error", "gc/inspect/sys.modules/frame access to reach the reference or the harness"),
    "reads-problem": Check("error", "reading the problem module or the harness's own objects"),
    "process-exit": Check("error", "os._exit / sys.exit to leave before the verdict"),
    "file-write": Check("warning", "writing files (results can be smuggled between runs)"),
}


def flag(name: str, detail: str) -> Flag:
    return Flag(name, REGISTRY[name].severity, detail)


# --- static rules ------------------------------------------------------------------------------------

PATCHED_ROOTS = {"torch", "time", "timeit", "triton", "kernelbench_cli", "builtins"}
INTROSPECTION = {("gc", "get_objects"), ("gc", "get_referrers"), ("gc", "get_referents"), ("sys", "_getframe"),
                 ("inspect", "currentframe"), ("inspect", "stack"), ("inspect", "getouterframes"),
                 ("sys", "modules")}
THREADS = {("threading", "Thread"), ("threading", "Timer"), ("multiprocessing", "Process"),
           ("concurrent", "futures"), ("cuda", "Stream"), ("cuda", "ExternalStream"), ("_thread", "start_new_thread")}
HARNESS_NAMES = {"kbench_problem", "kernelbench_cli", "__main__"}


def _dotted(node: ast.AST) -> list[str]:
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        parts.append(node.id)
    return parts[::-1]


def _pairs(parts: list[str]):
    return set(zip(parts, parts[1:]))


def rule_monkeypatch(tree):
    for node in ast.walk(tree):
        targets = node.targets if isinstance(node, ast.Assign) else \
            [node.target] if isinstance(node, (ast.AugAssign, ast.AnnAssign)) else []
        for t in targets:
            parts = _dotted(t)
            if isinstance(t, ast.Attribute) and parts and parts[0] in PATCHED_ROOTS:
                yield node.lineno, f"assigns {'.'.join(parts)}"
        if isinstance(node, ast.Call) and _dotted(node.func)[-1:] == ["setattr"] and node.args:
            target = _dotted(node.args[0])
            if target and target[0] in PATCHED_ROOTS:
                yield node.lineno, f"setattr on {'.'.join(target)}"


def rule_introspection(tree):
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute):
            hit = _pairs(_dotted(node)) & INTROSPECTION
            if hit:
                yield node.lineno, f"uses {'.'.join(sorted(hit)[0])}"
        elif isinstance(node, ast.ImportFrom) and (node.module or "") in ("gc", "inspect"):
            yield node.lineno, f"imports from {node.module}"
        elif isinstance(node, ast.Attribute) and node.attr in ("f_back", "f_globals", "f_locals", "__globals__"):
            yield node.lineno, f"frame/globals access .{node.attr}"


def rule_reads_problem(tree):
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value in HARNESS_NAMES:
            yield node.lineno, f"refers to {node.value!r}"
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else [node.module or ""]
            for n in names:
                if n.split(".")[0] in ("kernelbench_cli", "kbench_problem"):
                    yield node.lineno, f"imports {n}"


def rule_process_exit(tree):
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            parts = _dotted(node.func)
            if parts[-2:] in (["os", "_exit"], ["sys", "exit"], ["os", "kill"], ["os", "abort"]):
                yield node.lineno, f"calls {'.'.join(parts)}"


def rule_thread_or_stream(tree):
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            parts = _dotted(node.func)
            hit = _pairs(parts) & THREADS
            if hit or parts[-1:] in (["Thread"], ["Stream"], ["ThreadPoolExecutor"], ["ProcessPoolExecutor"]):
                yield node.lineno, f"creates {'.'.join(parts)}"


def rule_exception_handler(tree):
    for node in ast.walk(tree):
        if isinstance(node, ast.ClassDef) and node.name == "ModelNew":
            for sub in ast.walk(node):
                if isinstance(sub, ast.Try) and sub.handlers:
                    yield sub.lineno, "try/except inside ModelNew"


def rule_file_write(tree):
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            parts = _dotted(node.func)
            if parts[-1:] in (["write_text"], ["write_bytes"], ["save"]) and parts[:1] != ["self"]:
                yield node.lineno, f"calls {'.'.join(parts)}"
            elif parts == ["open"] and len(node.args) > 1 and isinstance(node.args[1], ast.Constant) \
                    and any(m in str(node.args[1].value) for m in "wax+"):
                yield node.lineno, f"opens a file for writing (mode {node.args[1].value!r})"


STATIC_RULES = {"monkeypatch": rule_monkeypatch, "introspection": rule_introspection,
                "reads-problem": rule_reads_problem, "process-exit": rule_process_exit,
                "thread-or-stream": rule_thread_or_stream, "exception-handler": rule_exception_handler,
                "file-write": rule_file_write}


def static_flags(source: str, filename: str = "<candidate>") -> list[Flag]:
    """Run every AST rule over a candidate's source; one flag per rule, listing the lines it fired on."""
    try:
        tree = ast.parse(source, filename=filename)
    except SyntaxError:
        return []
    flags = []
    for name, rule in STATIC_RULES.items():
        hits = sorted(set(rule(tree)))
        if hits:
            flags.append(flag(name, "; ".join(f"line {ln}: {what}" for ln, what in hits[:5])))
    return flags


# --- runtime checks ----------------------------------------------------------------------------------

def timing_functions() -> dict:
    """Identities of everything the timer relies on, taken before the candidate is imported."""
    fns = {"time.perf_counter": time.perf_counter, "time.perf_counter_ns": time.perf_counter_ns,
           "time.monotonic": time.monotonic, "torch.cuda.synchronize": torch.cuda.synchronize,
           "torch.cuda.Event": torch.cuda.Event, "torch.cuda.Event.record": torch.cuda.Event.record,
           "torch.cuda.Event.elapsed_time": torch.cuda.Event.elapsed_time,
           "torch.cuda.Event.synchronize": torch.cuda.Event.synchronize,
           "torch.Tensor.zero_": torch.Tensor.zero_, "torch.equal": torch.equal, "torch.Tensor.clone": torch.Tensor.clone}
    return fns


def check_timer_identity(snapshot: dict) -> Flag | None:
    changed = [name for name, fn in timing_functions().items() if snapshot.get(name) is not fn]
    return flag("timer-tampered", f"replaced: {', '.join(changed)}") if changed else None


def live_threads() -> set[int]:
    return {t.ident for t in threading.enumerate() if t.is_alive()}


def check_threads(before: set[int]) -> Flag | None:
    new = [t for t in threading.enumerate() if t.is_alive() and t.ident not in before]
    if new:
        return flag("background-thread", f"{len(new)} thread(s) still running after forward returned: "
                                         f"{', '.join(t.name for t in new[:3])}")
    return None


# Host time covers launch overhead and Python; a candidate whose synchronised host time exceeds its device
# time by this factor AND this margin did its work somewhere the timed stream's events did not see.
SIDE_STREAM_FACTOR = 3.0
SIDE_STREAM_MARGIN_MS = 0.1


def check_side_stream(host_ms: float, device_ms: float, ref_host_ms: float, ref_device_ms: float) -> Flag | None:
    """Compare the candidate's host/device gap with the reference's own, so launch-bound references are fair."""
    ref_gap = max(ref_host_ms - ref_device_ms, 0.0)
    gap = host_ms - device_ms - ref_gap
    if host_ms > SIDE_STREAM_FACTOR * device_ms and gap > SIDE_STREAM_MARGIN_MS:
        return flag("side-stream", f"synchronised host time {host_ms:.3f} ms vs device time {device_ms:.3f} ms: "
                                   "work outside the timed stream")
    return None


SUSPICIOUS_SPEEDUP = 10.0


def check_suspicious_speed(speedup: float | None, floor_ms: float | None = None,
                           cand_ms: float | None = None) -> Flag | None:
    if floor_ms is not None and cand_ms is not None and cand_ms < floor_ms:
        return flag("suspicious-speed", f"{cand_ms:.4f} ms is faster than the roofline floor {floor_ms:.4f} ms")
    if speedup is not None and speedup > SUSPICIOUS_SPEEDUP:
        return flag("suspicious-speed", f"{speedup:.1f}x over eager (> {SUSPICIOUS_SPEEDUP:g}x): review by hand")
    return None


LIBRARY_SHARE_WARN = 0.5


# Attribute macros that may sit between __global__ and the kernel's name, each with a parenthesised argument.
_KERNEL_ATTRS = re.compile(r"\b__(?:launch_bounds|cluster_dims|maxnreg|grid_constant)__\s*\((?:[^()]|\([^()]*\))*\)")


def kernel_names(cuda_sources: list[str]) -> set[str]:
    """__global__ function names in the candidate's CUDA sources (profiler kernel names contain them)."""
    names = set()
    for src in cuda_sources:
        src = _KERNEL_ATTRS.sub(" ", src)
        names.update(m.group(1) for m in re.finditer(r"__global__\b[^;{()]*?\b(\w+)\s*\(", src))
    return names


def custom_kernel_share(fn, args, names: set[str]) -> tuple[float | None, str]:
    """Profile one call; (share of GPU kernel time in the candidate's own kernels, top kernels summary)."""
    from torch.profiler import ProfilerActivity, profile
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        fn(*args)
        torch.cuda.synchronize()
    total, custom, per = 0.0, 0.0, {}
    for evt in prof.events():
        if evt.device_type != torch.autograd.DeviceType.CUDA:
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
