"""Baseline files and the regression rule of the CI gate.

A *baseline* is a JSON file keyed by GPU model (or CPU) and software stack, e.g.
results/baselines/nvidia-h200-torch2.11.0-cu130-cuda13.0.json, holding one record per job
(problem::candidate): status, integrity flags, speedup with its CI, device times, per-round ratios, and
the environment it was measured in. A run (runs/<run-id>/results.jsonl) reads into the same shape, so
`compare` takes a baseline file or a run on either side.

The rule (DESIGN.md, "Regression rule"), per job, in this order, once the baseline was measured as the run
was (the same timing.PROTOCOL: else every job is `new`, with a warning to save the baseline again):

1. only in the baseline -> `missing`; only in the new run -> `new` (neither fails the gate);
2. outputs correct but an integrity flag of severity error that the baseline's record does not have
   (status `integrity`) -> `regressed` ("new integrity flag");
3. correct in the baseline, not correct now (incorrect, crash, timeout, build failure...) -> `regressed`
   ("correctness lost"; flags raised by wrong outputs, e.g. `precision`, do not change that); not correct
   in either -> `unchanged` (still failing); correct only now -> `improved`;
4. both correct: let [lo, hi] be the 95% CI of r = new speedup / baseline speedup (see `ratio_ci`), then
     hi <  1 - tau                 -> `regressed`     (the whole CI is below 1 - tau)
     lo <  1 - tau <= hi           -> `inconclusive`  (the CI straddles 1 - tau)
     lo >  1 + tau                 -> `improved`      (the whole CI is above 1 + tau)
     1 - tau <= lo <= 1 + tau      -> `unchanged`     (no slowdown beyond tau is plausible; this includes a
                                                       CI inside [1 - tau, 1 + tau] and one that reaches
                                                       above 1 + tau without lying wholly above it)
   A job without timing on either side (e.g. a build-only run) is `unchanged`. tau here is the effective
   threshold: one run's CI cannot see the noise between runs (measured on the 2-core CPU box: sd of log
   speedup up to 0.047 between unchanged runs whose own CIs were +-1.4%, so a one-run baseline could fail
   an unchanged rerun at 0.885x), so 1 - tau becomes (1 - tau) * exp(-1.96 * sqrt(2) * sd), with sd the
   baseline's own (saved from 3+ runs) or `compare.between_sd_cpu` / `_cuda` (`effective_tau`).

Only `regressed` fails the gate. `bench --fail-on-regression` reruns `inconclusive` jobs once with more
rounds before deciding; a job still inconclusive after that is a warning.
"""
from __future__ import annotations

import dataclasses
import json
import math
import re
import statistics
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

from .. import results as R
from .. import stats
from ..config import CompareConfig
from ..errors import InputError

FORMAT = "kbench-baseline/1"

REGRESSED, INCONCLUSIVE, IMPROVED, UNCHANGED, NEW, MISSING = (
    "regressed", "inconclusive", "improved", "unchanged", "new", "missing")
VERDICTS = (REGRESSED, INCONCLUSIVE, IMPROVED, UNCHANGED, NEW, MISSING)
VERDICT_STYLE = {REGRESSED: "bold red", INCONCLUSIVE: "yellow", IMPROVED: "green", UNCHANGED: "",
                 NEW: "cyan", MISSING: "dim"}
MIN_BOOTSTRAP_ROUNDS = 3     # fewer per-round ratios than this on either side: use the conservative bounds


# --- records -------------------------------------------------------------------------------------------

@dataclass
class JobRecord:
    """What the gate needs of one job's Result; also one entry of a baseline file."""
    status: str
    message: str = ""
    flags: list = field(default_factory=list)        # [{"name", "severity", "detail"}]
    speedup: float | None = None
    ci_low: float | None = None
    ci_high: float | None = None
    ref_ms: float | None = None
    cand_ms: float | None = None
    rounds: int = 0
    round_ratios: list = field(default_factory=list)  # per-round ref/cand speedups
    note: str = ""                   # why there is no speed (e.g. interpreted)
    runs: int = 1                    # runs this record pools (a baseline saved from several)
    between_sd: float | None = None  # their run-to-run sd of log speedup (3+ runs), else the device default
    ref_rounds_ms: list = field(default_factory=list)
    cand_rounds_ms: list = field(default_factory=list)
    wall_s: float = 0.0

    @property
    def correct(self) -> bool:
        return self.status == R.OK

    @property
    def error_flags(self) -> dict:
        return {f["name"]: f.get("detail", "") for f in self.flags if f.get("severity") == "error"}

    @property
    def timed(self) -> bool:
        return self.speedup is not None and self.speedup > 0

    @classmethod
    def from_result(cls, r: R.Result) -> "JobRecord":
        t = r.timing
        ratios = [a / b for a, b in zip(t.ref_rounds_ms, t.cand_rounds_ms) if a and b and a > 0 and b > 0]
        return cls(status=r.status, message=r.message,
                   flags=[{"name": f.name, "severity": f.severity, "detail": f.detail} for f in r.flags],
                   speedup=t.speedup, ci_low=t.ci_low, ci_high=t.ci_high, ref_ms=t.ref_ms, cand_ms=t.cand_ms,
                   rounds=t.rounds, round_ratios=ratios, ref_rounds_ms=list(t.ref_rounds_ms),
                   cand_rounds_ms=list(t.cand_rounds_ms), wall_s=r.wall_s, note=t.note)

    @classmethod
    def from_dict(cls, d: dict, where: str) -> "JobRecord":
        known = set(cls.__dataclass_fields__)
        if "status" not in d:
            raise InputError(f"{where}: a job record has no 'status'; regenerate it with `kbench baseline save`")
        return cls(**{k: v for k, v in d.items() if k in known})


@dataclass
class Snapshot:
    """One side of a comparison: where it came from, its environment, its jobs by problem::candidate."""
    source: str
    env: dict
    jobs: dict
    run_id: str = ""

    @property
    def key(self) -> str:
        return baseline_key(self.env) if self.env else "unknown"


def latest_per_job(results: list[R.Result]) -> list[R.Result]:
    """A run file may hold a job twice (a rerun appends); the last line wins, first-seen order is kept."""
    by_job: dict[str, R.Result] = {}
    for r in results:
        by_job[r.job_id] = r          # a dict keeps a key's first position when its value is replaced
    return list(by_job.values())


def env_of(results: list[R.Result]) -> dict:
    """The environment of the first job that reached the device (build failures record none)."""
    return next((dict(r.env) for r in results if r.env), {})


def pooled(records: list[JobRecord]) -> JobRecord:
    """One job's record over several runs of it: the geometric mean speedup, every run's rounds, the CI bounds
    of them all, and the run-to-run sd of the log speedup (3+ runs). A run where it failed wins: recorded as
    failing."""
    failing = [r for r in records if not r.correct]
    timed = [r for r in records if r.timed]
    if failing or len(timed) < len(records) or len(records) == 1:
        return (failing or records)[0]
    logs = [math.log(r.speedup) for r in timed]
    first = records[0]
    return dataclasses.replace(
        first, speedup=math.exp(sum(logs) / len(logs)), ci_low=min(r.ci_low or r.speedup for r in timed),
        ci_high=max(r.ci_high or r.speedup for r in timed), rounds=sum(r.rounds for r in timed),
        round_ratios=[x for r in timed for x in r.round_ratios], ref_rounds_ms=[x for r in timed for x in r.ref_rounds_ms],
        cand_rounds_ms=[x for r in timed for x in r.cand_rounds_ms], runs=len(records),
        between_sd=statistics.stdev(logs) if len(logs) >= 3 else None)


def snapshot_from_runs(runs: list[list[R.Result]], source: str) -> Snapshot:
    """A baseline from several runs of the same jobs (each job pooled over the runs that have it)."""
    snaps = [snapshot_from_results(results, source) for results in runs]
    jobs = {job: pooled([s.jobs[job] for s in snaps if job in s.jobs]) for job in dict.fromkeys(
        j for s in snaps for j in s.jobs)}
    return Snapshot(source, snaps[0].env, jobs, ",".join(s.run_id for s in snaps if s.run_id))


def between_default(compare_cfg, snap: Snapshot) -> float:
    """The run-to-run sd a comparison assumes where the baseline did not measure its own: per device."""
    return compare_cfg.between_sd_cuda if snap.env.get("gpu") else compare_cfg.between_sd_cpu


def snapshot_from_results(results: list[R.Result], source: str) -> Snapshot:
    results = latest_per_job(results)
    return Snapshot(source, env_of(results), {r.job_id: JobRecord.from_result(r) for r in results},
                    next((r.run_id for r in results if r.run_id), ""))


# --- baseline files ------------------------------------------------------------------------------------

def slug(text: str) -> str:
    return re.sub(r"[^a-z0-9.]+", "-", str(text).lower()).strip("-.") or "unknown"


def baseline_key(env: dict) -> str:
    """GPU model (or CPU), torch and CUDA versions: nvidia-h200-torch2.11.0-cu130-cuda13.0."""
    machine = env.get("gpu") or env.get("cpu") or "unknown"
    return f"{slug(machine)}-torch{slug(env.get('torch') or 'unknown')}-cuda{slug(env.get('cuda') or 'none')}"


def baseline_path(directory: str | Path, env: dict) -> Path:
    return Path(directory) / f"{baseline_key(env)}.json"


def save_baseline(snap: Snapshot, path: Path) -> Path:
    doc = {"format": FORMAT, "key": snap.key, "created": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
           "source": snap.source, "run_id": snap.run_id, "env": snap.env,
           "jobs": {job: asdict(rec) for job, rec in sorted(snap.jobs.items())}}
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(doc, indent=1) + "\n")
    tmp.replace(path)
    return path


def load_baseline_file(path: Path, text: str | None = None) -> Snapshot:
    """`text`: the file's contents as read earlier (see gate.read_baselines)."""
    try:
        doc = json.loads(path.read_text() if text is None else text)
    except (OSError, json.JSONDecodeError) as e:
        raise InputError(f"{path}: cannot read baseline file ({e}); regenerate it with `kbench baseline save`") \
            from None
    if not isinstance(doc, dict) or doc.get("format") != FORMAT or not isinstance(doc.get("jobs"), dict):
        raise InputError(f"{path}: not a kbench baseline file (expected format {FORMAT}); "
                         "create one with `kbench baseline save RUN`")
    jobs = {job: JobRecord.from_dict(d, f"{path}: {job}") for job, d in doc["jobs"].items()}
    return Snapshot(str(path), doc.get("env") or {}, jobs, doc.get("run_id", ""))


def load_snapshot(spec: str | Path, runs_root: str | Path) -> Snapshot:
    """A baseline file (.json), or a run (id, directory or results.jsonl)."""
    p = Path(spec)
    if p.is_file() and p.suffix == ".json":
        return load_baseline_file(p)
    path = R.resolve_run(spec, runs_root)
    return snapshot_from_results(R.load_results(path), str(path))


# --- the rule ------------------------------------------------------------------------------------------

@dataclass
class Comparison:
    job: str
    verdict: str
    reason: str
    base: JobRecord | None = None
    new: JobRecord | None = None
    ratio: float | None = None       # new speedup / baseline speedup
    ratio_low: float | None = None   # its 95% CI
    ratio_high: float | None = None
    method: str = ""                 # bootstrap | bounds (how the CI was computed)
    rerun: bool = False              # decided after a rerun with more rounds
    tau: float | None = None         # the threshold used: tau with the run-to-run noise in it (effective_tau)
    between_sd: float | None = None  # that noise: the baseline's own (3+ runs) or the device default

    def to_dict(self) -> dict:
        d = asdict(self)
        for side in ("base", "new"):   # the per-round lists are in the run files; keep the JSON short
            if d[side]:
                for k in ("round_ratios", "ref_rounds_ms", "cand_rounds_ms"):
                    d[side].pop(k)
        return d


def ratio_ci(base: JobRecord, new: JobRecord, resamples: int = 2000) -> tuple[float, float, str]:
    """95% CI of new/base speedup: a bootstrap over both runs' per-round ratios when each has at least
    MIN_BOOTSTRAP_ROUNDS of them, else the conservative bounds (new lo / base hi, new hi / base lo)."""
    if len(base.round_ratios) >= MIN_BOOTSTRAP_ROUNDS and len(new.round_ratios) >= MIN_BOOTSTRAP_ROUNDS:
        lo, hi = stats.bootstrap_ratio_ci(new.round_ratios, base.round_ratios, resamples)
        return lo, hi, "bootstrap"
    b_lo, b_hi = base.ci_low or base.speedup, base.ci_high or base.speedup
    n_lo, n_hi = new.ci_low or new.speedup, new.ci_high or new.speedup
    return n_lo / b_hi, n_hi / b_lo, "bounds"


def classify(lo: float, hi: float, tau: float) -> str:
    """Step 4 of the rule on a CI [lo, hi] of new/base speedup."""
    if hi < 1 - tau:
        return REGRESSED
    if lo < 1 - tau:
        return INCONCLUSIVE
    if lo > 1 + tau:
        return IMPROVED
    return UNCHANGED


def effective_tau(tau: float, sd: float) -> float:
    """The threshold with run-to-run noise in it: an unchanged job's new/base lands within a factor
    exp(+-1.96 * sqrt(2) * sd) of 1 in 95% of reruns (both runs' log speedups carry sd), so a slowdown counts
    only beyond 1 - tau times that factor. sd 0: tau itself."""
    return tau if sd <= 0 else 1 - (1 - tau) * math.exp(-1.96 * math.sqrt(2) * sd)


def compare_job(job: str, base: JobRecord | None, new: JobRecord | None, tau: float,
                resamples: int = 2000, between_sd: float = 0.0) -> Comparison:
    if new is None:
        return Comparison(job, MISSING, "in the baseline, not in this run", base=base)
    if base is None:
        note = "" if new.correct else f" ({new.status}: {new.message})" if new.message else f" ({new.status})"
        return Comparison(job, NEW, "not in the baseline" + note, new=new)
    c = Comparison(job, UNCHANGED, "", base=base, new=new)
    added = {n: d for n, d in new.error_flags.items() if n not in base.error_flags}
    if new.status == R.INTEGRITY and added:
        c.verdict = REGRESSED
        c.reason = "new integrity flag " + "; ".join(f"{n}: {d}" if d else n for n, d in added.items())
    elif base.correct and not new.correct:
        c.verdict = REGRESSED
        c.reason = f"correctness lost: {new.status}" + (f": {new.message}" if new.message else "")
    elif not base.correct and not new.correct:
        c.reason = f"still failing ({new.status}; baseline {base.status})"
    elif not base.correct:
        c.verdict, c.reason = IMPROVED, f"now correct (baseline: {base.status})"
    elif base.timed and not new.timed:     # (e.g. `import triton` made it interpreted): a speed no longer vouched for
        c.verdict, c.reason = REGRESSED, f"timing lost: the baseline timed it at {base.speedup:.2f}×, this run did not"
    elif not (base.timed and new.timed):
        note = new.note or base.note
        c.reason = "no timing to compare" + (f" ({note})" if note else "")
    else:
        c.ratio = new.speedup / base.speedup
        c.ratio_low, c.ratio_high, c.method = ratio_ci(base, new, resamples)
        sd = base.between_sd if base.between_sd is not None else between_sd
        c.tau = tau = effective_tau(tau, sd)
        c.between_sd = sd
        c.verdict = classify(c.ratio_low, c.ratio_high, tau)
        ci = f"new/base {c.ratio:.3f}× [{c.ratio_low:.3f}, {c.ratio_high:.3f}]"
        noise = f" (τ with run-to-run sd {sd:.3f})" if sd else ""
        c.reason = {REGRESSED: f"{ci}: whole CI below 1 - τ = {1 - tau:.3f}",
                    INCONCLUSIVE: f"{ci}: CI straddles 1 - τ = {1 - tau:.3f}",
                    IMPROVED: f"{ci}: whole CI above 1 + τ = {1 + tau:.3f}",
                    UNCHANGED: f"{ci}: no slowdown beyond τ = {tau:.3g}"}[c.verdict] + noise
    return c


def compare_snapshots(base: Snapshot, new: Snapshot, tau: float, resamples: int = 2000,
                      between=None) -> list[Comparison]:
    """One Comparison per job of either side: the new run's order first, then the missing ones."""
    jobs = list(new.jobs) + [j for j in base.jobs if j not in new.jobs]
    sd = between_default(between or CompareConfig(), new if new.env else base)
    if stale_protocol(base, new):     # speedups measured another way: every job is new (env_warning says why)
        return [compare_job(j, None, new.jobs[j], tau, resamples, sd) for j in new.jobs]
    return [compare_job(j, base.jobs.get(j), new.jobs.get(j), tau, resamples, sd) for j in jobs]


def stale_protocol(base: Snapshot, new: Snapshot) -> tuple[int, int] | None:
    """(baseline's, run's) timing protocol (timing.PROTOCOL; 1 before it was recorded) when they differ."""
    if base.env and new.env and base.env.get("timing_protocol", 1) != new.env.get("timing_protocol", 1):
        return base.env.get("timing_protocol", 1), new.env.get("timing_protocol", 1)
    return None


def counts(comps: list[Comparison]) -> dict:
    return {v: sum(c.verdict == v for c in comps) for v in VERDICTS}


def exit_code(comps: list[Comparison]) -> int:
    """The gate: 1 if any job regressed, else 0."""
    return 1 if any(c.verdict == REGRESSED for c in comps) else 0


def env_warning(base: Snapshot, new: Snapshot) -> str | None:
    if base.env and new.env and base.key != new.key:
        return (f"the baseline is for {base.key} but the run is on {new.key}: speedups from different machines "
                "or software stacks are not comparable")
    if stale_protocol(base, new):
        return ("the baseline was measured with kbench's timing protocol {} and this run with {} (kbench changed how "
                "it measures: timing.PROTOCOL): every job is 'new'; save the baseline again from this kbench "
                "(`kbench baseline save RUN RUN RUN`)".format(*stale_protocol(base, new)))
    return None
