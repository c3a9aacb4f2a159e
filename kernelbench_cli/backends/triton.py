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
                  interpreted_on=("cpu",), requires="triton", warms_on=("cuda", "cpu"))
CHECK_ARCH = 90        # on the CPU, interpreted kernels are also compiled for sm_90 (the H200): they must build there
TYPES = {"float32": "fp32", "float16": "fp16", "bfloat16": "bf16", "float64": "fp64", "int64": "i64",
         "int32": "i32", "int16": "i16", "int8": "i8", "uint8": "u8", "bool": "i1"}


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
        _patch(cls, record, ablated, device)
    _patch_autotuner(autotuner.Autotuner, record, device)
    if device == "cpu":
        _index_of_one_element(interpreter)


def _index_of_one_element(interpreter) -> None:
    """Triton 3.6's interpreter (torch 2.11's) turns a kernel's run-time scalar into a Python int with int() of a
    one-element array, which NumPy 2 refuses ("only 0-dimensional arrays..."): every interpreted kernel looping
    to a run-time bound failed there. Newer Triton squeezes first; so does this, after the interpreter's own."""
    patch = getattr(interpreter, "_patch_lang_tensor", None)
    if patch is None or getattr(patch, "kbench", False):
        return

    def patched(tensor, scope):
        patch(tensor, scope)
        scope.set_attr(tensor, "__index__", lambda self: int(self.handle.data.squeeze()))
    patched.kbench = True
    interpreter._patch_lang_tensor = patched


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

    def tuned(self, *args, **kwargs):
        saved = self.configs
        if device == "cpu" and len(saved) > 1:
            # Interpreted: nothing to benchmark on, so the first config that survives pruning, as the only one
            # for this call (times are not speeds; Triton 3.6 benchmarks even one pruned config, through a GPU
            # driver that a CPU job does not have)
            self.nargs = dict(zip(self.arg_names, args))
            self.configs = prune(self, kwargs)[:1]
        try:
            out = run(self, *args, **kwargs)
        finally:
            self.configs = saved
        name = getattr(self.base_fn, "__name__", "")
        for rec in record.extensions:
            if rec.get("backend") == "triton" and rec["name"] == name:
                rec["config"] = str(self.best_config) + (" (interpreted: the first config, not tuned)"
                                                         if device == "cpu" else "")
        return out
    cls.run = tuned


def _patch(cls, record, ablated, device: str) -> None:
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
        if device == "cpu":         # what the GPU compile check compiles (a few distinct launches per kernel)
            launch = _signature(self.fn, args, kwargs)
            for rec in record.extensions:
                if rec.get("backend") == "triton" and rec["name"] == name and launch:
                    seen = rec.setdefault("launches", [])
                    if launch not in seen and len(seen) < 8:
                        seen.append(launch)
        if not record.ablation["on"]:
            return run(self, *args, grid=grid, warmup=warmup, **kwargs)
        return ablated(lambda *a, **k: run(self, *a, grid=grid, warmup=warmup, **k), args, kwargs)

    cls.__init__, cls.run = registered, launched


def _signature(fn, args: tuple, kwargs: dict) -> dict | None:
    """A launch as Triton's compiler takes it: {signature: {arg: type}, constexprs: {arg: value}, options}; None
    where an argument has no plain compile-time form (it is then not compile-checked)."""
    import torch
    params = list(inspect.signature(fn).parameters.values())
    given = dict(zip([p.name for p in params], args)) | {k: v for k, v in kwargs.items()
                                                          if k in {p.name for p in params}}
    sig, const = {}, {}
    for p in params:
        v = given.get(p.name, p.default)
        ann = p.annotation if isinstance(p.annotation, str) else getattr(p.annotation, "__name__", "")
        if ann.endswith("constexpr") or v is None:
            if not isinstance(v, (bool, int, float, str, type(None))):
                return None
            sig[p.name], const[p.name] = "constexpr", v
        elif isinstance(v, torch.Tensor):
            t = TYPES.get(str(v.dtype).removeprefix("torch."))
            if t is None:
                return None
            sig[p.name] = "*" + t
        elif isinstance(v, bool):
            sig[p.name] = "i1"
        elif isinstance(v, int):
            sig[p.name] = "i32" if -2**31 <= v < 2**31 else "i64"
        elif isinstance(v, float):
            sig[p.name] = "fp32"
        else:
            return None
    options = {k: kwargs[k] for k in ("num_warps", "num_stages", "num_ctas", "maxnreg") if kwargs.get(k) is not None}
    return {"signature": sig, "constexprs": const, "options": options}


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


def warm(module, msg: dict, device: str, extensions: list) -> None:
    """The build process. On a GPU: the candidate's forward on every specialisation the job will launch — the
    problem's inputs (a public seed), the shapes variants' sizes and the layout variants' views — so Triton
    compiles (and autotunes) here, into its cache, and the sandboxed run-time process only loads cubins. On
    the CPU: one interpreted forward at the problem's sizes records its launches, which `check` then compiles
    for the GPU (gpu_compile_check): the interpreter runs what no GPU could (raises what does not compile)."""
    if device == "cpu":
        if msg.get("too_big"):     # (sized by the build process before its sandbox: candidate/build.py)
            return              # its jobs are not run on the CPU either
        return _warm_at(module, msg, device, [{}], layouts=False)
    warm_specialisations(module, msg, device)


def check(msg: dict, device: str, extensions: list) -> None:
    if device == "cpu":
        gpu_compile_check(msg, extensions)


def warm_specialisations(module, msg: dict, device: str) -> None:
    """The forward at the problem's sizes and both shapes variants' sizes, and on the layout views."""
    from ..candidate.loading import import_file
    from ..judge.shapes import SHAPE_KINDS, size_names
    problem = import_file(msg["problem_path"], "kbench_warm_problem")
    names = size_names(problem)
    saved = {n: getattr(problem, n) for n in names}
    _warm_at(module, msg, device, [{}] + [{n: fn(v) for n, v in saved.items()} for fn in SHAPE_KINDS.values()]
             if names else [{}], layouts=True, problem=problem)


def _warm_at(module, msg: dict, device: str, size_sets: list, layouts: bool, problem=None) -> None:
    """The candidate's forward at each set of module-level sizes (public seed), and on layout views if asked."""
    import torch

    from ..candidate.loading import import_file
    problem = problem or import_file(msg["problem_path"], "kbench_warm_problem")
    dtype = getattr(torch, msg.get("dtype", "float32"))
    saved = {n: getattr(problem, n) for s in size_sets for n in s}
    for sizes in size_sets:
        try:
            _warm_sizes(module, problem, sizes, device, dtype, layouts and not sizes)
        finally:
            for n, v in saved.items():
                setattr(problem, n, v)


def _warm_sizes(module, problem, sizes: dict, device: str, dtype, layouts: bool) -> None:
    import torch

    from ..correctness import construct, make_inputs
    from ..layouts import layout_specs, layout_variant
    try:
        for n, v in sizes.items():
            setattr(problem, n, v)
        model = construct(module.ModelNew, list(problem.get_init_inputs()), device, dtype, 0)
        inputs = make_inputs(problem, 0, device, dtype)
        calls = [("", inputs)] + [(name, [layout_variant(x, v) for x, v in zip(inputs, views)])
                                  for name, views in (layout_specs(inputs) if layouts else [])]
    except Exception as e:
        return _warm_failed(e, sizes, "")
    for name, args in calls:       # one call per layout: a candidate may refuse one and take the next
        try:
            with torch.no_grad():
                model(*args)
            if device == "cuda":
                torch.cuda.synchronize()
        except Exception as e:
            _warm_failed(e, sizes, name)


def _warm_failed(e: Exception, sizes: dict, layout: str) -> None:
    if type(e).__module__.startswith("triton") and "Compil" in type(e).__name__:
        raise e                        # a kernel that does not compile: the build's failure
    where = f"sizes {sizes or 'of the problem'}" + (f", {layout} inputs" if layout else "")
    print(f"kbench: warm-up at {where} raised {type(e).__name__}: {e}"[:500])


def gpu_compile_check(msg: dict, extensions: list) -> None:
    """Compile every launch the interpreted forward made for sm_90, in a process of its own without the
    interpreter (Triton's compiler needs no GPU; ptxas ships with the wheel): raises for a kernel that does not
    compile; notes on each kernel's record what was checked."""
    import json
    import subprocess
    import sys
    kernels = [{"name": r["name"], "launches": r["launches"]} for r in extensions
               if r.get("backend") == "triton" and r.get("launches")]
    if not kernels:
        return
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    env["TRITON_CACHE_DIR"] = str(Path(msg["cache_dir"]).expanduser() / f"triton-sm{CHECK_ARCH}")
    job = {"candidate_path": msg["candidate_path"], "cache_dir": msg["cache_dir"], "arch": CHECK_ARCH,
           "kernels": kernels}
    try:
        proc = subprocess.run([sys.executable, "-m", "kernelbench_cli.backends.triton_check"], input=json.dumps(job),
                              capture_output=True, text=True, env=env, timeout=600)
        got = json.loads(proc.stdout.strip().splitlines()[-1])
    except (subprocess.TimeoutExpired, ValueError, IndexError) as e:
        note = f"not checked: the compile check did not finish ({type(e).__name__})"
        got = {"errors": [], "notes": {k["name"]: note for k in kernels}}
    for r in extensions:
        if r.get("backend") == "triton" and r["name"] in got.get("notes", {}):
            r["gpu_check"] = got["notes"][r["name"]]
    if got["errors"]:
        raise RuntimeError(f"does not compile for sm_{CHECK_ARCH} (the interpreter ran it): {got['errors'][0]}"[:600])
