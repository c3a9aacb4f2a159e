"""Harness cost under the process model (issue 15's targets), with builds cached. Prints each measure beside
its target and writes them as JSON:

    python3 scripts/bench_harness.py --out harness.json [--check level1/6_GELU] [--skip-suite]

1. warm `kbench check <problem> --config configs/quick.yaml`, command to exit (3 runs; target <= 6 s);
2. `kbench bench --all --baselines eager,compile` on one GPU: wall (target <= 300 s) and the median harness
   overhead per job, job wall minus its timing loop (target <= 2 s);
3. candidates per hour on the level1 problems (default config; target >= 600).
Run from the repo root on the GPU host; KBENCH_CACHE_DIR should hold the builds (`kbench build --all`).
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path


def kbench(*args, out: Path) -> tuple[float, dict | None]:
    cmd = [sys.executable, "-m", "kernelbench_cli", *args, "--out", str(out), "--json"]
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, capture_output=True, text=True)
    wall = time.perf_counter() - t0
    try:
        return wall, json.loads(proc.stdout)
    except ValueError:
        print(proc.stderr[-2000:], file=sys.stderr)
        return wall, None


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--runs", default=".kbench-runs/harness")
    ap.add_argument("--check", default="level1/6_GELU")
    ap.add_argument("--skip-suite", action="store_true")
    ap.add_argument("--skip-level1", action="store_true")
    ap.add_argument("extra", nargs="*", help="extra kbench arguments for every run (e.g. --set ...)")
    a = ap.parse_args()
    runs = Path(a.runs)
    rows, doc = [], {}

    kbench("check", a.check, "--config", "configs/quick.yaml", *a.extra, out=runs)       # warm the cache
    walls = [kbench("check", a.check, "--config", "configs/quick.yaml", *a.extra, out=runs)[0] for _ in range(3)]
    doc["check_quick_s"] = walls
    rows.append((f"warm check {a.check} (quick.yaml), command to exit", f"{statistics.median(walls):.1f} s", "<= 6 s",
                 statistics.median(walls) <= 6))

    if not a.skip_suite:
        wall, res = kbench("bench", "--all", "--baselines", "eager,compile", *a.extra, out=runs)
        results = (res or {}).get("results", [])
        overhead = [r["wall_s"] - r.get("phases", {}).get("timing_s", 0.0) for r in results if r.get("wall_s")]
        doc.update(suite_s=wall, suite_jobs=len(results), overhead_s=overhead,
                   suite_correct=sum(r["status"] == "ok" for r in results))
        rows.append((f"bench --all --baselines eager,compile ({len(results)} jobs)", f"{wall:.0f} s", "<= 300 s",
                     wall <= 300))
        med = statistics.median(overhead) if overhead else float("nan")
        rows.append(("median harness overhead per job (wall - timing loop)", f"{med:.2f} s", "<= 2 s", med <= 2))

    if not a.skip_level1:
        wall, res = kbench("bench", *[f"level1/{p.stem}" for p in sorted(Path("problems/level1").glob("*.py"))],
                           *a.extra, out=runs)
        n = len((res or {}).get("results", []))
        per_hour = n / wall * 3600 if wall else 0.0
        doc.update(level1_s=wall, level1_jobs=n, candidates_per_hour=per_hour)
        rows.append((f"candidates per hour, level1 ({n} jobs in {wall:.0f} s)", f"{per_hour:.0f}", ">= 600",
                     per_hour >= 600))

    Path(a.out).write_text(json.dumps(doc, indent=2))
    width = max(len(r[0]) for r in rows)
    for what, got, target, ok in rows:
        print(f"{what:<{width}}  {got:>9}  target {target:<8} {'met' if ok else 'MISSED'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
