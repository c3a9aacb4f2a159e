"""Command-line options for running at scale, shared by bench/check/build: which executor, how many GPUs
or CPU workers, which CUDA arch to compile for; and their checks, done before anything is built.

The options only set config keys (executor.*, build.arch), so a YAML config can set them too and every
path that runs jobs (bench, check, the gate's reruns, the Python API) sees the same choice.
"""
from __future__ import annotations

import typer

from .errors import InputError

GpusOpt = typer.Option(None, "--gpus", help="CUDA: one worker slot per GPU: all, a count (2) or GPU indices "
                                            "(0,2); jobs go to the next free GPU.")
WorkersOpt = typer.Option(None, "--workers", help="CPU backend: how many jobs run at once (default 1).")
ExecutorOpt = typer.Option(None, "--executor", help="local (this host; default) | ray (a Ray cluster; "
                                                    "pip install 'kbench\\[ray]').")   # \\[: not rich markup
RayAddressOpt = typer.Option(None, "--ray-address", help="Ray cluster address, e.g. auto or ray://head:10001 "
                                                         "(default: start a local Ray instance).")
ArchOpt = typer.Option(None, "--arch", help="CUDA arch to compile for, e.g. 9.0 (build.arch); with it, "
                                            "`kbench build --device cuda` needs no GPU (compile check).")


def overrides(gpus=None, workers=None, executor=None, ray_address=None, arch=None) -> dict:
    """Dotted config keys for the options that were given (None = not given)."""
    return {"executor.gpus": gpus, "executor.workers": workers, "executor.kind": executor,
            "executor.ray_address": ray_address, "build.arch": arch}


def check(cfg, device: str, given: dict | None = None, compile_only: bool = False) -> None:
    """Refuse combinations that cannot work, with the fix, before any build starts. `given`: overrides()."""
    given = {k: v for k, v in (given or {}).items() if v is not None}
    e = cfg.executor
    if e.kind == "ray":
        from .orchestrate.ray import require_ray
        require_ray()
        if "executor.gpus" in given or "executor.workers" in given:
            raise InputError("--gpus/--workers are for the local executor; with --executor ray, Ray places one "
                             "job per GPU (or CPU) of the whole cluster")
    elif device == "cuda":
        if "executor.workers" in given and e.workers != 1:
            raise InputError("--workers is for the CPU backend; on CUDA use --gpus N (one job per GPU at a time)")
        if e.gpus and not compile_only:
            from .orchestrate.local import make_slots
            make_slots(cfg, device)          # raises on a GPU that is not there
    elif "executor.gpus" in given:
        raise InputError("--gpus needs --device cuda; on the CPU backend use --workers N")
    if compile_only and device == "cuda" and cfg.build.arch == "auto":
        from .build import detect_arch
        if detect_arch() is None:
            raise InputError("--device cuda without a GPU: name the arch to compile for, e.g. --arch 9.0")
