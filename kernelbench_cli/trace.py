"""Where a run's wall time goes. With KBENCH_TRACE=FILE set, the parent and each reference process append one
line per milestone to FILE: wall clock, pid, role, event (`scripts/trace_summary.py FILE` prints it as a
timeline). Diagnostics only: nothing reads it back for a verdict, and candidate processes never see the
variable (their milestones are marked by the reference process that waits on them)."""
from __future__ import annotations

import os
import time

_PATH = os.environ.get("KBENCH_TRACE")


def mark(role: str, event: str) -> None:
    if not _PATH:
        return
    line = f"{time.time():.4f} {os.getpid()} {role} {event}\n".encode()
    try:
        fd = os.open(_PATH, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            os.write(fd, line)      # one write per line: lines of concurrent processes never interleave
        finally:
            os.close(fd)
    except OSError:
        pass
