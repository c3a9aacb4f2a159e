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
                  interpreted_on=("cpu",), requires="triton")


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
        record.calls[f"triton.{getattr(self.fn, '__name__', 'kernel')}"] += 1
        if not record.ablation["on"]:
            return run(self, *args, grid=grid, warmup=warmup, **kwargs)
        return ablated(lambda *a, **k: run(self, *a, grid=grid, warmup=warmup, **k), args, kwargs)

    cls.__init__, cls.run = registered, launched
