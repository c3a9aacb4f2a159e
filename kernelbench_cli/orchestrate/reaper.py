"""Killing what kbench started, whole: imported by lifecycle.py, and run as a file (`python reaper.py`, no
package import) as the reaper process that kills the registered sessions when kbench's pipe closes.

Each build and reference process leads a session of its own (start_new_session). Killing its process group
is not enough: ninja puts every compiler it runs in a group of its own, so cc1plus or nvcc would outlive a
killed build. They stay in the session, though (setpgid cannot leave it), so every process whose session
is the registered one is killed too, found in /proc.
"""
from __future__ import annotations

import os
import signal
import sys


def processes():
    """(pid, state, ppid, sid) of every process, from /proc."""
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as f:
                    fields = f.read().rsplit(")", 1)[1].split()
                yield int(entry), fields[0], int(fields[1]), int(fields[3])
            except (OSError, IndexError, ValueError):
                continue


def in_session(sid: int) -> list[int]:
    return [pid for pid, state, _, s in processes() if s == sid and state != "Z"]


def kill_session(sid: int) -> None:
    """SIGKILL the group `sid` leads, then whatever else is left in its session (a few passes: a process
    caught between fork and exec shows up on the next one)."""
    try:
        os.killpg(sid, signal.SIGKILL)
    except OSError:
        pass
    for _ in range(3):
        left = in_session(sid)
        if not left:
            return
        for pid in left:
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass


def main() -> None:
    """Read "+ SID" / "- SID" lines until kbench's end of the pipe closes, then kill what is registered."""
    sessions = set()
    for line in sys.stdin:
        kind, _, sid = line.strip().partition(" ")
        if sid.isdigit():
            (sessions.add if kind == "+" else sessions.discard)(int(sid))
    for sid in sessions:
        kill_session(sid)


if __name__ == "__main__":
    main()
