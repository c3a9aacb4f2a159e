"""Start a kbench process by forking an image that has torch imported, instead of exec'ing a fresh python.

Importing torch costs ~4 s on the H200 host (3 s on the 2-core CI box) and a job's candidate process, its
spares and every reference process each paid it. A fork of a process that has it already costs ~20 ms.
The child sets up what `exec` of `python -m kernelbench_cli.<module>` would have (working directory,
standard streams to the log, only the one socket it is handed, exactly the environment given) and runs the
module's main in the inherited image.

What makes that safe, and when it is refused (then the caller exec's, as before):
- the image must hold no secret: the caller forks only before anything secret exists in it (a reference
  process forks candidate processes before it loads the problem and draws its seeds), and its environment
  is already an allow-list (orchestrate/judges.py judge_env), because the child's /proc/self/environ and
  memory are the forking process's;
- no initialised CUDA driver in the image (a forked CUDA context is unusable in the child). libcuda may be
  mapped (on the H200 host `import torch` maps it) as long as cuInit never ran: the driver then answers
  CUDA_ERROR_NOT_INITIALIZED to a query, without initialising itself, and the child's own cuInit is its first;
- one thread only (a lock held by another thread at fork would never be released in the child; cuInit
  starts driver threads, so this also refuses an initialised driver the query could not see).
"""
from __future__ import annotations

import ctypes
import gc
import os
import sys
import traceback

MAX_FD = 1 << 16


def forkable() -> str:
    """Why this process must not fork a kbench process ("" if it may)."""
    try:
        threads = len(os.listdir("/proc/self/task"))
        with open("/proc/self/maps") as f:
            cuda = any("libcuda.so" in line for line in f)
    except OSError as e:
        return f"cannot read /proc/self ({e})"
    if threads != 1:
        return f"{threads} threads"
    if cuda and _driver_state() != CUDA_ERROR_NOT_INITIALIZED:
        return "the CUDA driver is initialised"
    return ""


CUDA_ERROR_NOT_INITIALIZED = 3


def _driver_state() -> int:
    """cuDeviceGetCount's return code from the libcuda already mapped here (RTLD_NOLOAD: never loads it):
    3 until cuInit has run, 0 after; -1 if it cannot be asked."""
    try:
        lib = ctypes.CDLL("libcuda.so.1", mode=os.RTLD_NOLOAD | os.RTLD_NOW)
        count = ctypes.c_int(0)
        return int(lib.cuDeviceGetCount(ctypes.byref(count)))
    except (OSError, AttributeError):
        return -1


def fork_main(main, argv: list[str], env: dict, cwd: str, log_fd: int, keep_fd: int, new_session: bool) -> int:
    """fork(); the child becomes `main(argv)` as if exec'd with `env` in `cwd`, stdout and stderr on `log_fd`,
    only `keep_fd` inherited; it never returns. Returns the child's pid in the parent."""
    sys.stdout.flush()
    sys.stderr.flush()
    pid = os.fork()
    if pid:
        return pid
    code = 1
    try:
        gc.freeze()               # the parent's objects: never collected here (a socket's close would hit a reused fd)
        if new_session:
            os.setsid()
        os.chdir(cwd)
        null = os.open(os.devnull, os.O_RDONLY)
        os.dup2(null, 0)
        os.dup2(log_fd, 1)
        os.dup2(log_fd, 2)
        os.closerange(3, keep_fd)             # the parent's channels, logs and listening sockets: not ours
        os.closerange(keep_fd + 1, MAX_FD)
        os.environ.clear()
        os.environ.update(env)
        from . import trace
        trace._PATH = env.get("KBENCH_TRACE")     # read at import, in the parent's environment
        sys.argv = ["kbench"] + list(argv)
        code = main(argv)
    except SystemExit as e:
        code = e.code if isinstance(e.code, int) else 1
    except BaseException:
        traceback.print_exc()
    finally:
        try:
            sys.stdout.flush()
            sys.stderr.flush()
        finally:
            os._exit(code if isinstance(code, int) else 1)
