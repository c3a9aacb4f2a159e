"""Roofline: the least work a problem needs and the fastest this device could do it.

FLOPs come from torch's FLOP formulas (those of FlopCounterMode) summed over the reference's ops (it counts matmuls, convolutions and attention;
element-wise work is treated as free). Minimum bytes = inputs + parameters/buffers read once + outputs
written once. Ceilings are measured on the device by `kbench calibrate` and cached per device name:
copy bandwidth (bytes read + written per second of a large device copy) and matmul rate per dtype.
The floor time is the larger of FLOPs / rate and bytes / bandwidth; "% of speed of light" = floor / time.

For float32 the matmul ceiling is the larger of plain fp32 and a third of the TF32 rate: split-precision
3xTF32 kernels reach fp32 accuracy on tensor cores, so the plain fp32 rate would be a false floor.
"""
from __future__ import annotations

import json
import os
import re
import time
from pathlib import Path

import torch

CALIBRATE_COPY_BYTES = 1 << 30      # 1 GiB: far past any cache
CALIBRATE_MATMUL_N = {"cuda": 8192, "cpu": 1024}
CALIBRATE_REPEATS = 10


def _flop_mode():
    """A dispatch mode that sums torch's own FLOP formulas (torch.utils.flop_counter.flop_registry) over the
    ops a forward runs. Not FlopCounterMode itself: a dispatch mode that lets torch wrap it against Dynamo
    imports torch._dynamo on first use (2.6 s on the CI box, ~6 s on the H200, on every problem's first
    job); this one opts out (`_should_skip_dynamo`; it never runs under torch.compile)."""
    from torch.utils._python_dispatch import TorchDispatchMode
    from torch.utils.flop_counter import flop_registry

    class FlopSum(TorchDispatchMode):
        @classmethod
        def _should_skip_dynamo(cls) -> bool:
            return False

        def __init__(self):
            super().__init__()
            self.total = 0

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            kwargs = kwargs or {}
            out = func(*args, **kwargs)
            formula = flop_registry.get(func._overloadpacket)
            if formula is not None:
                self.total += int(formula(*args, **kwargs, out_val=out))
            return out

    return FlopSum()


def count(ref, inputs, outputs) -> dict:
    with torch.no_grad(), _flop_mode() as counter:
        ref(*inputs)
    nbytes = lambda ts: sum(t.numel() * t.element_size() for t in ts if isinstance(t, torch.Tensor))  # noqa: E731
    state = list(ref.parameters()) + list(ref.buffers())
    outs = outputs if isinstance(outputs, (list, tuple)) else [outputs]
    # The matmul ceiling to use is the operands' dtype (a bf16 problem under a float32 run stays bf16).
    floats = [t for t in inputs if isinstance(t, torch.Tensor) and t.is_floating_point()]
    dtype = str(max(floats, key=torch.Tensor.numel).dtype).removeprefix("torch.") if floats else None
    return {"flops": counter.total, "bytes": int(nbytes(inputs) + nbytes(state) + nbytes(outs)),
            "dtype": dtype}


def floor(work: dict, ceilings: dict, dtype: str) -> dict:
    """Floor time (ms) and which resource bounds it; `dtype` (the run's) is used when the work has none."""
    rate = ceilings["matmul_tflops"].get(work.get("dtype") or dtype) or ceilings["matmul_tflops"]["float32"]
    compute_ms = work["flops"] / (rate * 1e12) * 1e3
    memory_ms = work["bytes"] / (ceilings["copy_gbps"] * 1e9) * 1e3
    return {**work, "floor_ms": max(compute_ms, memory_ms), "bound": "compute" if compute_ms > memory_ms else "memory"}


def device_slug(device: str) -> str:
    name = torch.cuda.get_device_name() if device == "cuda" else f"cpu-{torch.get_num_threads()}threads"
    return re.sub(r"[^A-Za-z0-9]+", "-", name).strip("-").lower()


def ceilings_path(root: str, device: str) -> Path:
    """paths.ceilings/<device>.json; with the default root and KBENCH_CACHE_DIR set, under that folder instead
    (all of kbench's cache in the one place the user named)."""
    from .config import Paths
    env = os.environ.get("KBENCH_CACHE_DIR")
    if env and root == Paths().ceilings:
        root = str(Path(env) / "ceilings")
    return Path(root).expanduser() / f"{device_slug(device)}.json"


def load_ceilings(root: str, device: str) -> dict | None:
    path = ceilings_path(root, device)
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return None


def _time_ms(fn, device: str, repeats: int = CALIBRATE_REPEATS) -> float:
    fn()
    sync = torch.cuda.synchronize if device == "cuda" else (lambda: None)
    times = []
    for _ in range(repeats):
        sync()
        t0 = time.perf_counter()
        fn()
        sync()
        times.append((time.perf_counter() - t0) * 1e3)
    return sorted(times)[len(times) // 2]


def calibrate(device: str) -> dict:
    """Measure copy bandwidth and matmul rates on random data (zeros run faster: not a ceiling)."""
    n_copy = CALIBRATE_COPY_BYTES // 4 // (8 if device == "cpu" else 1)
    src = torch.rand(n_copy, device=device)
    dst = torch.empty_like(src)
    copy_ms = _time_ms(lambda: dst.copy_(src), device)
    n = CALIBRATE_MATMUL_N[device]
    rates = {}
    modes = [("float32", torch.float32, False), ("tf32", torch.float32, True)] if device == "cuda" else \
        [("float32", torch.float32, False)]
    if device == "cuda":
        modes += [("bfloat16", torch.bfloat16, False), ("float16", torch.float16, False)]
    saved = torch.backends.cuda.matmul.allow_tf32
    try:
        for name, dtype, tf32 in modes:
            torch.backends.cuda.matmul.allow_tf32 = tf32
            a, b = torch.randn(n, n, device=device, dtype=dtype), torch.randn(n, n, device=device, dtype=dtype)
            rates[name] = 2 * n ** 3 / (_time_ms(lambda: a @ b, device) * 1e-3) / 1e12
    finally:
        torch.backends.cuda.matmul.allow_tf32 = saved
    rates["float32_simt"] = rates["float32"]
    if "tf32" in rates:
        rates["float32"] = max(rates["float32"], rates["tf32"] / 3)
    return {"device": device_slug(device), "copy_gbps": 2 * n_copy * 4 / (copy_ms * 1e-3) / 1e9,
            "matmul_tflops": rates, "torch": torch.__version__, "measured_at": time.strftime("%Y-%m-%d %H:%M:%S")}


def meta_work(problem, dtype: torch.dtype) -> dict | None:
    """FLOPs and bytes of one forward, counted on the meta device (shapes only: no memory, no time); None if
    the problem needs real data to run (or fails). For sizing a run before it starts."""
    try:
        with torch.device("meta"):
            model = problem.Model(*problem.get_init_inputs())
            inputs = list(problem.get_inputs())
        model = model.to(device="meta", dtype=dtype)
        inputs = [x.to(dtype) if isinstance(x, torch.Tensor) and x.dtype == torch.float32 else x for x in inputs]
        with torch.no_grad():
            return count(model, inputs, model(*inputs))
    except Exception:
        return None


CPU_FLOPS, CPU_BYTES_PER_S = 5e10, 5e9     # rough rates of a small CPU box, for the estimates below only
INTERPRETER_SLOWDOWN = 100     # rough: an interpreted kernel (Triton on the CPU) against the CPU's own code
INTERPRETED_BUDGET_S = 20.0    # three forwards of an interpreted candidate, estimated; beyond it: not run


def cpu_seconds(problem_path: str, dtype: str) -> tuple[float, str]:
    """Estimated seconds of three forwards of the problem on this CPU (two and the inputs), and what a forward
    does, from its FLOPs and bytes counted on the meta device; (0, "") if it cannot be sized."""
    from .candidate.loading import import_file
    from .correctness import DTYPES
    try:
        work = meta_work(import_file(problem_path, "kbench_cpu_sizing"), DTYPES[dtype])
    except Exception:
        return 0.0, ""
    if not work:
        return 0.0, ""
    est = 3 * (work["flops"] / CPU_FLOPS + work["bytes"] / CPU_BYTES_PER_S)
    return est, f"a forward does {work['flops'] / 1e9:.0f} GFLOP over {work['bytes'] / 2**30:.1f} GiB"


def too_big_to_interpret(problem_path: str, dtype: str) -> str:
    """Why an interpreted candidate (Triton on the CPU) of this problem is not run here ("" if it is): at a
    GPU problem's sizes the interpreter would take many minutes for a verdict that a GPU gives in seconds."""
    est, what = cpu_seconds(problem_path, dtype)
    if est * INTERPRETER_SLOWDOWN <= INTERPRETED_BUDGET_S:
        return ""
    return (f"not run on the CPU: {what}, ~{est * INTERPRETER_SLOWDOWN / 60:.0f} min in the interpreter; "
            "run it with --device cuda")
