"""The CI gate: baseline files, the regression rule (every verdict), kbench compare, JUnit/markdown, bench
--baseline/--fail-on-regression/--resume end to end on the CPU, and the A/A noise calibration."""
from __future__ import annotations

import dataclasses
import json
import math
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from conftest import ROOT
from kernelbench_cli.gate import baseline as B
from kernelbench_cli import results as R
from kernelbench_cli import stats
from kernelbench_cli.gate import formats as ci_formats
from kernelbench_cli.gate.noise import AA_CANDIDATE, suggest_tau
from kernelbench_cli.config import CompareConfig, load_config
from kernelbench_cli.errors import InputError
from kernelbench_cli.gate import rerun_config
from kernelbench_cli.candidate.loading import import_file
from kernelbench_cli.results import Flag, Result, RunStore, Timing

ENV = {"torch": "2.13.0+cpu", "cuda": None, "cpu": "x86_64", "machine": "x86_64", "threads": 2}
PROBLEM = "cpu/1_Add_ReLU"


def result(cand: str, ratios=(), status: str = "ok", flags=(), message: str = "") -> Result:
    """A synthetic Result whose per-round speedups are `ratios` (reference rounds = ratio ms, candidate 1 ms)."""
    t = Timing(clock="perf-counter")
    if ratios:
        t.ref_rounds_ms, t.cand_rounds_ms = list(ratios), [1.0] * len(ratios)
        t.speedup = stats.geomean(ratios)
        t.ci_low, t.ci_high = stats.bootstrap_geomean_ci(ratios)
        t.ref_ms, t.cand_ms, t.rounds = stats.median(ratios), 1.0, len(ratios)
    return Result(problem=PROBLEM, candidate=cand, candidate_path=f"/k/{cand}.py", device="cpu",
                  dtype="float32", status=status, phase="done", message=message, timing=t,
                  flags=[Flag(*f) for f in flags], env=dict(ENV))


def write_run(root: Path, run_id: str, results) -> Path:
    store = RunStore(root, run_id)
    for r in results:
        store.append(r)
    return store.dir


STEADY = [2.0, 2.02, 1.98, 2.01, 1.99, 2.0, 2.03, 1.97]
SCALE = [r / 2.0 for r in STEADY]                       # the same noise around 1


def scaled(f: float, noise=SCALE):
    return [2.0 * f * n for n in noise]


# the new run's per-round speedups, chosen so each job lands on one verdict (tau = 0.05, baseline STEADY)
WIDE = [0.80, 1.06, 0.84, 1.02, 0.88, 1.04, 0.90, 0.97]   # geomean ~0.93, CI straddles 0.95


def synthetic_runs(tmp_path: Path) -> tuple[Path, Path]:
    base = [result(c, STEADY) for c in ("same", "faster", "slower", "straddle", "edge", "broken", "flagged")]
    base += [result("still_bad", status="incorrect", message="trial 0: 3 elements outside atol"),
             result("fixed", status="incorrect", message="trial 0: wrong"), result("gone", STEADY)]
    new = [result("same", scaled(1.0)), result("faster", scaled(1.3)), result("slower", scaled(0.7)),
           result("straddle", [2.0 * w for w in WIDE]),
           result("edge", [2.0 * w for w in (1.0, 1.2, 0.98, 1.15, 1.02, 1.1, 0.99, 1.12)]),
           result("broken", status="incorrect", message="trial 0: 1024 elements outside atol"),
           result("flagged", STEADY, status="integrity", flags=[("input-mutated", "error", "x changed")],
                  message="input-mutated: x changed"),
           result("still_bad", status="incorrect", message="trial 0: still wrong"), result("fixed", STEADY),
           result("added", STEADY)]
    return write_run(tmp_path / "runs", "base-run", base), write_run(tmp_path / "runs", "new-run", new)


QUIET = CompareConfig(between_sd_cpu=0.0)      # the rule's regions at tau itself (no run-to-run term)
NO_SD = ("--set", "compare.between_sd_cpu=0")
EXPECTED = {"same": "unchanged", "faster": "improved", "slower": "regressed", "straddle": "inconclusive",
            "edge": "unchanged", "broken": "regressed", "flagged": "regressed", "still_bad": "unchanged",
            "fixed": "improved", "added": "new", "gone": "missing"}


# --- the rule, in process ----------------------------------------------------------------------------

def test_classify_covers_every_region_of_the_ci():
    tau = 0.05
    assert B.classify(0.80, 0.94, tau) == "regressed"        # whole CI below 1 - tau
    assert B.classify(0.90, 0.99, tau) == "inconclusive"     # straddles 1 - tau
    assert B.classify(0.90, 1.20, tau) == "inconclusive"     # wide: straddles both
    assert B.classify(0.96, 1.04, tau) == "unchanged"        # inside [1 - tau, 1 + tau]
    assert B.classify(0.97, 1.30, tau) == "unchanged"        # reaches above 1 + tau, not wholly
    assert B.classify(1.06, 1.30, tau) == "improved"         # whole CI above 1 + tau
    assert B.classify(0.95, 0.99, tau) == "unchanged"        # lo exactly 1 - tau: not below it


def test_every_verdict_on_synthetic_runs(tmp_path):
    base_dir, new_dir = synthetic_runs(tmp_path)
    comps = B.compare_snapshots(B.load_snapshot(base_dir, tmp_path), B.load_snapshot(new_dir, tmp_path), 0.05,
                                between=QUIET)
    got = {c.job.split("::")[1]: c for c in comps}
    assert {k: c.verdict for k, c in got.items()} == EXPECTED
    straddle = got["straddle"]
    assert straddle.method == "bootstrap" and straddle.ratio_low < 0.95 <= straddle.ratio_high
    assert got["slower"].ratio_high < 0.95 and got["faster"].ratio_low > 1.05
    assert got["edge"].ratio_high > 1.05 >= got["edge"].ratio_low >= 0.95
    assert got["broken"].reason.startswith("correctness lost: incorrect")
    assert got["flagged"].reason.startswith("new integrity flag input-mutated")
    assert "still failing" in got["still_bad"].reason and "now correct" in got["fixed"].reason
    assert B.exit_code(comps) == 1
    assert B.exit_code([c for c in comps if c.verdict != "regressed"]) == 0


def test_flags_raised_by_wrong_outputs_do_not_hide_lost_correctness():
    base = B.JobRecord.from_result(result("b", STEADY))
    wrong = B.JobRecord.from_result(result("b", status="incorrect", message="trial 0: off by 1",
                                           flags=[("precision", "error", "error vs fp64 1e+00")]))
    c = B.compare_job("p::b", base, wrong, 0.05)
    assert c.verdict == "regressed" and c.reason == "correctness lost: incorrect: trial 0: off by 1"
    still = B.JobRecord.from_result(result("b", status="incorrect"))
    assert B.compare_job("p::b", still, wrong, 0.05).verdict == "unchanged"


def test_a_flag_already_in_the_baseline_is_not_a_regression():
    rec = B.JobRecord.from_result(result("f", STEADY, status="integrity", flags=[("precision", "error", "tf32")]))
    assert B.compare_job("p::f", rec, rec, 0.05).verdict == "unchanged"
    warn = B.JobRecord.from_result(result("f", STEADY, flags=[("suspicious-speed", "warning", "fast")]))
    assert B.compare_job("p::f", B.JobRecord.from_result(result("f", STEADY)), warn, 0.05).verdict == "unchanged"


def test_without_per_round_data_the_ci_is_the_conservative_quotient_of_the_two_cis():
    base = B.JobRecord("ok", speedup=2.0, ci_low=1.9, ci_high=2.1)
    new = B.JobRecord("ok", speedup=1.0, ci_low=0.9, ci_high=1.1)
    lo, hi, method = B.ratio_ci(base, new)
    assert method == "bounds" and lo == pytest.approx(0.9 / 2.1) and hi == pytest.approx(1.1 / 1.9)
    assert B.compare_job("p::c", base, new, 0.05).verdict == "regressed"


def test_bootstrap_ratio_ci_brackets_the_ratio_and_widens_with_noise():
    lo, hi = stats.bootstrap_ratio_ci([1.0] * 6, [2.0] * 6)
    assert lo == pytest.approx(0.5) and hi == pytest.approx(0.5)
    new, base = scaled(0.5), STEADY
    lo, hi = stats.bootstrap_ratio_ci(new, base)
    assert lo < stats.geomean(new) / stats.geomean(base) < hi and hi - lo < 0.05
    wlo, whi = stats.bootstrap_ratio_ci([2.0 * w for w in WIDE], base)
    assert whi - wlo > hi - lo
    assert all(math.isnan(x) for x in stats.bootstrap_ratio_ci([], base))


def test_baseline_key_names_the_machine_and_stack():
    gpu = {"gpu": "NVIDIA H200", "torch": "2.11.0+cu130", "cuda": "13.0", "cpu": "ignored"}
    assert B.baseline_key(gpu) == "nvidia-h200-torch2.11.0-cu130-cuda13.0"
    assert B.baseline_key(ENV) == "x86-64-torch2.13.0-cpu-cudanone"
    assert B.baseline_path("results/baselines", gpu) == Path("results/baselines/nvidia-h200-torch2.11.0-cu130-cuda13.0.json")


def test_compare_section_of_the_config_and_the_rerun_config():
    cfg = load_config(ROOT / "configs" / "ci.yaml")
    assert cfg.compare.tau == 0.05 and cfg.compare.rerun_rounds_factor == 3
    # stricter generalisation than the default (layout an error), the other classes merged from the default
    assert cfg.generalise["layout"] == "error" and cfg.generalise["values"] == "error"
    assert cfg.generalise["shapes"] == "warning"
    more = rerun_config(cfg)
    assert (more.timing.min_rounds, more.timing.max_rounds) == (3 * cfg.timing.min_rounds, 3 * cfg.timing.max_rounds)
    assert more.timing.budget_s == 3 * cfg.timing.budget_s and cfg.timing.budget_s == 15   # original untouched
    assert more.timeouts.run_s > cfg.timeouts.run_s
    with pytest.raises(InputError, match="compare"):
        load_config(sets=["compare.tau=1.5"])
    with pytest.raises(InputError, match="unknown key 'compare.taux'"):
        load_config(sets=["compare.taux=0.1"])


def test_markdown_summary_is_appended_to_the_github_step_summary(tmp_path, monkeypatch):
    base_dir, new_dir = synthetic_runs(tmp_path)
    comps = B.compare_snapshots(B.load_snapshot(base_dir, tmp_path), B.load_snapshot(new_dir, tmp_path), 0.05,
                                between=QUIET)
    step = tmp_path / "step.md"
    step.write_text("earlier step\n")
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(step))
    text = ci_formats.markdown(comps, "kbench", 0.05, "base.json")
    written = ci_formats.write_markdown(tmp_path / "out" / "summary.md", text)
    assert written == [tmp_path / "out" / "summary.md", step]
    assert step.read_text().startswith("earlier step\n") and text in step.read_text()
    assert "FAIL" in text and "| cpu/1_Add_ReLU::slower |" in text and "**regressed**" in text
    assert text.count("\n| cpu/1_Add_ReLU::") == len(EXPECTED)


def test_the_aa_candidate_is_the_reference(tmp_path):
    import torch
    problem_path = ROOT / "problems" / "cpu" / "3_Scale_Bias_Clamp.py"
    cand_file = tmp_path / "aa.py"
    cand_file.write_text(AA_CANDIDATE.format(problem_path=str(problem_path)))
    problem = import_file(problem_path, "test_aa_problem")
    cand = import_file(cand_file, "test_aa_candidate")
    torch.manual_seed(0)
    ref = problem.Model(*problem.get_init_inputs())
    new = cand.ModelNew(*problem.get_init_inputs())
    assert not isinstance(new, problem.Model) and new.state_dict().keys() == ref.state_dict().keys()
    new.load_state_dict(ref.state_dict())
    x = problem.get_inputs()
    assert torch.equal(ref(*x), new(*x))
    assert suggest_tau([0.004, 0.011]) == 0.04 and suggest_tau([0.001]) == 0.01


def test_a_baseline_measured_with_another_timing_protocol_is_not_compared():
    """kbench changed how it times the CUDA reference (session 18: every speedup moved 2-25%); a baseline from
    before must not fail the gate on kbench's own change: every job is new, with a warning that says why."""
    from kernelbench_cli.timing import PROTOCOL
    env = {"gpu": "NVIDIA H200", "torch": "2.11.0+cu130", "cuda": "13.0"}
    fast, slow = B.JobRecord.from_result(result("c", [2.0] * 8)), B.JobRecord.from_result(result("c", [1.0] * 8))
    old = B.Snapshot("base", dict(env), {"p::c": fast})          # no timing_protocol recorded: protocol 1
    new = B.Snapshot("new", dict(env, timing_protocol=PROTOCOL["cuda"]), {"p::c": slow})
    assert PROTOCOL["cuda"] != 1
    assert [c.verdict for c in B.compare_snapshots(old, new, 0.05)] == ["new"]
    assert "timing protocol 1" in B.env_warning(old, new) and "baseline save" in B.env_warning(old, new)
    same = B.Snapshot("base", dict(new.env), {"p::c": fast})     # the same protocol: the rule applies
    assert [c.verdict for c in B.compare_snapshots(same, new, 0.05)] == ["regressed"]
    assert B.env_warning(same, new) is None


def test_a_job_the_baseline_timed_and_this_run_did_not_time_is_regressed():
    """Exploit of the gate: a C++ candidate that regressed adds `import triton` (or BACKEND = "triton"), is then
    interpreted on the CPU, has no timing, and the gate said 'unchanged' (no timing to compare)."""
    timed = B.JobRecord.from_result(result("c", [1.84] * 8))
    untimed = result("c")
    untimed.timing.note = R.INTERPRETED
    c = B.compare_job("p::c", timed, B.JobRecord.from_result(untimed), 0.05)
    assert c.verdict == "regressed" and "timing lost" in c.reason and "1.84" in c.reason, c.reason
    assert B.compare_job("p::c", B.JobRecord.from_result(untimed), B.JobRecord.from_result(untimed),
                         0.05).verdict == "unchanged"          # interpreted in both: nothing to compare, not a loss


def test_run_to_run_noise_keeps_an_unchanged_rerun_from_failing_and_a_2x_slowdown_still_fails():
    """Measured on the 2-core box (scripts/gate_noise.py): cpu/2's unchanged runs gave 1.63x..1.84x with
    CIs of +-1.4% each. Against a baseline from the 1.84x run, the 1.63x rerun is 'regressed' at tau alone;
    with the CPU's run-to-run sd it is not, and a 2x slower kernel still is. A baseline from 3+ runs
    measures its own sd per job and uses it."""
    def rec(speedup, spread=0.01):
        return B.JobRecord.from_result(result("c", [speedup * (1 + spread * k) for k in (-1, 0, 1, 0, -1, 1, 0, 0)]))
    high, low, slow = rec(1.844), rec(1.632), rec(0.9)
    assert B.compare_job("p::c", high, low, 0.05).verdict == "regressed"          # tau alone: noise fails it
    sd = CompareConfig().between_sd_cpu
    assert B.compare_job("p::c", high, low, 0.05, between_sd=sd).verdict == "unchanged"
    assert B.compare_job("p::c", high, slow, 0.05, between_sd=sd).verdict == "regressed"
    assert B.effective_tau(0.05, 0.0) == 0.05 and 0.15 < B.effective_tau(0.05, sd) < 0.2
    # a baseline pooled from three runs: its own sd (small here), geometric-mean speedup, all rounds
    runs = [rec(1.70), rec(1.72), rec(1.71)]
    pooled = B.pooled(runs)
    assert pooled.runs == 3 and 0 < pooled.between_sd < 0.01 and len(pooled.round_ratios) == 24
    assert pooled.speedup == pytest.approx(math.prod(r.speedup for r in runs) ** (1 / 3))
    c = B.compare_job("p::c", pooled, rec(1.55), 0.05, between_sd=sd)     # its own sd, not the default
    assert c.between_sd == pooled.between_sd and c.verdict == "regressed"
    failing = B.JobRecord.from_result(result("c", status="incorrect"))
    assert B.pooled([rec(1.7), failing, rec(1.7)]).status == "incorrect"       # a failing run is the record


# --- through the CLI, on synthetic run files (no builds) ------------------------------------------------

def test_compare_cli_verdicts_exit_code_junit_and_json(kbench, tmp_path):
    base_dir, new_dir = synthetic_runs(tmp_path)
    saved = kbench("baseline", "save", base_dir, "--set", f"paths.baselines={tmp_path / 'bl'}")
    assert saved.returncode == 0, saved.stderr
    files = list((tmp_path / "bl").glob("*.json"))
    assert [f.name for f in files] == ["x86-64-torch2.13.0-cpu-cudanone.json"]
    doc = json.loads(files[0].read_text())
    assert doc["env"]["cpu"] == "x86_64" and len(doc["jobs"]) == 10
    same = doc["jobs"][f"{PROBLEM}::same"]
    assert same["status"] == "ok" and same["round_ratios"] == pytest.approx(STEADY) and same["ci_low"] < 2 < same["ci_high"]
    assert "2 job(s) recorded as failing" in saved.stdout

    junit = tmp_path / "report.xml"
    proc = kbench("compare", files[0], new_dir, "--json", "--junit", junit, "--markdown", tmp_path / "s.md", *NO_SD)
    assert proc.returncode == 1, proc.stderr
    out = json.loads(proc.stdout)
    assert {j["job"].split("::")[1]: j["verdict"] for j in out["jobs"]} == EXPECTED
    assert out["counts"]["regressed"] == 3 and "gate: FAIL" in proc.stderr
    suite = ET.parse(junit).getroot().find("testsuite")
    assert suite.get("tests") == "11" and suite.get("failures") == "3" and suite.get("skipped") == "1"
    failed = {tc.get("name"): tc.find("failure") for tc in suite.iter("testcase") if tc.find("failure") is not None}
    assert set(failed) == {"slower", "broken", "flagged"}
    assert "correctness lost" in failed["broken"].get("message")
    assert "new/base" in failed["slower"].text and "whole CI below" in failed["slower"].get("message")

    # a looser tau turns the 0.7x job into an inconclusive one; only correctness and flags still fail
    loose = kbench("compare", base_dir, new_dir, "--tau", "0.3", "--json", *NO_SD)
    verdicts = {j["job"].split("::")[1]: j["verdict"] for j in json.loads(loose.stdout)["jobs"]}
    assert verdicts["slower"] == "inconclusive" and verdicts["straddle"] == "unchanged"
    assert loose.returncode == 1
    itself = kbench("compare", base_dir, base_dir, *NO_SD)
    assert itself.returncode == 0 and "gate: pass" in itself.stdout and "regressed" not in itself.stdout


def test_a_baseline_saved_from_several_runs_pools_them(kbench, tmp_path):
    base_dir, new_dir = synthetic_runs(tmp_path)
    out = tmp_path / "pooled.json"
    saved = kbench("baseline", "save", base_dir, new_dir, base_dir, "--file", out)
    assert saved.returncode == 0, saved.stderr
    jobs = json.loads(out.read_text())["jobs"]
    same = jobs[f"{PROBLEM}::same"]     # timed in all three runs: pooled, with its run-to-run spread
    assert same["runs"] == 3 and same["between_sd"] is not None and len(same["round_ratios"]) == 3 * len(STEADY)
    assert jobs[f"{PROBLEM}::broken"]["status"] == "incorrect"       # failing in one run: recorded failing
    assert jobs[f"{PROBLEM}::added"]["runs"] == 1                     # only in one of them


def test_compare_rejects_what_is_not_a_run_or_baseline(kbench, tmp_path):
    proc = kbench("compare", tmp_path / "nope", tmp_path / "nope2")
    assert proc.returncode == 2 and "not a run" in proc.stderr
    bad = tmp_path / "bad.json"
    bad.write_text("{}")
    proc = kbench("compare", bad, bad)
    assert proc.returncode == 2 and "not a kbench baseline file" in proc.stderr


# --- end to end: real C++ builds and timing on the CPU -------------------------------------------------

FUSED = (ROOT / "kernels" / "cpu" / "1_Add_ReLU" / "fused.py").read_text()
FORWARD = "        return ext.add_relu(x, y)\n"
# same C++ (the build cache serves all three), only the Python forward differs
SLOW = FUSED.replace(FORWARD, "        for _ in range(3):\n            ext.add_relu(x, y)\n" + FORWARD)
BROKEN = FUSED.replace(FORWARD, "        return ext.add_relu(x, y) + 1.0\n")
# enough rounds that the 4x slower candidate's CI is far below 1 - tau even on a loaded 2-core machine;
# tau 0.25 so that an unchanged candidate is never judged regressed by noise
# Pinned for steady CPU timing: one intra-op thread (no oversubscription of 2 cores), and glibc keeping the
# reference's 16 MB temporaries on the heap. Without the malloc settings, whether a worker process gets them
# by fresh mmap (page faults on every call) varied the eager reference's time 4x from one job to the next.
STEADY_CPU = {"OMP_NUM_THREADS": "1", "MALLOC_MMAP_THRESHOLD_": str(32 << 20), "MALLOC_TRIM_THRESHOLD_": str(1 << 30)}
E2E = ["--set", "timing.samples_per_round=3", "--set", "timing.min_rounds=10", "--set", "timing.max_rounds=16",
       "--set", "timing.budget_s=4", "--set", "timeouts.run_s=300", "--set", "compare.rerun_rounds_factor=1",
       "--tau", "0.25"]


@pytest.mark.slow
def test_bench_gate_end_to_end_on_the_cpu(kbench, tmp_path, monkeypatch):
    monkeypatch.delenv("GITHUB_STEP_SUMMARY", raising=False)     # when the tests themselves run in Actions
    for key, value in STEADY_CPU.items():
        monkeypatch.setenv(key, value)
    assert FORWARD in FUSED and SLOW != FUSED and BROKEN != FUSED
    kernels, baselines = tmp_path / "kernels", tmp_path / "baselines"
    folder = kernels / "cpu" / "1_Add_ReLU"
    folder.mkdir(parents=True)
    for name in ("same", "slow", "broken"):
        (folder / f"{name}.py").write_text(FUSED)
    paths = ["--set", f"paths.kernels={kernels}", "--set", f"paths.baselines={baselines}"]

    # 1. the baseline run: three identical candidates, saved as this machine's baseline
    code, doc = kbench.json("bench", PROBLEM, *paths, *E2E)
    assert code == 0, [r["message"] for r in doc["results"]]
    saved = kbench("baseline", "save", doc["run_id"], "--set", f"paths.runs={kbench.runs}", *paths)
    assert saved.returncode == 0, saved.stderr
    [base_file] = baselines.glob("*.json")

    # 2. only the unchanged candidate: the gate passes (the other two are reported missing)
    (folder / "slow.py").unlink()
    (folder / "broken.py").unlink()
    proc = kbench("bench", PROBLEM, *paths, *E2E, "--baseline", "auto", "--fail-on-regression")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert f"baseline: {base_file} (auto: matches" in proc.stderr.replace("\n", "")
    assert "gate: pass" in proc.stdout and "missing" in proc.stdout
    run2 = next(p for p in kbench.runs.iterdir() if p.name != doc["run_id"])

    # 3. a 4x slower and an incorrect candidate, resumed into the same run: both regressed, exit 1
    (folder / "slow.py").write_text(SLOW)
    (folder / "broken.py").write_text(BROKEN)
    junit = tmp_path / "junit.xml"
    proc = kbench("bench", PROBLEM, *paths, *E2E, "--resume", run2.name, "--baseline", str(base_file),
                  "--fail-on-regression", "--junit", junit, "--markdown", tmp_path / "summary.md")
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "1 job(s) already recorded, 2 to run" in proc.stderr
    whole = proc.stdout.split("(the whole run, resumed)", 1)      # the resumed run's table has all three jobs
    assert len(whole) == 2 and all(c in whole[1] for c in ("same", "slow", "broken")), proc.stdout[-3000:]
    lines = [json.loads(x) for x in (run2 / "results.jsonl").read_text().splitlines()]
    # step 2's job first, then the two new ones appended (an inconclusive job's rerun is appended too)
    assert lines[0]["candidate"] == "same" and {r["candidate"] for r in lines} == {"same", "slow", "broken"}
    suite = ET.parse(junit).getroot().find("testsuite")
    assert suite.get("tests") == "3" and suite.get("failures") == "2"
    failures = {tc.get("name"): tc.find("failure") for tc in suite.iter("testcase")}
    assert failures["same"] is None
    assert failures["slow"].get("type") == "regressed" and "whole CI below" in failures["slow"].get("message")
    assert failures["broken"].get("type") == "regressed" and "correctness lost" in failures["broken"].get("message")
    summary = (tmp_path / "summary.md").read_text()
    assert "FAIL" in summary and "correctness lost" in summary


def test_calibrate_noise_times_the_reference_against_itself(kbench, tmp_path):
    proc = kbench("calibrate-noise", PROBLEM, "--set", f"paths.runs={kbench.runs}", "--config",
                  ROOT / "tests" / "fixtures" / "test.yaml", "--set", "timing.min_rounds=4")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "suggested compare.tau" in proc.stdout and PROBLEM in proc.stdout
    [run] = list(kbench.runs.iterdir())
    [r] = [json.loads(x) for x in (run / "results.jsonl").read_text().splitlines()]
    assert r["status"] == "ok" and r["candidate"] == "aa" and not [f for f in r["flags"] if f["severity"] == "error"]
    assert r["correctness"]["max_abs_err"] == 0.0 and r["timing"]["rounds"] >= 4
    assert (run / "jobs" / "aa-candidates" / "cpu" / "1_Add_ReLU" / "aa.py").is_file()


def test_secret_seeds_stay_out_of_the_records_until_the_run_ends(tmp_path):
    """A problem's seeds serve all its candidates, and the run folder is readable by them: a record must not
    hold the seeds while the run goes on (exploit sibling_seeds); reveal() puts them in once it is over."""
    secret = {"source": "secret", "init": 11, "trials": 22, "timing": 33, "variants": 44}
    replay = {"source": "config", "init": 5, "trials": 6, "timing": 1005, "variants": 2005}
    store = RunStore(tmp_path, "20261203-000000-001")
    store.append(dataclasses.replace(result("a", (2.0, 2.1)), seeds=secret))
    store.append(dataclasses.replace(result("b", (2.0, 2.1)), seeds=replay))      # --set seed=N: no secret
    mid = [json.loads(line) for line in store.results_file.read_text().splitlines()]
    assert mid[0]["seeds"] == {"source": "secret", "withheld": R.WITHHELD}
    assert "22" not in json.dumps(mid[0]["seeds"]) and mid[1]["seeds"] == replay
    assert store.verify()                  # what it wrote is what is there
    store.reveal()
    done = R.load_results(store.results_file)
    assert [r.seeds for r in done] == [secret, replay] and store.verify()
    store.append(dataclasses.replace(result("c", (2.0, 2.1)), seeds=secret))     # a later batch (the gate's rerun)
    store.reveal()
    assert [r.seeds for r in R.load_results(store.results_file)] == [secret, replay, secret]
