"""How far can kbench's timings be trusted? Three measurements on the GPU (issue: timing you can trust).

  python3 scripts/bench_timing_quality.py --out DIR [--aa PROBLEM ...] [--repeat PROBLEM=CANDIDATE.py]
                                          [--ncu PROBLEM=CANDIDATE.py] [-- extra kbench args]

1. A/A: each reference timed against itself (`kbench calibrate-noise`): speedup and CI width.
   Target 1.00 +- 0.01, CI <= 2% wide for kernels >= 50 us.
2. Repeatability: one candidate benchmarked by `kbench check` in 3 separate processes: spread of the
   speedups ((max - min) / median). Target <= 2%.
3. Agreement: kbench's device time for a single-kernel candidate vs Nsight Compute's gpu__time_duration
   (ncu --clock-control none, its default cache flush = kbench's cold-L2 protocol). Target within 3%.
Prints one table per part and a verdict line each; writes DIR/timing_quality.json.
"""
from __future__ import annotations

import argparse
import csv
import io
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def kbench(*args: str) -> dict:
    proc = subprocess.run([sys.executable, "-m", "kernelbench_cli", *args, "--json"], cwd=ROOT, text=True,
                          capture_output=True, env=dict(os.environ, PYTHONPATH=str(ROOT)))
    if not proc.stdout.strip():
        raise SystemExit(f"kbench {' '.join(args)} printed no JSON (rc {proc.returncode}):\n{proc.stderr[-3000:]}")
    return json.loads(proc.stdout)


def part_aa(problems: list[str], extra: list[str], out: Path) -> list[dict]:
    doc = kbench("calibrate-noise", *problems, "--out", str(out / "runs"), *extra)
    (out / "aa_results.json").write_text(json.dumps(doc))    # every round, for scripts/aa_rounds.py
    rows = []
    print("\nA/A: reference against itself")
    print(f"{'problem':42s} {'time':>10s} {'speedup':>8s} {'95% CI':>18s} {'CI width':>9s}  target")
    for r in doc["results"]:
        t = r["timing"]
        if t["speedup"] is None:
            print(f"{r['problem']:42s} failed: {r['status']} {r['message']}")
            continue
        width = t["ci_high"] - t["ci_low"]
        ok = abs(t["speedup"] - 1) <= 0.01 and (width <= 0.02 or t["ref_ms"] < 0.05)
        inside = 0.99 <= t["ci_low"] and t["ci_high"] <= 1.01     # the reading: the whole CI within 1.00+-0.01
        rows.append({"problem": r["problem"], "ref_ms": t["ref_ms"], "speedup": t["speedup"], "ci_low": t["ci_low"],
                     "ci_high": t["ci_high"], "ci_width": width, "meets_target": ok, "ci_inside": inside})
        print(f"{r['problem']:42s} {t['ref_ms'] * 1e3:8.1f}us {t['speedup']:8.4f} "
              f"[{t['ci_low']:.4f}, {t['ci_high']:.4f}] {width:8.2%}  {'ok' if ok else 'MISSED'}"
              f"{'' if inside else ', CI reaches past 1.00+-0.01'}")
    big = [r for r in rows if r["ref_ms"] >= 0.05]
    print(f"A/A verdict: {sum(r['meets_target'] for r in big)}/{len(big)} problems >= 50 us meet 1.00+-0.01 "
          f"with CI <= 2% wide; {sum(r['ci_inside'] for r in big)}/{len(big)} with the whole CI inside 1.00+-0.01")
    return rows


def part_repeat(problem: str, cand: str, extra: list[str], out: Path) -> dict:
    runs = []
    for i in range(3):
        r = kbench("check", problem, "--kernel", cand, "--out", str(out / "runs"), *extra)["results"][0]
        runs.append({"speedup": r["timing"]["speedup"], "cand_ms": r["timing"]["cand_ms"],
                     "ref_ms": r["timing"]["ref_ms"], "status": r["status"]})
    speedups = [r["speedup"] for r in runs if r["speedup"]]
    spread = (max(speedups) - min(speedups)) / statistics.median(speedups) if len(speedups) == 3 else None
    print(f"\nRepeatability: {problem} :: {Path(cand).stem}, 3 separate processes")
    for i, r in enumerate(runs):
        print(f"  run {i + 1}: speedup {r['speedup']:.4f}  cand {r['cand_ms'] * 1e3:.1f} us  ref {r['ref_ms'] * 1e3:.1f} us")
    print(f"Repeatability verdict: spread {spread:.2%} (target <= 2%)" if spread is not None else "no spread")
    return {"problem": problem, "candidate": cand, "runs": runs, "spread": spread}


def ncu_kernel_ns(problem_path: str, cand: str, n: int = 10) -> tuple[float, str]:
    cmd = ["ncu", "--clock-control", "none", "--csv", "--metrics", "gpu__time_duration.sum",
           sys.executable, str(ROOT / "scripts" / "ncu_target.py"), problem_path, cand, str(n)]
    proc = subprocess.run(cmd, cwd=ROOT, text=True, capture_output=True, env=dict(os.environ, PYTHONPATH=str(ROOT)))
    lines = proc.stdout.splitlines()
    names = next((ln.split(" ", 1)[1].split("|") for ln in lines if ln.startswith("KERNELS ")), [])
    table = "\n".join(ln for ln in lines if ln.startswith('"'))
    values = []
    for row in csv.DictReader(io.StringIO(table)):
        if row.get("Metric Name") == "gpu__time_duration.sum" and any(k in row["Kernel Name"] for k in names):
            scale = {"nsecond": 1, "usecond": 1e3, "msecond": 1e6, "second": 1e9}.get(row["Metric Unit"], 1)
            values.append(float(row["Metric Value"].replace(",", "")) * scale)
    if not values:
        raise SystemExit(f"ncu gave no rows for kernels {names} (rc {proc.returncode}):\n{proc.stderr[-3000:]}")
    return statistics.median(values[-n:]), ", ".join(names)


def part_ncu(problem: str, cand: str, kbench_ms: float, out: Path) -> dict:
    from kernelbench_cli.catalog import Catalog
    problem_path = str(Catalog(ROOT / "problems", ROOT / "kernels").resolve(problem).path)
    ns, names = ncu_kernel_ns(problem_path, cand)
    diff = kbench_ms * 1e6 / ns - 1
    print(f"\nAgreement with Nsight Compute: {problem} :: {Path(cand).stem} (kernels: {names})")
    print(f"  kbench device time {kbench_ms * 1e3:.2f} us   ncu gpu__time_duration {ns / 1e3:.2f} us   "
          f"difference {diff:+.2%}")
    print(f"Agreement verdict: {'within' if abs(diff) <= 0.03 else 'OUTSIDE'} 3%")
    return {"problem": problem, "candidate": cand, "kbench_us": kbench_ms * 1e3, "ncu_us": ns / 1e3, "diff": diff}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--aa", nargs="*", default=[], help="problems for the A/A part (default: none)")
    ap.add_argument("--repeat", help="PROBLEM=CANDIDATE.py for the repeatability part")
    ap.add_argument("--ncu", help="PROBLEM=CANDIDATE.py (single-kernel candidate) for the ncu part")
    ap.add_argument("extra", nargs="*", help="extra kbench args after --, e.g. --set timing.budget_s=10")
    args = ap.parse_args()
    sys.path.insert(0, str(ROOT))
    args.out.mkdir(parents=True, exist_ok=True)
    report = {}
    if args.aa:
        report["aa"] = part_aa(args.aa, args.extra, args.out)
        save(args.out, report)
    if args.repeat:
        problem, cand = args.repeat.split("=", 1)
        report["repeatability"] = part_repeat(problem, cand, args.extra, args.out)
        save(args.out, report)
    if args.ncu:
        problem, cand = args.ncu.split("=", 1)
        rep = report.get("repeatability")
        if rep and rep["candidate"] == cand:
            kb_ms = statistics.median(r["cand_ms"] for r in rep["runs"])
        else:
            kb_ms = kbench("check", problem, "--kernel", cand, "--out", str(args.out / "runs"),
                           *args.extra)["results"][0]["timing"]["cand_ms"]
        report["ncu"] = part_ncu(problem, cand, kb_ms, args.out)
        save(args.out, report)


def save(out: Path, report: dict) -> None:
    """After every part: a part that fails (no ncu on the host) keeps the ones before it."""
    (out / "timing_quality.json").write_text(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
