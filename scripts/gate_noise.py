"""Does the CI gate fail on noise on this machine? (issue 19, item 6)

Gates N unchanged reruns and N reruns with every candidate made 2x slower (its forward run twice) against a
baseline, through the real CLI (`bench --baseline FILE --fail-on-regression`). The baseline is saved here from
--base-runs runs (pooled when more than one: `kbench baseline save RUN RUN RUN`), or is an existing file
(--baseline, e.g. the committed `results/baselines/<machine>.json`: does it stay valid?). Prints each rerun's
verdicts and new/base ratios, and whether the gate held: every unchanged rerun passes, every slowed one fails.

    PYTHONPATH=. python3 scripts/gate_noise.py [--device cpu] [--reruns 5] [--config configs/ci.yaml] [--out DIR]
    PYTHONPATH=. python3 scripts/gate_noise.py --device cuda --baseline results/baselines/<machine>.json \
        level1/5_RMSNorm level1/8_Transpose level2/3_ResidualAdd_RMSNorm
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
TWICE = """

# --- added by scripts/gate_noise.py: the same kernel, run twice per forward (a 2x slowdown) ---
_once = ModelNew.forward
ModelNew.forward = lambda self, *args: (_once(self, *args), _once(self, *args))[1]
"""


def kbench(*args: str, out: Path, device: str) -> tuple[int, dict]:
    cmd = [sys.executable, "-m", "kernelbench_cli", *args, "--device", device, "--out", str(out), "--json"]
    proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True,
                          env=dict(os.environ, PYTHONPATH=str(ROOT)))
    try:
        return proc.returncode, json.loads(proc.stdout)
    except ValueError:
        sys.exit(f"kbench {' '.join(args)} printed no JSON (exit {proc.returncode}):\n{proc.stderr[-2000:]}")


def copy_kernels(dest: Path, device: str, twice: bool) -> Path:
    """A copy of the bundled candidates that have a speed on `device` (on the CPU the C++ ones: Triton is
    interpreted there), as they are or running their forward twice; same names, so the same job ids."""
    for f in (ROOT / "kernels").glob("*/*/*.py"):
        text = f.read_text()
        if device == "cpu" and "load_inline" not in text:
            continue
        target = dest / f.parent.parent.name / f.parent.name / f.name
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text + (TWICE if twice else ""))
    return dest


def verdicts(base: Path, run: Path) -> list[tuple[str, str, float | None]]:
    """(job, verdict, new/base ratio) per job, from `kbench compare BASE RUN --json` (the run's latest record
    of each job: after the gate's rerun of inconclusive ones)."""
    proc = subprocess.run([sys.executable, "-m", "kernelbench_cli", "compare", str(base), str(run), "--json"],
                          cwd=ROOT, capture_output=True, text=True, env=dict(os.environ, PYTHONPATH=str(ROOT)))
    return [(j["job"], j["verdict"], j.get("ratio")) for j in json.loads(proc.stdout)["jobs"]]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--reruns", type=int, default=5)
    ap.add_argument("--config", default=str(ROOT / "configs" / "ci.yaml"))
    ap.add_argument("--out", default=None, help="runs folder (default: a temporary one)")
    ap.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    ap.add_argument("--base-runs", type=int, default=1, help="runs the baseline is saved from (pooled if > 1)")
    ap.add_argument("--baseline", help="gate against this existing baseline file instead of saving one")
    ap.add_argument("problems", nargs="*", help="default: the bundled CPU problems")
    a = ap.parse_args()
    out = Path(a.out or tempfile.mkdtemp(prefix="kbench-gate-noise-"))
    problems = a.problems or ["cpu/1", "cpu/2", "cpu/3", "cpu/4"]
    common = ["--config", a.config, "--set", f"paths.kernels={copy_kernels(out / 'kernels', a.device, twice=False)}"]

    def bench(*extra: str) -> tuple[int, dict]:
        return kbench("bench", *problems, *common, *extra, out=out, device=a.device)
    unchanged_runs = []
    if a.baseline:
        base = Path(a.baseline).resolve()
        print(f"baseline: {base.name} (existing)")
    else:
        base = out / "baseline.json"
        for _ in range(a.base_runs):
            code, doc = bench()
            unchanged_runs.append(out / doc["run_id"])
            print(f"baseline run {doc['run_id']}: " + ", ".join(
                f"{r['problem'].split('_')[0]}::{r['candidate']} {r['timing']['speedup']:.2f}x"
                for r in doc["results"] if r["timing"].get("speedup")))
        subprocess.run([sys.executable, "-m", "kernelbench_cli", "baseline", "save", *map(str, unchanged_runs),
                        "--file", str(base), "--config", a.config], cwd=ROOT, check=True, capture_output=True,
                       env=dict(os.environ, PYTHONPATH=str(ROOT)))
    slow = copy_kernels(out / "slowed-kernels", a.device, twice=True)
    held = True
    for kind, extra in (("unchanged", []), ("slowed 2x", ["--set", f"paths.kernels={slow}"])):  # (the last --set wins)
        for i in range(a.reruns):
            code, doc = bench(*extra, "--baseline", str(base), "--fail-on-regression")
            rows = [v for v in verdicts(base, out / doc["run_id"]) if v[1] not in ("new", "missing")]
            timed = [v for v in rows if v[2] is not None]
            want = 0 if kind == "unchanged" else 1
            if kind == "unchanged":
                unchanged_runs.append(out / doc["run_id"])
            ok = code == want and (kind == "unchanged" or all(v[1] == "regressed" for v in timed))
            held &= ok
            print(f"{kind} #{i + 1}: exit {code} ({'as it should' if ok else 'WRONG'}): " + ", ".join(
                f"{job.split('::')[0].split('_')[0]}::{job.split('::')[1]} {v} {r:.3f}" for job, v, r in timed))
    # every unchanged run as the baseline of every other: whichever run a baseline came from, no noise failure
    pairs = [(x, y) for x in unchanged_runs for y in unchanged_runs if x != y]
    failed = [(x.name, y.name) for x, y in pairs if subprocess.run(
        [sys.executable, "-m", "kernelbench_cli", "compare", str(x), str(y), "--config", a.config],
        cwd=ROOT, capture_output=True, env=dict(os.environ, PYTHONPATH=str(ROOT))).returncode != 0]
    print(f"unchanged runs against each other: {len(pairs) - len(failed)}/{len(pairs)} pairs pass"
          + (f"; failing: {failed}" if failed else ""))
    held &= not failed
    print("gate held on every rerun" if held else "gate did NOT hold")
    if not a.out:
        shutil.rmtree(out, ignore_errors=True)
    return 0 if held else 1


if __name__ == "__main__":
    sys.exit(main())
