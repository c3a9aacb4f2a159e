"""One line per job of one or more kbench runs (results.jsonl files or run folders): status, speedup, flags,
custom share, precision class, the generalisation classes passed/run; then what the generalisation trials
cost (their phases' share of the job wall time):

    python3 scripts/suite_summary.py RUN_OR_JSONL [...]
"""
from __future__ import annotations

import json
import statistics
import sys
from pathlib import Path


def records(arg: str) -> list[dict]:
    path = Path(arg)
    path = path / "results.jsonl" if path.is_dir() else path
    out = []
    for line in path.read_text().splitlines():
        try:
            out.append(json.loads(line))
        except ValueError:
            pass                    # (a torn last line)
    return out


def main() -> int:
    shares, gen_total, wall_total = [], 0.0, 0.0
    for arg in sys.argv[1:]:
        for r in records(arg):
            c = r.get("correctness") or {}
            classes = {k: f"{v['passed']}/{v['trials']}" for k, v in (c.get("variants") or {}).items()}
            speedup = (r.get("timing") or {}).get("speedup")
            print(f"{r['problem'][:30]:<30} {r['candidate'][:26]:<26} {r['status']:<12} "
                  f"sp={speedup and round(speedup, 2)} flags={[f['name'] for f in r.get('flags', [])]} "
                  f"share={r.get('custom_share')} prec={c.get('precision_class')} {classes}")
            phases, wall = r.get("phases") or {}, r.get("wall_s") or 0.0
            gen = phases.get("generalisation_s", 0.0) + phases.get("variants_s", 0.0)
            if wall and "generalisation_s" in phases:
                shares.append(gen / wall)
                gen_total, wall_total = gen_total + gen, wall_total + wall
    if shares:
        print(f"generalisation + variant preparation: {gen_total:.1f} s of {wall_total:.1f} s job wall "
              f"({100 * gen_total / wall_total:.1f}%; median {100 * statistics.median(shares):.1f}% per job, "
              f"{len(shares)} jobs)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
