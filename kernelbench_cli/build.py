"""Parent side of building: the target arch, the build cache, and parallel precompilation.

Each build is a worker process in "build" mode (it imports the candidate with load_inline intercepted,
see loading.py), so compile errors, hangs and crashes at import are contained like any other job.
Builds run N at a time; N defaults to the core count (capped at 8), and each compiler gets
cores / N jobs through MAX_JOBS so the machine is neither idle nor oversubscribed.
"""
from __future__ import annotations

import os
import shutil
import subprocess
from concurrent.futures import ThreadPoolExecutor, as_completed
from pathlib import Path

from .isolation import run_isolated
from .results import Result


def detect_arch() -> str | None:
    """Compute capability of the first local GPU ("9.0" on an H100/H200), read through nvidia-smi so the
    parent never creates a CUDA context."""
    if not shutil.which("nvidia-smi"):
        return None
    try:
        out = subprocess.run(["nvidia-smi", "--query-gpu=compute_cap", "--format=csv,noheader"],
                             capture_output=True, text=True, timeout=20).stdout.split()
    except (OSError, subprocess.SubprocessError):
        return None
    return out[0] if out else None


def build_parallelism(cfg, n_builds: int) -> tuple[int, int]:
    """(concurrent builds, compiler jobs per build)."""
    cores = os.cpu_count() or 1
    workers = cfg.build.jobs or min(cores, 8)
    workers = max(1, min(workers, n_builds or 1))
    return workers, max(1, cores // workers)


def build_env(cfg, device: str, max_jobs: int) -> dict:
    arch = cfg.build.arch
    if arch == "auto":
        arch = detect_arch() if device == "cuda" else None
    env = {"MAX_JOBS": max_jobs}
    if arch:
        env["TORCH_CUDA_ARCH_LIST"] = arch   # only the target GPU's arch: one compile pass, not a dozen
    return env


def cache_dir(cfg) -> str:
    return str(Path(os.environ.get("KBENCH_CACHE_DIR") or cfg.build.cache_dir).expanduser())


def build_all(specs: list[dict], cfg, work_dir: Path, device: str, on_done=None) -> dict[str, Result]:
    """Build every spec's candidate in parallel worker processes; {candidate_path: build Result}."""
    workers, max_jobs = build_parallelism(cfg, len(specs))
    env = build_env(cfg, device, max_jobs)
    out: dict[str, Result] = {}
    with ThreadPoolExecutor(max_workers=workers) as pool:
        futures = {pool.submit(run_isolated, dict(spec, mode="build"), work_dir, f"build-{i}",
                               cfg.timeouts.build_s, env): spec for i, spec in enumerate(specs)}
        for fut in as_completed(futures):
            result = fut.result()
            out[futures[fut]["candidate_path"]] = result
            if on_done:
                on_done(result)
    return out
