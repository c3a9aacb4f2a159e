"""Worker-side loading: import a .py file as its own module, and intercept load_inline while doing so.

The interceptor gives every extension a build directory keyed by a hash of everything that changes the
binary (sources, flags, torch/CUDA versions, target arch), so an unchanged candidate is never rebuilt and
two candidates never share a half-built directory. It records which functions each extension exports and
counts calls into them (integrity uses the counts), and keeps the compiler output of a failed build even
if the candidate swallows the exception.
"""
from __future__ import annotations

import contextlib
import fcntl

import hashlib
import importlib.util
import inspect
import json
import os
import sys
import time
from collections import Counter
from pathlib import Path

import torch

from ..integrity import kernel_names

KEY_VERSION = 1   # bump when the key's recipe changes


@contextlib.contextmanager
def _build_lock(build_dir: Path):
    """torch marks a build in progress with a `lock` file and waits while one exists, so a build killed mid-way
    (kbench stopped, a build timeout) left every later build of that extension waiting until its timeout. A
    flock, which dies with its holder, now guards the build: whoever holds it is the only builder, so a `lock`
    file it finds is stale and goes."""
    with open(build_dir / "kbench.lock", "a") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        try:
            (build_dir / "lock").unlink(missing_ok=True)
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


def _cpp_extension():
    """torch.utils.cpp_extension, imported on first use: its import asks torch.cuda.is_available(), which
    starts the CUDA driver (measured on the H200 host), and the reference process imports this module for
    import_file before it forks candidate processes, which a started driver forbids (forking.py)."""
    import torch.utils.cpp_extension as cpp_extension
    return cpp_extension


EXPECTED: dict[str, str] = {}     # real path -> sha256 the file must have (a reference process's problem)


def import_file(path: str | os.PathLike, module_name: str):
    """Execute `path` as module `module_name` (registered in sys.modules so pickling/dataclasses work). A path
    in EXPECTED is executed from the bytes read here, and only if they are the ones kbench planned with."""
    spec = importlib.util.spec_from_file_location(module_name, str(path))
    module = importlib.util.module_from_spec(spec)
    sys.modules[module_name] = module
    want = EXPECTED.get(os.path.realpath(path))
    if want is None:
        spec.loader.exec_module(module)
        return module
    source = Path(path).read_bytes()
    if hashlib.sha256(source).hexdigest() != want:
        raise RuntimeError(f"{path} changed after kbench planned this run (something rewrote it while the "
                           "candidates were built); run again with the file as it should be")
    exec(compile(source, str(path), "exec"), module.__dict__)
    return module


class BuildFailed(RuntimeError):
    """load_inline failed to compile or link; the message holds the compiler output."""


def noise_like(out):
    """Garbage of the same structure, shapes and dtypes as an extension function's result (the ablation)."""
    if isinstance(out, torch.Tensor):
        if out.is_floating_point() or out.is_complex():
            return torch.randn_like(out) * 1e3
        if out.dtype == torch.bool or out.numel() < 2:
            return torch.randint_like(out, 0, 2)
        # integers are often indices: its own values shuffled stay in range, so an honest forward that
        # gathers with them survives (a forward that fails under the ablation is flagged, judge/evidence.py)
        flat = out.detach().reshape(-1)
        return flat[torch.randperm(flat.numel(), device=flat.device)].reshape(out.shape)
    if isinstance(out, (list, tuple)):
        return type(out)(noise_like(o) for o in out)
    return out


def _float_tensors(args, kwargs) -> list:
    found, stack = [], list(args) + list(kwargs.values())
    while stack:
        a = stack.pop()
        if isinstance(a, (list, tuple)):
            stack.extend(a)
        elif isinstance(a, torch.Tensor) and a.is_floating_point() and a.numel():
            found.append(a)
    return found


def _bytes(t: torch.Tensor) -> torch.Tensor:
    """t's values as bytes (NaN payloads compare too). contiguous() first: a strided view (a layout trial's
    argument, a 1-D slice with a step) cannot be viewed as bytes in place."""
    return t.detach().contiguous().reshape(-1).view(torch.uint8)


def ablated(fn, args, kwargs):
    """fn(*args, **kwargs) with its result replaced by noise. Results written into arguments (out-parameters,
    a Triton kernel's pointers) are results too: noise over every floating argument the call changed, so an
    honest out= kernel is not mistaken for one doing nothing."""
    before = [(t, _bytes(t).clone()) for t in _float_tensors(args, kwargs)]
    out = fn(*args, **kwargs)
    for t, old in before:
        if not torch.equal(_bytes(t), old):
            t.copy_(noise_like(t))
    return noise_like(out)


@contextlib.contextmanager
def nan_filled_allocations(torch):
    """During the ablation's call, torch.empty & co. return NaN-filled floating tensors. A fresh buffer can hold,
    byte for byte, an answer a previous call freed (the allocator hands the block back), and a kernel writing
    that same answer into it looked like a no-op (`ablated` sees writes as changed bytes): an honest Triton
    kernel was flagged. Poisoned, every real write changes bytes."""
    names = [(torch, "empty"), (torch, "empty_like"), (torch, "empty_strided"), (torch.Tensor, "new_empty")]
    saved = [(owner, name, getattr(owner, name)) for owner, name in names]

    def poisoned(fn):
        def alloc(*args, **kwargs):
            t = fn(*args, **kwargs)
            if t.is_floating_point():
                t.fill_(float("nan"))
            return t
        return alloc
    try:
        for owner, name, fn in saved:
            setattr(owner, name, poisoned(fn))
        yield
    finally:
        for owner, name, fn in saved:
            setattr(owner, name, fn)


class CountingModule:
    """Stands in for a compiled extension module; counts calls into its exported functions. While
    `ablation["on"]`, each call still runs but returns noise_like(its result): if the forward's output is
    still right, the candidate's compiled code did not compute it."""

    def __init__(self, module, functions, counts: Counter, ext: str, ablation: dict | None = None):
        self._module, self._functions, self._counts, self._ext = module, set(functions), counts, ext
        self._ablation = ablation if ablation is not None else {"on": False}
        self._wrapped = {}

    def __getattr__(self, attr):
        value = getattr(self._module, attr)
        if attr not in self._functions or not callable(value):
            return value
        if attr not in self._wrapped:
            counts, key, ablation = self._counts, f"{self._ext}.{attr}", self._ablation

            def counted(*args, **kwargs):
                counts[key] += 1
                return ablated(value, args, kwargs) if ablation["on"] else value(*args, **kwargs)
            counted.__name__ = attr
            self._wrapped[attr] = counted
        return self._wrapped[attr]


RECIPE = ("name", "cpp_sources", "cuda_sources", "sycl_sources", "functions", "extra_cflags", "extra_cuda_cflags",
          "extra_sycl_cflags", "extra_ldflags", "extra_include_paths", "with_cuda", "is_python_module",
          "with_pytorch_error_handling", "use_pch")


def extension_key(args: dict) -> str:
    """What the binary depends on: the build directory's name, computed alike where it is built (compiler.py)
    and wherever it is loaded."""
    recipe = {k: args.get(k) for k in RECIPE}
    recipe.update(torch=torch.__version__, cuda=torch.version.cuda, arch=os.environ.get("TORCH_CUDA_ARCH_LIST"),
                  python=sys.version_info[:2], key_version=KEY_VERSION)
    return hashlib.sha256(json.dumps(recipe, sort_keys=True, default=str).encode()).hexdigest()[:20]


def extension_record(a: dict, key: str, cached: bool) -> dict:
    functions = a.get("functions") or []
    functions = list(functions.keys()) if isinstance(functions, dict) else \
        [functions] if isinstance(functions, str) else list(functions)
    cuda_sources = a.get("cuda_sources") or []
    cuda_sources = [cuda_sources] if isinstance(cuda_sources, str) else list(cuda_sources)
    return {"name": a["name"], "key": key, "functions": functions, "arch": os.environ.get("TORCH_CUDA_ARCH_LIST"),
            "backend": "cuda" if cuda_sources else "cpu", "kernels": sorted(kernel_names(cuda_sources)),
            "cached": cached, "seconds": 0.0}


class BuildInterceptor:
    """`remote` (the build's sandboxed import, compiler.py): each load_inline's arguments go to the trusted
    compiler, which builds them into the cache, and the module is loaded from there; the import never
    compiles, forks or writes. `compile=False` (the run-time candidate process, which may not start processes or write files):
    load what the build phase made for the same key, straight from its build directory, and never compile."""

    def __init__(self, cache_root: Path, verbose: bool = False, compile: bool = True, remote=None):
        self.cache_root = Path(cache_root).expanduser()
        self.verbose, self.compile, self.remote = verbose, compile and remote is None, remote
        self.extensions: list[dict] = []      # one record per load_inline call
        self.failure: str | None = None       # compiler output of the first failed build
        self.calls: Counter = Counter()       # "ext.function" -> calls
        self.ablation = {"on": False}         # shared with every CountingModule (see there)
        self._original = _cpp_extension().load_inline
        self._signature = inspect.signature(self._original)

    def install(self) -> None:
        _cpp_extension().load_inline = self.load_inline

    def load_inline(self, *args, **kwargs):
        bound = self._signature.bind(*args, **kwargs)
        bound.apply_defaults()
        a = bound.arguments
        if self.remote is not None:
            record, failure = self.remote({k: a[k] for k in RECIPE if k in a})
            if record is None:
                self.failure = self.failure or failure
                raise BuildFailed(failure)
            key, ready = record["key"], True
        else:
            key = extension_key(a)
        build_dir = self.cache_root / f"{a['name']}-{key}"
        if self.compile:
            build_dir.mkdir(parents=True, exist_ok=True)
        a["build_directory"] = str(build_dir)
        a["verbose"] = self.verbose
        if self.remote is None:
            record = extension_record(a, key, (build_dir / "kbench.ok").exists())
            ready = record["cached"]
        functions = record["functions"]
        self.extensions.append(record)
        start = time.perf_counter()
        try:
            if self.compile:
                with _build_lock(build_dir):
                    module = self._original(**a)
            else:
                module = self._load_built(a, build_dir, ready)
        except Exception as e:   # compiler or linker error: keep the output, then let the candidate see it
            self.failure = self.failure or f"{type(e).__name__}: {e}"
            record["cached"] = False
            raise BuildFailed(str(e)) from None
        finally:
            record["seconds"] = round(time.perf_counter() - start, 3)
        if self.compile:
            (build_dir / "kbench.ok").touch()
        if not a.get("is_python_module", True):
            return module
        return CountingModule(module, functions, self.calls, a["name"], self.ablation)

    @staticmethod
    def _load_built(a: dict, build_dir: Path, ready: bool):
        """torch's own last step of load_inline (import the built library), without ninja or a compiler."""
        if not ready:
            raise RuntimeError(f"extension '{a['name']}' was not built by the build phase under this key "
                               "(do its sources change between imports?)")
        return _cpp_extension()._import_module_from_library(a["name"], str(build_dir), a.get("is_python_module", True))
