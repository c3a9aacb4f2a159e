"""What the CUDA witness's price allowance (integrity.PRICE["cuda"]["floor"]) does to each job of some runs: per
job its witnessed batches' excess over the hand-over and the claim (ms per batch: median, worst), and under each
allowance tried, how many batches the witness would price and the job's median per-call time then, over its own
clock. For honest jobs that ratio should stay 1.00 (unpriced); for a clock lie it is what the lie keeps.

    python3 scripts/price_floor.py RUN_DIR_OR_JSON... [--floors 0.5,0.4,0.35,0.3]

RUN_DIR_OR_JSON: a --json document, a results.jsonl, or a folder searched for results.jsonl (a pytest basetemp).
"""
from __future__ import annotations

import argparse
import json
import statistics
from pathlib import Path

from kernelbench_cli.integrity import PRICE, witnessed_per_call


def records(paths: list[str]):
    for p in map(Path, paths):
        files = sorted(p.rglob("results.jsonl")) if p.is_dir() else [p]
        for f in files:
            if f.suffix == ".jsonl":
                yield from (json.loads(line) for line in f.read_text().splitlines() if line.strip())
            else:
                yield from json.loads(f.read_text())["results"]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("paths", nargs="+")
    ap.add_argument("--floors", default="0.5,0.4,0.35,0.3,0.25")
    a = ap.parse_args()
    floors = [float(x) for x in a.floors.split(",")]
    noise = PRICE["cuda"]["noise"]
    print(f"today's floor {PRICE['cuda']['floor']} ms; per floor: batches priced / all, median priced per call over own")
    print(f"{'problem':26} {'candidate':22} {'status':10} {'n':>4} {'own ms':>8} {'2sd':>6} {'exc med':>8} {'worst':>7}  "
          + "  ".join(f"F={f:<11}" for f in floors))
    for r in records(a.paths):
        t = r.get("timing") or {}
        wb = t.get("witness_batches") or []
        if not wb or r.get("device", "cuda") == "cpu" or t.get("clock") not in (None, "cuda-events"):
            continue
        ho, sd = t.get("handover_ms") or 0.0, t.get("handover_spread_ms") or 0.0
        excess = sorted(w - ho - c for c, w, n in wb)
        own = statistics.median(c / n for c, w, n in wb)
        cells = []
        for f in floors:
            priced = [witnessed_per_call(c, w, n, ho, sd, "cuda", floor=f) for c, w, n in wb]
            hit = sum(p > c / n for p, (c, w, n) in zip(priced, wb))
            cells.append(f"{hit:3d}/{len(wb):<3d} {statistics.median(priced) / own:5.2f}")
        print(f"{r['problem'][:26]:26} {r['candidate'][:22]:22} {r['status'][:10]:10} {sorted(n for *_, n in wb)[len(wb) // 2]:4d} "
              f"{own:8.4f} {noise * sd:6.3f} {excess[len(excess) // 2]:8.3f} {excess[-1]:7.3f}  " + "  ".join(cells))


if __name__ == "__main__":
    main()
