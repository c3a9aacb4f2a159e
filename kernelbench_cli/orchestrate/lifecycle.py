"""Nothing kbench starts outlives it.

Every reference process and build process leads a session of its own (its candidate processes stay in it:
their seccomp filter refuses setsid/setpgid), dies by PR_SET_PDEATHSIG with its parent, and is registered
with the *reaper* (reaper.py): a tiny process in its own session that holds a pipe from kbench and, when
that pipe closes (kbench exited, crashed or was SIGKILLed), SIGKILLs every process of every registered
session, the compilers ninja put in process groups of their own included. SIGTERM and
SIGINT of kbench become KeyboardInterrupt in the main thread, whose handler kills the groups at once.
What leaves a registered session (setsid in a build process, which runs candidate code unconfined) comes back
to kbench, a child subreaper, and is killed after each build (sweep_orphans).
"""
from __future__ import annotations

import ctypes
import os
import signal
import subprocess
import sys
import threading
from pathlib import Path

from .reaper import kill_session, processes

REAPER = str(Path(__file__).with_name("reaper.py"))

_lock = threading.Lock()
spawning = threading.Lock()      # held from a judge's or build's Popen to its register(), and by sweep_orphans
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


PR_SET_CHILD_SUBREAPER = 36
_subreaper = {"on": False}


def become_subreaper() -> None:
    """Orphans of kbench's descendants come back to this process instead of init. A build process runs the
    candidate's import code unconfined (it must fork compilers), so that code can fork a helper that leaves
    the build's session (setsid), outside what kill_session finds: it slowed the reference while the candidate
    was frozen, 1.7-3x speedups with no flag (red team, session 11). Here such a helper is our child once its
    parents are gone, and sweep_orphans() kills it after each build."""
    try:
        ok = ctypes.CDLL(None, use_errno=True).prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == 0
    except (OSError, AttributeError):
        ok = False
    _subreaper["on"] = ok


def sweep_orphans() -> list[int]:
    """SIGKILL and reap every child of ours in a session that is neither ours nor a registered one (judges and
    builds lead registered sessions and are waited for before they are released; the reaper leads its own):
    what a build left behind once the build is gone, compilers of a killed build too. Tools kbench runs
    itself stay in its session. A few passes (one may be forking)."""
    if not _subreaper["on"]:
        return []
    me, killed = os.getpid(), []
    with spawning:
        with _lock:
            sessions = set(_groups) | {os.getsid(0)} | ({_reaper.pid} if _reaper is not None else set())
        for _ in range(3):
            found = [(pid, state) for pid, state, ppid, sid in processes() if ppid == me and sid not in sessions]
            if not found:
                break
            for pid, state in found:
                try:
                    if state != "Z":
                        os.kill(pid, signal.SIGKILL)
                        killed.append(pid)
                    os.waitpid(pid, 0)
                except OSError:
                    pass
    return killed


def install_signal_handlers() -> None:
    """SIGTERM (CI cancel, timeout) behaves like Ctrl-C: unwind, kill the groups, say where the results are."""
    def handler(signum, frame):
        INTERRUPTED["signal"] = signum
        raise KeyboardInterrupt
    signal.signal(signal.SIGTERM, handler)
    signal.signal(signal.SIGINT, handler)
