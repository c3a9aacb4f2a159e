"""What the CUDA witness's price allowance (integrity.PRICE["cuda"]["floor"]) does to each job of some runs: per
job its witnessed batches' excess over the hand-over and the claim (ms per batch: median, worst), and under each
allowance tried, how many batches the witness would price and the job's median per-call time then, over its own
clock. For honest jobs that ratio should stay 1.00 (unpriced); for a clock lie it is what the lie keeps. Where the
records hold the judge's freeze and device-idle probe per ping (since session 30), the hand-over's noise (MAD as sd)
is split: the freeze's, the probe's, and the rest of the wall's.

    python3 scripts/price_floor.py RUN_DIR_OR_JSON... [--floors 0.5,0.4,0.35,0.3] [--noise 1.0]

RUN_DIR_OR_JSON: a --json document, a results.jsonl (or .jsonl.gz), or a folder searched for results.jsonl (a pytest basetemp).
"""
from __future__ import annotations

import argparse
import gzip
import json
import statistics
from pathlib import Path

from kernelbench_cli.integrity import PRICE, price_allowance, witnessed_per_call
from kernelbench_cli.stats import mad_sd


def records(paths: list[str]):
    for p in map(Path, paths):
        files = sorted(p.rglob("results.jsonl")) if p.is_dir() else [p]
        for f in files:
            if f.name.endswith((".jsonl", ".jsonl.gz")):
                text = gzip.decompress(f.read_bytes()).decode() if f.suffix == ".gz" else f.read_text()
                yield from (json.loads(line) for line in text.splitlines() if line.strip())
            else:
                yield from json.loads(f.read_text())["results"]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("paths", nargs="+")
    ap.add_argument("--floors", default="0.5,0.4,0.35,0.3,0.25")
    ap.add_argument("--noise", type=float, default=PRICE["cuda"]["noise"], help="allowance in sd of the hand-over")
    a = ap.parse_args()
    floors, noise = [float(x) for x in a.floors.split(",")], a.noise
    print(f"today's floor {PRICE['cuda']['floor']} ms, noise {PRICE['cuda']['noise']} sd (here {noise}); per floor: "
          "batches priced / all, median priced per call over own; sd of the pings' freeze | probe | rest")
    print(f"{'problem':26} {'candidate':22} {'status':10} {'n':>4} {'own ms':>8} {'noise':>6} {'exc med':>8} {'worst':>7}  "
          + "  ".join(f"F={f:<11}" for f in floors) + "  sd: freeze|probe|rest")
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
            priced = [witnessed_per_call(c, w, n, ho, sd, "cuda", floor=f, noise=noise) for c, w, n in wb]
            hit = sum(p > c / n for p, (c, w, n) in zip(priced, wb))
            cells.append(f"{hit:3d}/{len(wb):<3d} {statistics.median(priced) / own:5.2f}")
        print(f"{r['problem'][:26]:26} {r['candidate'][:22]:22} {r['status'][:10]:10} {sorted(n for *_, n in wb)[len(wb) // 2]:4d} "
              f"{own:8.4f} {price_allowance(ho, sd, floor=0.0, noise=noise):6.3f} {excess[len(excess) // 2]:8.3f} {excess[-1]:7.3f}  " + "  ".join(cells)
              + split_noise((t.get("batch_diag_ms") or {}).get("ping") or []))


def split_noise(pings: list) -> str:
    """[witness, claimed, freeze, probe, ...] per ping (the first warms up): where the hand-over's noise is."""
    rows = [p for p in pings[1:] if len(p) in (4, 8)]
    if len(rows) < 3:
        return ""
    parts = [[p[2] for p in rows], [p[3] for p in rows], [p[0] - p[1] - p[2] - p[3] for p in rows]]
    return "  " + "|".join(f"{mad_sd(x):.3f}" for x in parts)


if __name__ == "__main__":
    main()
