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
    """Compute capability of the first GPU this process may use ("9.0" on an H100/H200), read through
    nvidia-smi so the parent never creates a CUDA context. nvidia-smi sees every GPU of the host, so
    CUDA_VISIBLE_DEVICES is applied here: set and empty (or -1) means none."""
    if not shutil.which("nvidia-smi"):
        return None
    listed = os.environ.get("CUDA_VISIBLE_DEVICES")
    first = listed.split(",")[0].strip() if listed is not None else ""
    if listed is not None and (not first or first.startswith("-")):
        return None
    try:
        out = subprocess.run(["nvidia-smi", "--query-gpu=compute_cap", "--format=csv,noheader",
                              *(["-i", first] if first else [])],
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
    if device == "cpu":
        # a CPU job never sees a GPU: no CUDA driver threads in its processes, and no GPU for its candidate
        env["CUDA_VISIBLE_DEVICES"] = ""
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


def job_build(built, ran):
    """The BuildInfo a job reports: the build phase's (it saw the real compile or cache hit), with the Triton
    kernel records of the run, which say what ran (e.g. the config autotuning chose)."""
    jit = [x for x in ran.extensions if x.get("backend") == "triton"]
    if jit:
        checked = {x["name"]: x["gpu_check"] for x in built.extensions if x.get("gpu_check")}
        for x in jit:
            x.pop("launches", None)              # what the build's GPU compile check compiled; its note stays
            if x["name"] in checked:
                x["gpu_check"] = checked[x["name"]]
        built.extensions = [x for x in built.extensions if x.get("backend") != "triton"] + jit
    return built


# --- build records: the parent skips the build process for a candidate built before ---------------------

RECORD_VERSION = 2
SOURCE_SUFFIXES = (".cu", ".cuh", ".h", ".hpp", ".cpp", ".cc", ".c", ".inc", ".ptx")


def record_key(candidate: Path, device: str, env: dict) -> str | None:
    """What a build depends on that the parent can see without running the candidate: its file, source files
    beside it (a candidate may read a .cu next to it), the target arch, torch and Python versions, and the
    code of kbench's backends (what a build runs and checks: a record made before a check was added must not
    let a candidate skip it). None if the file cannot be read (then it is built, and fails, as usual)."""
    import hashlib
    import json
    import sys
    from importlib import metadata
    h = hashlib.sha256()
    try:
        h.update(Path(candidate).read_bytes())
        for p in sorted(Path(candidate).parent.iterdir()):
            if p.suffix in SOURCE_SUFFIXES and p.is_file():
                h.update(p.name.encode() + b"\0" + p.read_bytes())
        for p in sorted((Path(__file__).parent / "backends").glob("*.py")):
            h.update(p.read_bytes())
        torch_version = metadata.version("torch")
    except (OSError, metadata.PackageNotFoundError):
        return None
    h.update(json.dumps([RECORD_VERSION, device, env.get("TORCH_CUDA_ARCH_LIST"), torch_version,
                         sys.version_info[:2]]).encode())
    return h.hexdigest()[:24]


def recorded_build(root: str, key: str | None) -> dict | None:
    """The BuildInfo (as a dict) of an earlier successful build under `key`, if every extension it made is
    still in the cache; else None."""
    import json
    if key is None:
        return None
    try:
        info = json.loads((Path(root) / "records" / f"{key}.json").read_text())
        exts = info["extensions"]
        if not all((Path(root) / f"{x['name']}-{x['key']}" / "kbench.ok").exists() for x in exts
                   if x.get("backend") != "triton"):      # (Triton kernels live in Triton's own cache)
            return None
        if any(_digest(path) != digest for path, digest in info["sources"].items()):
            return None       # a file the candidate's import read has changed since (or is gone)
    except (OSError, ValueError, KeyError, TypeError):
        return None
    jit = info.get("status") in ("jit", "interpreted")          # (Triton: nothing was compiled ahead)
    return {"status": (info["status"] if jit else "cached") if exts else "none", "seconds": 0.0, "log": "",
            "extensions": [dict(x, cached=True, seconds=0.0) for x in exts]}


def record_build(root: str, key: str | None, build: dict) -> None:
    """After a successful build (atomically: parallel runs may share the cache)."""
    import json
    import os
    import tempfile
    if key is None:
        return
    folder = Path(root) / "records"
    try:
        folder.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=folder, suffix=".tmp")
        with os.fdopen(fd, "w") as f:
            json.dump({"extensions": build.get("extensions", []), "status": build.get("status", "cached"),
                       "sources": {p: _digest(p) for p in build.get("sources", [])}}, f)
        os.replace(tmp, folder / f"{key}.json")
    except OSError:
        pass


MAX_SOURCE_BYTES = 64 << 20


def _digest(path: str) -> str | None:
    """sha256 of a regular file of at most MAX_SOURCE_BYTES (None otherwise). The paths are the candidate's
    build's claim: /dev/zero, a FIFO or a link to one would make this process read without end (session 21)."""
    import hashlib
    import os
    import stat
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except (OSError, ValueError, TypeError):
        return None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode) or st.st_size > MAX_SOURCE_BYTES:
            return None
        h, left = hashlib.sha256(), MAX_SOURCE_BYTES     # (a /proc file says size 0 and may read on)
        while (chunk := os.read(fd, 1 << 20)):
            left -= len(chunk)
            if left < 0:
                return None
            h.update(chunk)
        return h.hexdigest()
    except OSError:
        return None
    finally:
        os.close(fd)
