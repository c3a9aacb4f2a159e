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
from pathlib import Path


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
    if device == "cuda":
        libs = cuda_runtime_lib_dirs(Path(cache_dir(cfg)) / "cudart-link")
        if libs:
            env["LIBRARY_PATH"] = os.pathsep.join(libs + [p for p in [os.environ.get("LIBRARY_PATH")] if p])
    return env


def cuda_runtime_lib_dirs(link_dir: Path) -> list[str]:
    """Folders with the CUDA runtime of NVIDIA's pip wheels, for the link step (-lcudart) of a CUDA build on a
    machine whose toolkit folder has none (nvcc alone, the runtime came with torch). CUDA 12 wheels put it in
    nvidia/cuda_runtime/lib, CUDA 13 ones in nvidia/cu13/lib; both ship only libcudart.so.<major>, and the
    linker wants libcudart.so, so `link_dir` gets that link when the wheel has none."""
    import importlib.util
    found = []
    try:
        rt = importlib.util.find_spec("nvidia.cuda_runtime")
        nv = importlib.util.find_spec("nvidia")
    except (ImportError, ValueError):
        return []
    roots = [Path(p) / "lib" for p in (rt.submodule_search_locations or [])] if rt else []
    roots += sorted(Path(p) for loc in (nv.submodule_search_locations or []) if nv
                    for p in Path(loc).glob("cu[0-9]*/lib"))
    for lib in roots:
        versioned = sorted(lib.glob("libcudart.so.*"))
        if not versioned:
            continue
        found.append(str(lib))
        if not (lib / "libcudart.so").exists():
            try:
                link_dir.mkdir(parents=True, exist_ok=True)
                link = link_dir / "libcudart.so"
                if link.is_symlink() and link.resolve() != versioned[0].resolve():
                    link.unlink()
                if not link.is_symlink():
                    link.symlink_to(versioned[0])
                found.append(str(link_dir))
            except OSError:
                pass
        break
    return found


def cache_dir(cfg) -> str:
    return str(Path(os.environ.get("KBENCH_CACHE_DIR") or cfg.build.cache_dir).expanduser())
