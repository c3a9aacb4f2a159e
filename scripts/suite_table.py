"""The README's suite table from one kbench run (results.jsonl): per problem the best correct, unflagged
candidate by its speedup over eager, with both baselines' times, its share of the roofline floor (floor / its
time, when the run had `kbench calibrate`'s ceilings) and eager / floor, and the geometric means over problems.

    python3 scripts/suite_table.py results/H200/bench-20261203-s12.jsonl
"""
from __future__ import annotations

import json
import math
import sys


def fmt_ms(ms: float | None) -> str:
    if ms is None:
        return "-"
    return f"{ms:.2f} ms" if ms >= 1 else f"{ms * 1000:.1f} µs"


def main(path: str) -> int:
    best: dict[str, dict] = {}
    for line in open(path):
        try:
            r = json.loads(line)
        except ValueError:
            continue                        # a torn last line
        errors = [f for f in r["flags"] if f.get("severity") == "error"]
        sp = r["timing"].get("speedup")
        if r["status"] != "ok" or errors or not sp or r["timing"].get("note"):
            continue
        if r["problem"] not in best or sp > best[r["problem"]]["timing"]["speedup"]:
            best[r["problem"]] = r
    print("| problem | eager (TF32 off) | torch.compile | best candidate | candidate | vs eager [95% CI] | vs compile "
          "| precision | share of floor | eager / floor |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    eager, compiled, bound = [], [], []
    for key in sorted(best, key=lambda k: (k.split("/")[0], int(k.split("/")[1].split("_")[0]))):
        r = best[key]
        t, c = r["timing"], (r.get("baselines") or {}).get("compile", {})
        floor = (r.get("roofline") or {}).get("floor_ms")
        eager.append(t["speedup"])
        if c.get("speedup"):
            compiled.append(c["speedup"])
        if floor:
            bound.append(t["ref_ms"] / floor)     # the most any kernel could gain over eager here (at the floor)
        vs_compile = f"{c['speedup']:.2f}×" if c.get("speedup") else "-"
        share = f"{floor / t['cand_ms']:.2f}" if floor else "-"
        most = f"{t['ref_ms'] / floor:.2f}×" if floor else "-"
        print(f"| {key} | {fmt_ms(t['ref_ms'])} | {fmt_ms(c.get('ref_ms'))} | {r['candidate']} | {fmt_ms(t['cand_ms'])} "
              f"| {t['speedup']:.2f}× [{t['ci_low']:.2f}, {t['ci_high']:.2f}] | {vs_compile} "
              f"| {r['correctness'].get('precision_class', '')} | {share} | {most} |")

    def g(xs):
        return math.exp(sum(map(math.log, xs)) / len(xs)) if xs else float("nan")
    print(f"\ngeometric mean over {len(eager)} problems: {g(eager):.2f}× eager, {g(compiled):.2f}× torch.compile "
          f"({len(compiled)} with the compile baseline)")
    if bound:
        print(f"eager / floor (the most any kernel could gain over eager; floor = minimum bytes at the measured copy "
              f"bandwidth or FLOPs at the measured fp32 rate), geometric mean over {len(bound)} problems: {g(bound):.2f}×")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
