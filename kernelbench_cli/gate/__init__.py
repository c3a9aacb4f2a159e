"""`kbench bench` as a CI gate: --resume, --baseline auto|FILE, --fail-on-regression, --junit, --markdown.

Flow: run the jobs (or only those the resumed run has not recorded), compare the run with the baseline
(baseline.py has the rule), rerun `inconclusive` jobs once with rerun_rounds_factor x the rounds and
budget (appended to the same run; the later result of a job wins), compare again, write the reports,
return the exit code.
"""
from __future__ import annotations

import copy
from dataclasses import dataclass
from pathlib import Path

from rich.console import Console

from . import baseline as B
from . import formats as ci_formats
from .. import results as R
from ..errors import InputError
from ..orchestrate import execute
from ..results import RunStore


def resumed_store(spec: str, runs_root: str) -> RunStore:
    results_file = R.resolve_run(spec, runs_root)
    return RunStore(results_file.parent.parent, results_file.parent.name)


def job_id(job) -> str:
    return f"{job.problem.key}::{job.candidate.name}"


def read_baselines(choice: str, baselines_dir: str) -> dict[str, str]:
    """The baseline files' contents, read before any candidate code runs: a build process imports candidates
    with write access, so a baseline read after the run could be one a candidate wrote."""
    if choice != "auto":
        path = Path(choice)
        if not path.is_file():
            raise InputError(f"--baseline {choice}: file not found; pass a baseline file or `auto`")
        return {str(path): path.read_text()}
    return {str(p): p.read_text() for p in Path(baselines_dir).glob("*.json") if p.is_file()}


def pick_baseline(choice: str, new: B.Snapshot, baselines_dir: str, err: Console,
                  frozen: dict[str, str]) -> B.Snapshot | None:
    """`auto`: the file for the run's own machine and stack, or None (with a warning) if there is none yet.
    `frozen`: read_baselines() from before the run."""
    if choice != "auto":
        path = Path(choice)
        base = B.load_baseline_file(path, frozen[str(path)])
        err.print(f"baseline: {path}", highlight=False)
        warning = B.env_warning(base, new)
        if warning:
            err.print(f"[yellow]warning:[/] {warning}", highlight=False)
        return base
    if not new.env:
        err.print("[yellow]warning:[/] no job reached the device, so the machine is unknown and no baseline "
                  "was picked; every job is 'new'", highlight=False)
        return None
    path = B.baseline_path(baselines_dir, new.env)
    if str(path) not in frozen:
        err.print(f"[yellow]warning:[/] no baseline for this machine ({new.key}): {path} not found; every job is "
                  f"'new'. Save one with: kbench baseline save {new.run_id or 'RUN'}", highlight=False)
        return None
    err.print(f"baseline: {path} (auto: matches {new.key})", highlight=False)
    return B.load_baseline_file(path, frozen[str(path)])


def rerun_config(cfg):
    """The config for rerunning inconclusive jobs: rounds and budget times compare.rerun_rounds_factor."""
    f = cfg.compare.rerun_rounds_factor
    more = copy.deepcopy(cfg)
    t = more.timing
    t.min_rounds, t.max_rounds, t.budget_s = t.min_rounds * f, t.max_rounds * f, t.budget_s * f
    more.timeouts.run_s = cfg.timeouts.run_s + t.budget_s - cfg.timing.budget_s
    return more


@dataclass
class GatePlan:
    store: RunStore
    todo: list                  # the jobs still to run (all of them unless resuming)
    baselines: dict             # read_baselines(), before any candidate ran
    resumed: bool = False       # --resume: the run's table at the end is the whole run's, not only this part's


def start(cfg, jobs: list, *, baseline: str | None, fail_on_regression: bool, resume: str | None,
          tau: float | None) -> GatePlan:
    """Check the gate's options and fix what the run will be judged against, before it runs."""
    err = Console(stderr=True)
    if fail_on_regression and not baseline:
        raise InputError("--fail-on-regression needs a baseline: add --baseline auto (or --baseline FILE)")
    if tau is not None:
        if not 0 < tau < 1:
            raise InputError(f"--tau {tau:g}: must be between 0 and 1, e.g. 0.05 for 5%")
        cfg.compare.tau = tau
    frozen = read_baselines(baseline, cfg.paths.baselines) if baseline else {}
    if resume:
        store = resumed_store(resume, cfg.paths.runs)
        done = {r.job_id for r in store.load()}
        todo = [j for j in jobs if job_id(j) not in done]
        err.print(f"resuming run {store.run_id}: {len(jobs) - len(todo)} job(s) already recorded, "
                  f"{len(todo)} to run", highlight=False)
        return GatePlan(store, todo, frozen, resumed=True)
    return GatePlan(RunStore(Path(cfg.paths.runs)), jobs, frozen)


def finish(plan: GatePlan, cfg, device: str, jobs: list, as_json: bool, *, baseline: str | None,
           fail_on_regression: bool, junit: Path | None, markdown: Path | None, html: Path | None = None) -> int:
    """After the run: compare with the baseline (rerunning inconclusive jobs once), write the CI reports;
    returns bench's exit code."""
    err = Console(stderr=True)
    out = err if as_json else Console()
    store, tau = plan.store, cfg.compare.tau
    new = B.snapshot_from_results(store.load(), str(store.results_file))

    base = pick_baseline(baseline, new, cfg.paths.baselines, err, plan.baselines) if baseline else None
    against = base or B.Snapshot("none", {}, {})
    comps = B.compare_snapshots(against, new, tau, cfg.timing.bootstrap, cfg.compare)
    if base is None:
        for c in comps:
            c.reason = c.reason.replace("not in the baseline", "no baseline")
    if base is not None:
        comps = [c for c in comps if c.verdict != B.MISSING or not _deselected(c.job, jobs)]
    unsure = {c.job for c in comps if c.verdict == B.INCONCLUSIVE}
    again = [j for j in jobs if job_id(j) in unsure]
    if fail_on_regression and again:
        more = rerun_config(cfg)
        err.print(f"rerunning {len(again)} inconclusive job(s) with {cfg.compare.rerun_rounds_factor}x the rounds "
                  f"(min {more.timing.min_rounds}, max {more.timing.max_rounds}, budget {more.timing.budget_s:g} s)",
                  highlight=False)
        execute(again, more, device, store, err)
        new = B.snapshot_from_results(store.load(), str(store.results_file))
        sd = B.between_default(cfg.compare, new)
        comps = [B.compare_job(c.job, c.base, new.jobs.get(c.job), tau, cfg.timing.bootstrap, sd)
                 if c.job in unsure else c for c in comps]
        for c in comps:
            c.rerun = c.job in unsure

    source = base.source if base is not None else ""
    if base is not None:
        ci_formats.render(comps, out, f"compare · {source} → run {store.run_id}", tau)
    strict = not baseline
    title = f"kbench bench · run {store.run_id}"
    if junit:
        ci_formats.write_junit(junit, comps, title, tau, source, strict)
        err.print(f"JUnit report: {junit}", highlight=False)
    if markdown:
        written = ci_formats.write_markdown(markdown, ci_formats.markdown(comps, title, tau, source, strict))
        err.print("markdown summary: " + ", ".join(map(str, written)), highlight=False)
    results = B.latest_per_job(store.load())
    if plan.resumed:
        from ..reports.terminal import render
        render(results, out, f"bench · {device} · run {store.run_id} (the whole run, resumed)",
               caption=f"results: {store.results_file}")
    if html:
        from ..reports.html import write_run_html
        write_run_html(html, results, Path(cfg.paths.runs), err)
    if fail_on_regression:
        return B.exit_code(comps)
    return 0 if all(r.status in (R.OK, R.SKIPPED) for r in results) else 1


def save_baseline_cmd(cfg, runs: list[str], file: Path | None, out: Console) -> Path:
    """`kbench baseline save RUN [RUN...] [--file FILE]` (several runs: pooled per job, their spread kept)."""
    files = [R.resolve_run(run, cfg.paths.runs) for run in runs]
    results_file = files[0] if len(files) == 1 else ", ".join(map(str, files))
    snap = B.snapshot_from_runs([R.load_results(f) for f in files], str(results_file))
    if not snap.jobs:
        raise InputError(f"{results_file}: the run recorded no jobs; nothing to save")
    if file is None and not snap.env:
        raise InputError(f"{results_file}: no job reached the device, so the machine is unknown; "
                         "name the file with --file")
    path = B.save_baseline(snap, file or B.baseline_path(cfg.paths.baselines, snap.env))
    failing = [j for j, rec in snap.jobs.items() if not rec.correct]
    out.print(f"saved baseline of {len(snap.jobs)} job(s) from {results_file} to {path} (machine {snap.key})",
              highlight=False)
    if failing:
        out.print(f"note: {len(failing)} job(s) recorded as failing ({', '.join(failing[:5])}"
                  f"{' ...' if len(failing) > 5 else ''}): they do not fail the gate while they stay failing",
                  highlight=False)
    return path


def compare_cmd(cfg, base_spec: str, new_spec: str, as_json: bool, junit: Path | None,
                markdown: Path | None) -> int:
    """`kbench compare BASE NEW`: table (stderr with --json), reports, exit 1 if any job regressed."""
    err = Console(stderr=True)
    out = err if as_json else Console()
    base = B.load_snapshot(base_spec, cfg.paths.runs)
    new = B.load_snapshot(new_spec, cfg.paths.runs)
    warning = B.env_warning(base, new)
    if warning:
        err.print(f"[yellow]warning:[/] {warning}", highlight=False)
    tau = cfg.compare.tau
    comps = B.compare_snapshots(base, new, tau, cfg.timing.bootstrap, cfg.compare)
    ci_formats.render(comps, out, f"compare · {base.source} → {new.source}", tau)
    title = f"kbench compare · {Path(new.source).parent.name or new.source}"
    if junit:
        ci_formats.write_junit(junit, comps, title, tau, base.source)
        err.print(f"JUnit report: {junit}", highlight=False)
    if markdown:
        written = ci_formats.write_markdown(markdown, ci_formats.markdown(comps, title, tau, base.source))
        err.print("markdown summary: " + ", ".join(map(str, written)), highlight=False)
    if as_json:
        print(ci_formats.comparisons_json(comps, base, new, tau))
    return B.exit_code(comps)


def _deselected(job: str, jobs: list) -> bool:
    """A baseline job of a problem outside this bench's selection is not 'missing' (bench cpu/1 against a
    baseline saved from --all); one of a selected problem is (its candidate was renamed or removed)."""
    return job.partition("::")[0] not in {j.problem.key for j in jobs}
