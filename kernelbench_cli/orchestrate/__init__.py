"""Orchestration (the parent): plan typed job specs, build each candidate once in a build process, and
run each job through its problem's reference process on this host's slots or on a Ray cluster. The parent
never imports problem or candidate code; see docs/architecture.md."""
from __future__ import annotations

import os

from pathlib import Path

from .plan import Job, JobSpec, file_error_result, plan

__all__ = ["Job", "JobSpec", "plan", "execute", "run_reference_only", "file_error_result", "resolve_device"]


def resolve_device(device: str, compile_only: bool = False) -> str:
    """auto -> cuda if a GPU is visible, else cpu. compile_only (`kbench build`): --device cuda is allowed
    without a GPU, to compile for --arch. Reads the GPU count through nvidia-smi, so the parent needs no torch."""
    from ..build import detect_arch
    from ..errors import InputError
    has_cuda = detect_arch() is not None
    if device == "cuda" and not has_cuda and not compile_only:
        raise InputError("--device cuda: no CUDA GPU is visible here; use --device cpu (or auto)")
    return device if device != "auto" else ("cuda" if has_cuda else "cpu")


def execute(jobs: list, cfg, device: str, store, console, build_only: bool = False, on_result=None) -> list:
    """Build every candidate once and judge each job, on the executor the config names; Results in job order.
    While it runs, this process cannot be read or traced by the processes it starts (PR_SET_DUMPABLE 0:
    /proc/<pid>/environ, mem and ptrace need privileges the candidates dropped); the run's files are checked
    against what the parent wrote, and put back if a build process changed them."""
    from .. import sandbox, trace
    trace.mark("parent", f"execute {len(jobs)} job(s)")
    with sandbox.not_dumpable():
        try:
            if cfg.executor.kind == "ray":
                from .ray import execute_ray
                return execute_ray(jobs, cfg, device, store, console, build_only=build_only, on_result=on_result)
            from .local import execute_local
            return execute_local(jobs, cfg, device, store, console, build_only=build_only, on_result=on_result)
        finally:
            if not store.verify() or store.restored:   # at the end, when no other process of the run is left
                console.print(f"warning: {store.results_file} was changed by another process during the run "
                              f"({store.restored} time(s)); kbench restored what it had recorded", highlight=False)
            store.reveal()         # the secret seeds, now that no candidate is left to read them


def run_reference_only(mode: str, problems: list, cfg, device: str, store, console, parallel: int = 1,
                       record: bool = True) -> list:
    """Reference processes without a candidate: "lint" runs each problem's reference; "calibrate" (problem
    None) measures the device's ceilings; "precompile" compiles each problem's torch.compile baseline into
    Inductor's cache (untimed work: `parallel` at once). record: results into the run's results.jsonl."""
    from concurrent.futures import ThreadPoolExecutor
    from ..build import build_env
    from .collect import progress_bar
    from .judges import JudgeClient
    env = build_env(cfg, device, 1)
    with progress_bar(console) as progress:
        task = progress.add_task(mode, total=len(problems), current="")

        def one(problem):
            key, path = (problem.key, str(problem.path)) if problem else (f"device/{device}", "")
            progress.update(task, current=key)
            judge = JudgeClient(key, path, cfg, device, env, Path(store.jobs), mode=mode)
            try:
                result = judge.result(cfg.timeouts.run_s)
            finally:
                judge.close()
            if record:
                store.append(result)
            progress.update(task, advance=1)
            return result
        with ThreadPoolExecutor(max(1, parallel)) as pool:
            return list(pool.map(one, problems))


def precompile_baselines(cfg, device: str, jobs: list, store, console) -> list:
    """`kbench build --baselines compile`: each problem's torch.compile baseline compiled into Inductor's cache
    beside kbench's builds, a few problems at once (nothing is timed during a build), results not recorded."""
    problems = list({j.problem.key: j.problem for j in jobs}.values())
    return run_reference_only("precompile", problems, cfg, device, store, console,
                              parallel=max(1, min(4, (os.cpu_count() or 2) // 2)), record=False)
