"""Print a KBENCH_TRACE file as a timeline: seconds since the first mark, the gap since the previous mark of
the same process, pid, role, event.

    KBENCH_TRACE=trace.txt kbench check level1/6_GELU; python3 scripts/trace_summary.py trace.txt
"""
from __future__ import annotations

import sys


def main(path: str) -> int:
    rows = []
    for line in open(path):
        parts = line.rstrip("\n").split(" ", 3)
        if len(parts) == 4:
            rows.append((float(parts[0]), parts[1], parts[2], parts[3]))
    rows.sort()
    if not rows:
        print(f"{path}: no marks")
        return 1
    t0, last = rows[0][0], {}
    for t, pid, role, event in rows:
        gap = t - last.get(pid, t)
        last[pid] = t
        print(f"{t - t0:8.3f}  +{gap:6.3f}  {pid:>7} {role:<9} {event}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
