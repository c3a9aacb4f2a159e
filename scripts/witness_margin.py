"""Per job of kbench results (a --json document or a run's results.jsonl): the least share of a call that the
witness rule (integrity.check_witness) would have to allow, beside its slack, for the job's batches to pass;
0 where the slack alone covers them, "lie" where no share up to 3 calls does. For choosing
integrity.WITNESS_RATIO from honest jobs on a machine (session 28: the CPU's, results/cpu/). --device cpu-time reads
the CPU-time witness's batches (timing.cpu_busy_ms, session 32) of CPU jobs instead of the wall's.

    python3 scripts/witness_margin.py [--device cpu|cuda|cpu-time] RESULTS ...
"""
from __future__ import annotations

import json
import sys

from kernelbench_cli import integrity


def records(path: str) -> list[dict]:
    text = open(path).read()
    return [json.loads(x) for x in text.splitlines() if x.strip()] if path.endswith(".jsonl") \
        else json.loads(text)["results"]


def witness(t: dict, device: str) -> tuple | None:
    """(per batch witness ms, hand-over, spread) of the wall's witness, or of the CPU-time witness's."""
    if device == "cpu-time":
        c = t.get("cpu_busy_ms") or {}
        return (c["batches"], c["handover"], c["spread"]) if c.get("batches") else None
    return [w for _, w, _ in t["witness_batches"]], t.get("handover_ms") or 0.0, t.get("handover_spread_ms") or 0.0


def least_ratio(t: dict, device: str) -> float | None:
    wb, (seen, handover, spread) = t["witness_batches"], witness(t, device)
    args = ([c for c, _, _ in wb], seen, [n for _, _, n in wb], handover, spread, device)
    saved = integrity.WITNESS_RATIO[device]
    try:
        lo, hi = 0.0, 3.0
        integrity.WITNESS_RATIO[device] = hi
        if integrity.check_witness(*args):
            return None
        for _ in range(30):      # the rule is monotone in the ratio: bisect
            integrity.WITNESS_RATIO[device] = mid = (lo + hi) / 2
            lo, hi = (mid, hi) if integrity.check_witness(*args) else (lo, mid)
        return hi if hi > 1e-6 else 0.0
    finally:
        integrity.WITNESS_RATIO[device] = saved


def main(argv: list[str]) -> None:
    device = "cpu"
    if argv[:1] == ["--device"]:
        device, argv = argv[1], argv[2:]
    rows = []
    for path in argv:
        for r in records(path):
            t = r.get("timing") or {}
            if t.get("witness_batches") and r.get("device", device) == device.split("-")[0] and witness(t, device):
                rows.append((least_ratio(t, device), r, t))
    rows.sort(key=lambda x: 99.0 if x[0] is None else x[0], reverse=True)
    print(f"{'least ratio':>11s}  {'problem':28s} {'candidate':26s} {'status':10s} {'ms/call':>8s} {'n':>3s} "
          f"{'hand-over':>9s} {'sd':>6s}   (allowed now: {integrity.WITNESS_RATIO[device]})")
    for need, r, t in rows:
        shown = "lie" if need is None else f"{need:.3f}"
        _, handover, spread = witness(t, device)
        print(f"{shown:>11s}  {r['problem'][:28]:28s} {str(r.get('candidate'))[:26]:26s} "
              f"{r['status']:10s} {t['cand_ms']:8.3f} {t['witness_batches'][0][2]:3d} {handover:9.2f} {spread:6.2f}")


if __name__ == "__main__":
    main(sys.argv[1:])
