"""The contract between kbench commands and the warm server (`kbench serve`, judge/zygote.py): where its
socket is, and the fingerprint both sides compute so that a reference process forked from the server is
the one an exec would have started (same kbench sources, same python, same import-time environment)."""
from __future__ import annotations

import hashlib
import os
import sys
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent
# Read per reference process after the fork (the driver at its first call, trace at fork, a slot's cores at the
# judge's start: cpus.take_slot): they may differ.
PER_PROCESS = ("CUDA_VISIBLE_DEVICES", "NVIDIA_VISIBLE_DEVICES", "KBENCH_FD", "KBENCH_PARENT_PID", "KBENCH_TRACE",
               "TORCHINDUCTOR_CACHE_DIR", "MAX_JOBS", "TORCH_CUDA_ARCH_LIST", "LIBRARY_PATH", "KBENCH_CACHE_DIR",
               "KBENCH_CPUS")


def socket_path() -> Path:
    """One server per user and kbench installation: under the user's runtime directory (or /tmp), in a
    folder only the user may enter; KBENCH_SERVE_SOCKET names another."""
    if os.environ.get("KBENCH_SERVE_SOCKET"):          # a server of one's own (the tests use one)
        return Path(os.environ["KBENCH_SERVE_SOCKET"])
    base = os.environ.get("XDG_RUNTIME_DIR") or "/tmp"
    tag = hashlib.sha1(f"{sys.executable}\0{PACKAGE}".encode()).hexdigest()[:12]
    return Path(base) / f"kbench-{os.getuid()}" / f"serve-{tag}.sock"


def private_dir(path: Path) -> Path:
    """The socket's folder, created 0700, and refused if it is anyone else's or open to others."""
    d = path.parent
    d.mkdir(mode=0o700, parents=True, exist_ok=True)
    st = d.stat()
    if st.st_uid != os.getuid() or st.st_mode & 0o077:
        raise PermissionError(f"{d}: not a private folder of this user (mode {oct(st.st_mode & 0o777)})")
    return d


def fingerprint(env: dict) -> str:
    """kbench's sources (path, size, mtime), the interpreter, and the environment a reference process is
    started with, less what is read only after the fork."""
    h = hashlib.sha1(f"{sys.executable}\0{PACKAGE}\0".encode())
    for p in sorted(PACKAGE.rglob("*.py")):
        st = p.stat()
        h.update(f"{p.relative_to(PACKAGE)}\0{st.st_size}\0{st.st_mtime_ns}\0".encode())
    for k in sorted(env):
        if k not in PER_PROCESS:
            h.update(f"{k}={env[k]}\0".encode())
    return h.hexdigest()
