"""Nothing kbench starts outlives it.

Every reference process and build process leads a session of its own (its candidate processes stay in it:
their seccomp filter refuses setsid/setpgid), dies by PR_SET_PDEATHSIG with its parent, and is registered
with the *reaper* (reaper.py): a tiny process in its own session that holds a pipe from kbench and, when
that pipe closes (kbench exited, crashed or was SIGKILLed), SIGKILLs every process of every registered
session, the compilers ninja put in process groups of their own included. SIGTERM and
SIGINT of kbench become KeyboardInterrupt in the main thread, whose handler kills the groups at once.
"""
from __future__ import annotations

import signal
import subprocess
import sys
import threading
from pathlib import Path

from .reaper import kill_session

REAPER = str(Path(__file__).with_name("reaper.py"))

_lock = threading.Lock()
_reaper: subprocess.Popen | None = None
_groups: set[int] = set()
INTERRUPTED = {"signal": None}


def _ensure() -> subprocess.Popen:
    global _reaper
    if _reaper is None or _reaper.poll() is not None:
        _reaper = subprocess.Popen([sys.executable, REAPER], stdin=subprocess.PIPE, text=True,
                                   start_new_session=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return _reaper


def register(pgid: int) -> None:
    with _lock:
        _groups.add(pgid)
        r = _ensure()
        r.stdin.write(f"+ {pgid}\n")
        r.stdin.flush()


def release(pgid: int) -> None:
    with _lock:
        _groups.discard(pgid)
        if _reaper is not None and _reaper.poll() is None:
            _reaper.stdin.write(f"- {pgid}\n")
            _reaper.stdin.flush()


def kill_all() -> None:
    """Kill every registered group now (an interrupted run)."""
    with _lock:
        groups = list(_groups)
    for g in groups:
        kill_session(g)


def install_signal_handlers() -> None:
    """SIGTERM (CI cancel, timeout) behaves like Ctrl-C: unwind, kill the groups, say where the results are."""
    def handler(signum, frame):
        INTERRUPTED["signal"] = signum
        raise KeyboardInterrupt
    signal.signal(signal.SIGTERM, handler)
    signal.signal(signal.SIGINT, handler)
