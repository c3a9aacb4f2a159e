"""Throughput of the pipeline on a GPU host: candidates evaluated per hour on 1 GPU vs 2 (`--gpus`), and
candidates built per hour by the build pool vs one build at a time (`build.jobs`).

    python3 scripts/bench_throughput.py --out results/H200/throughput.json

Steps, each a real `kbench` command on the bundled CUDA suite:
  1. build a sample of candidates on an empty cache with build.jobs=1, then on another empty cache with the
     pool (build.jobs = --build-jobs, default one per candidate up to 8): wall time -> candidates/hour;
  2. build the rest of the run set into the pool's cache (not measured), so step 3 times no compiling;
  3. `kbench bench` the run set with --gpus 1, then --gpus 2, short timing (--set timing.budget_s=2):
     wall time -> candidates/hour, and whether both gave the same verdicts.
Sized to finish in under 8 minutes on a 2-GPU H200 host (cold builds take about a minute each: ~3 min for the
serial builds, ~1 min pool, ~1.5 min warm-up, ~2.5 min of bench); --max-candidates and --build-sample size it.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from kernelbench_cli.catalog import Catalog  # noqa: E402


def pick(catalog: Catalog, limit: int) -> tuple[list[str], int]:
    """The first problems (catalog order) whose CUDA candidates add up to at most `limit`."""
    chosen, n = [], 0
    for problem in catalog.problems():
        k = sum(1 for c in catalog.candidates(problem) if c.runs_on("cuda") and not c.file_error)
        if k and n + k <= limit:
            chosen.append(problem.key)
            n += k
    return chosen, n


def kbench(args: list[str], cache: Path, runs: Path) -> tuple[float, dict, str]:
    """Run one kbench command with --json; (wall seconds, its JSON document, stderr tail)."""
    env = dict(os.environ, PYTHONPATH=str(ROOT), KBENCH_CACHE_DIR=str(cache), COLUMNS="160")
    cmd = [sys.executable, "-m", "kernelbench_cli", *args, "--device", "cuda", "--out", str(runs), "--json"]
    print("$ " + " ".join(cmd[2:]), file=sys.stderr, flush=True)
    start = time.perf_counter()
    proc = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True)
    wall = time.perf_counter() - start
    try:
        doc = json.loads(proc.stdout)
    except ValueError:
        sys.exit(f"kbench {' '.join(args)} gave no JSON (exit {proc.returncode}):\n{proc.stderr[-3000:]}")
    print(f"  {wall:.1f} s, exit {proc.returncode}", file=sys.stderr, flush=True)
    return wall, doc, proc.stderr[-2000:]


def per_hour(n: int, seconds: float) -> float:
    return round(n / seconds * 3600, 1) if seconds > 0 else 0.0


def statuses(doc: dict) -> dict:
    return {f"{r['problem']}::{r['candidate']}": r["status"] for r in doc["results"]}


def gpu_count() -> int:
    try:
        out = subprocess.run(["nvidia-smi", "--query-gpu=name", "--format=csv,noheader"], capture_output=True,
                             text=True, timeout=30).stdout
    except (OSError, subprocess.SubprocessError):
        return 0
    return len([x for x in out.splitlines() if x.strip()])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", required=True, type=Path, help="JSON file to write")
    ap.add_argument("--max-candidates", type=int, default=6, help="candidates in the run set (default 6)")
    ap.add_argument("--build-sample", type=int, default=3, help="candidates in the build comparison (default 3)")
    ap.add_argument("--build-jobs", type=int, default=0, help="pool size for the build comparison (0: one per "
                                                              "candidate, at most 8)")
    ap.add_argument("--budget-s", type=float, default=2.0, help="timing.budget_s per job (default 2)")
    ap.add_argument("--arch", default="9.0", help="build.arch (default 9.0, H100/H200)")
    ap.add_argument("--cache", type=Path, help="build cache for steps 2-3 (default: the pool's); one that already "
                                               "holds the run set makes step 2 a cache check")
    args = ap.parse_args()

    started = time.perf_counter()
    gpus = gpu_count()
    if gpus < 1:
        sys.exit("no GPU visible (nvidia-smi): this benchmark needs a CUDA host")
    catalog = Catalog(ROOT / "problems", ROOT / "kernels")
    run_set, n_run = pick(catalog, args.max_candidates)
    build_set, n_build = pick(catalog, args.build_sample)
    pool = args.build_jobs or min(8, n_build)
    common = ["--arch", args.arch]
    report: dict = {"gpus_visible": gpus, "run_set": run_set, "build_set": build_set, "budget_s": args.budget_s}

    with tempfile.TemporaryDirectory(prefix="kbench-throughput-") as tmp:
        tmp = Path(tmp)
        runs = tmp / "runs"
        builds = {}
        for label, jobs in (("serial", 1), ("pool", pool)):
            cache = tmp / f"cache-{label}"
            wall, doc, _ = kbench(["build", *build_set, *common, "--set", f"build.jobs={jobs}"], cache, runs)
            built = sum(r["build"]["status"] == "built" for r in doc["results"])
            builds[label] = {"build_jobs": jobs, "candidates": len(doc["results"]), "built": built,
                             "wall_s": round(wall, 1), "per_hour": per_hour(len(doc["results"]), wall)}
        report["build"] = builds
        report["build"]["pool_speedup"] = round(builds["serial"]["wall_s"] / builds["pool"]["wall_s"], 2)

        cache = args.cache or tmp / "cache-pool"
        wall, _, _ = kbench(["build", *run_set, *common], cache, runs)
        report["warm_build_s"] = round(wall, 1)
        bench = {}
        for n in [1, 2] if gpus >= 2 else [1]:
            wall, doc, _ = kbench(["bench", *run_set, *common, "--gpus", str(n), "--set",
                                   f"timing.budget_s={args.budget_s}"], cache, runs)
            slots = sorted({r["env"].get("slot") for r in doc["results"] if r["env"].get("slot")})
            bench[f"{n}_gpu"] = {"gpus": n, "jobs": len(doc["results"]), "correct": doc["summary"]["correct"],
                                 "wall_s": round(wall, 1), "per_hour": per_hour(len(doc["results"]), wall),
                                 "slots": slots, "statuses": statuses(doc)}
        report["bench"] = bench
        if "2_gpu" in bench:
            report["bench"]["speedup_2_vs_1"] = round(bench["1_gpu"]["wall_s"] / bench["2_gpu"]["wall_s"], 2)
            report["bench"]["same_verdicts"] = bench["1_gpu"]["statuses"] == bench["2_gpu"]["statuses"]

    report["total_s"] = round(time.perf_counter() - started, 1)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=2))
    rows = [(f"build, serial (build.jobs=1), {n_build} cand.", builds["serial"]),
            (f"build, pool (build.jobs={pool}), {n_build} cand.", builds["pool"])]
    rows += [(f"bench, --gpus {b['gpus']}, {b['jobs']} jobs", b) for k, b in bench.items() if k.endswith("_gpu")]
    print(f"\n{'what':<44} {'wall s':>8} {'cand/hour':>10}")
    for label, b in rows:
        print(f"{label:<44} {b['wall_s']:>8.1f} {b['per_hour']:>10.1f}")
    print(f"build pool speedup {report['build']['pool_speedup']}x", end="")
    if "speedup_2_vs_1" in bench:
        print(f"; 2 GPUs vs 1: {bench['speedup_2_vs_1']}x, same verdicts: {bench['same_verdicts']}", end="")
    print(f"\ntotal {report['total_s']:.0f} s; JSON: {args.out}")


if __name__ == "__main__":
    main()
