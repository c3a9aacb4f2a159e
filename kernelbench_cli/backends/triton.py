"""Triton: @triton.jit kernels (and triton.autotune) launched from the candidate's forward.

CUDA: compiled by Triton at first launch; the build process warms the candidate (a forward on the problem's
inputs, public seed), so compilation and autotuning happen there, off the clock, into Triton's own cache
(content-keyed, under kbench's cache folder) with autotune results cached too; the run-time process finds
them there. CPU: Triton's interpreter (TRITON_INTERPRET=1) on CPU tensors, for correctness and
generalisation; its times are not speeds. Autotuning with several configs needs a GPU to benchmark on, so
under the interpreter the first config is used (recorded).

Proof of custom work, as for compiled extensions: every launch is counted, the ablation replaces whatever a
launch wrote into its tensor arguments with noise, and the attribution profile knows the kernels by their
function names.
"""
from __future__ import annotations

import hashlib
import inspect
import os
from pathlib import Path

from .base import Backend, imports

BACKEND = Backend("triton", ("cuda", "cpu"), lambda tree: imports(tree, "triton"), hook="triton",
                  interpreted_on=("cpu",), requires="triton", warms_on=("cuda",))


def install(record, device: str, cache_dir: str) -> None:
    if device == "cpu":
        os.environ["TRITON_INTERPRET"] = "1"      # read when triton.jit decorates: before the candidate imports
    else:
        os.environ["TRITON_CACHE_DIR"] = str(Path(cache_dir).expanduser() / "triton")
        os.environ["TRITON_CACHE_AUTOTUNING"] = "1"   # the build's tuning is what the run-time process uses
    try:
        from triton.runtime import autotuner, interpreter, jit
    except Exception:         # no triton: the candidate's own import says so (import-error)
        return
    from ..candidate.loading import ablated
    for cls in (jit.JITFunction, interpreter.InterpretedFunction):
        _patch(cls, record, ablated)
    _patch_autotuner(autotuner.Autotuner, record, device)


def prepare(device: str) -> None:
    """On a GPU, Triton's first launch in a process runs `ldconfig -p` (to find libcuda), loads its C utilities
    (compiled into its cache by the build process) and asks ptxas its version for the cache key: subprocesses
    the sandbox refuses. All three happen here, before it, once; after it, launches only read the cache."""
    if device != "cuda":
        return
    try:
        from triton.runtime.driver import driver
        target = driver.active.get_current_target()
        from triton.compiler.compiler import make_backend
        make_backend(target).hash()
    except Exception as e:     # the first launch will fail with the reason; say it here too
        import sys
        print(f"kbench: Triton's driver did not come up before the sandbox: {type(e).__name__}: {e}"[:400],
              file=sys.stderr)


def _patch_autotuner(cls, record, device: str) -> None:
    """The config each autotuned kernel ran with goes into its record (the result's build.extensions)."""
    prune, run = cls.prune_configs, cls.run

    def first_config(self, kwargs):
        return prune(self, kwargs)[:1]    # nothing to benchmark on: the first config (times are not speeds)

    def tuned(self, *args, **kwargs):
        out = run(self, *args, **kwargs)
        name = getattr(self.base_fn, "__name__", "")
        for rec in record.extensions:
            if rec.get("backend") == "triton" and rec["name"] == name:
                rec["config"] = str(self.best_config) + (" (interpreted: the first config, not tuned)"
                                                         if device == "cpu" else "")
        return out
    if device == "cpu":
        cls.prune_configs = first_config
    cls.run = tuned


def _patch(cls, record, ablated) -> None:
    init, run = cls.__init__, cls.run

    def registered(self, fn, *args, **kwargs):
        init(self, fn, *args, **kwargs)
        name = getattr(fn, "__name__", "kernel")
        if getattr(fn, "__module__", "").split(".")[0] == "triton":
            return                  # Triton's own library functions (tl.sum, tl.cdiv...)
        try:
            source = inspect.getsource(fn)
        except (OSError, TypeError):
            source = name
        key = hashlib.sha256(source.encode()).hexdigest()[:20]
        if any(r["name"] == name and r["key"] == key for r in record.extensions):
            return
        record.extensions.append({"name": name, "key": key, "functions": [name], "kernels": [name],
                                  "backend": "triton", "cached": True, "seconds": 0.0})

    def launched(self, *args, grid, warmup, **kwargs):
        if warmup:
            return run(self, *args, grid=grid, warmup=warmup, **kwargs)
        name = getattr(self.fn, "__name__", "kernel")
        _check_arguments(name, list(args) + list(kwargs.values()))
        record.calls[f"triton.{name}"] += 1
        if not record.ablation["on"]:
            return run(self, *args, grid=grid, warmup=warmup, **kwargs)
        return ablated(lambda *a, **k: run(self, *a, grid=grid, warmup=warmup, **k), args, kwargs)

    cls.__init__, cls.run = registered, launched


def _check_arguments(kernel: str, args: list) -> None:
    """A kernel takes tensors, scalars, dtypes, constexprs and other kernels. Anything else (an object with its
    own operators, a tensor subclass with __torch_function__) would run the candidate's Python inside the
    interpreted kernel, which no GPU could compile."""
    import torch
    import triton
    import triton.language as tl
    from triton.runtime.jit import KernelInterface
    plain = (bool, int, float, str, type(None), tl.dtype, tl.constexpr, KernelInterface, triton.Config)
    while args:
        a = args.pop()
        if isinstance(a, (tuple, list)):
            args.extend(a)
        elif isinstance(a, torch.Tensor):
            if type(a) not in (torch.Tensor, torch.nn.Parameter):
                raise TypeError(f"Triton kernel {kernel}: argument of type {type(a).__name__}, a tensor subclass "
                                "(pass a plain tensor)")
        elif not isinstance(a, plain) and type(a).__name__ != "TensorDescriptor":
            raise TypeError(f"Triton kernel {kernel}: argument of type {type(a).__name__}; kernels take tensors, "
                            "numbers, dtypes and constexprs")


def warm(module, msg: dict, device: str) -> None:
    """The build process on a GPU: the candidate's forward on every specialisation the job will launch — the
    problem's inputs (a public seed), the shapes variants' sizes and the layout variants' views — so Triton
    compiles (and autotunes) here, into its cache, and the sandboxed run-time process only loads cubins."""
    import torch

    from ..candidate.loading import import_file
    from ..correctness import construct, make_inputs
    from ..judge.shapes import SHAPE_KINDS, size_names
    from ..layouts import layout_perms, permuted_view
    problem = import_file(msg["problem_path"], "kbench_warm_problem")
    dtype = getattr(torch, msg.get("dtype", "float32"))
    names = size_names(problem)
    saved = {n: getattr(problem, n) for n in names}
    for sizes in [{}] + [{n: fn(v) for n, v in saved.items()} for fn in SHAPE_KINDS.values()] if names else [{}]:
        try:
            for n, v in sizes.items():
                setattr(problem, n, v)
            model = construct(module.ModelNew, list(problem.get_init_inputs()), device, dtype, 0)
            inputs = make_inputs(problem, 0, device, dtype)
            with torch.no_grad():
                model(*inputs)
                for _, perms in layout_perms(inputs) if not sizes else []:
                    model(*[permuted_view(x, p) for x, p in zip(inputs, perms)])
            torch.cuda.synchronize()
        except Exception as e:
            if type(e).__module__.startswith("triton") and "Compil" in type(e).__name__:
                raise                  # a kernel that does not compile: the build's failure
            print(f"kbench: warm-up at sizes {sizes or 'of the problem'} raised {type(e).__name__}: {e}"[:500])
        finally:
            for n, v in saved.items():
                setattr(problem, n, v)
