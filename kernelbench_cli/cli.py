"""kbench commands: parse, build the Config, call the pipeline, render, exit code. Nothing else lives here.

Exit codes: 0 every job correct, 1 a candidate failed (incorrect, crashed, flagged...), 2 bad usage/input.
"""
from __future__ import annotations

import sys
from pathlib import Path
from typing import List, Optional

import typer
from rich.console import Console
from rich.table import Table

from . import backends, scale
from . import results as R
from .catalog import Catalog, read_candidate
from .config import load_config
from .errors import InputError
from .orchestrate import execute, plan, precompile_baselines, resolve_device, run_reference_only
from .reports.terminal import render, to_json
from .results import RunStore

app = typer.Typer(add_completion=False, no_args_is_help=True, pretty_exceptions_enable=False,
                  help="Judge GPU kernels: build candidates, prove them correct, measure their speedup.")
err = Console(stderr=True)


def _help_type(param, ctx) -> str | None:
    """The type column of --help in the usual words (typer prints Python types: `--json <bool>`, `<list[str]>`):
    nothing for a flag, TEXT / N / X / PATH, `...` when it repeats."""
    if param.metavar is not None and not isinstance(param, typer.core.TyperArgument):
        return param.metavar
    label = (param.display_type(ctx) or "").strip("<>")
    many = label.startswith("list[")
    label = label.removeprefix("list[").removesuffix("]")
    word = {"bool": "", "str": "TEXT", "int": "N", "float": "X", "path": "PATH", "Path": "PATH"}.get(label, label.upper())
    return (word + ("..." if many else "")) if word else None


for _cls in (typer.core.TyperOption, typer.core.TyperArgument):
    if hasattr(_cls, "display_type_rich"):       # (typer >= 0.24 renders the column through it)
        _cls.display_type_rich = _help_type

ConfigOpt = typer.Option(None, "--config", "-c", help="YAML config (see configs/).")
DeviceOpt = typer.Option(None, "--device", help="auto | cuda | cpu (default: the config's, auto).")
JsonOpt = typer.Option(False, "--json", help="Print results as JSON on stdout (tables go to stderr).")
OutOpt = typer.Option(None, "--out", help="Runs folder (default: the config's paths.runs, ./runs).")
SetOpt = typer.Option([], "--set", help="Override any config key, e.g. --set timing.budget_s=5.")
BaselinesOpt = typer.Option(None, "--baselines", help="Comma list: eager (always), compile (torch.compile "
                                                      "of the reference; compile time excluded and reported).")
TauOpt = typer.Option(None, "--tau", help="Regression threshold (default: the config's compare.tau).")
JunitOpt = typer.Option(None, "--junit", help="Write a JUnit XML report (one testcase per job) to FILE.")
MarkdownOpt = typer.Option(None, "--markdown", help="Write a markdown summary to FILE (and append it to "
                                                    "$GITHUB_STEP_SUMMARY when set).")


def _setup(config, device, out, sets, baselines: str | None = None, scaled: dict | None = None,
           compile_only: bool = False):
    overrides = {"device": device, "paths.runs": out and str(out),
                 "baselines": baselines and [b.strip() for b in baselines.split(",")], **(scaled or {})}
    cfg = load_config(config, overrides=overrides, sets=sets)
    dev = resolve_device(cfg.device, compile_only)
    scale.check(cfg, dev, scaled, compile_only)
    return cfg, dev, Catalog(Path(cfg.paths.problems), Path(cfg.paths.kernels))


def _run(cfg, device, jobs, skipped, as_json: bool, title: str, build_only: bool = False, store=None) -> list:
    out = err if as_json else Console()
    if skipped:
        err.print(f"skipped {len(skipped)} candidate(s) that cannot run here: " + "; ".join(skipped[:5])
                  + (" ..." if len(skipped) > 5 else ""), highlight=False)
    if not jobs:
        raise InputError(f"nothing to run on {device}: no matching candidates (kernels under {cfg.paths.kernels}/"
                         "<level>/<problem>/, or pass --kernel FILE)")
    store = store or RunStore(Path(cfg.paths.runs))
    store.write_config(cfg.to_dict())
    CURRENT["store"] = store
    results = execute(jobs, cfg, device, store, err, build_only=build_only)
    render(results, out, f"{title} · {device} · run {store.run_id}", caption=f"results: {store.results_file}",
           build_only=build_only)
    if as_json:
        print(to_json(results, store.run_id, device))
    return results


def _exit_code(results) -> int:
    return 0 if all(r.status in (R.OK, R.SKIPPED) for r in results) else 1


@app.command()
def check(problem: str = typer.Argument(..., help="Path, stem (56_Matmul_Sigmoid_Sum) or level2/56."),
          kernel: List[Path] = typer.Option([], "--kernel", "-k", help="Candidate file(s); default: all of "
                                                                      "the problem's candidates."),
          config: Optional[Path] = ConfigOpt, device: Optional[str] = DeviceOpt, json: bool = JsonOpt,
          out: Optional[Path] = OutOpt, set_: List[str] = typer.Option([], "--set", help=SetOpt.help),
          baselines: Optional[str] = BaselinesOpt, gpus: Optional[str] = scale.GpusOpt,
          workers: Optional[int] = scale.WorkersOpt, executor: Optional[str] = scale.ExecutorOpt,
          ray_address: Optional[str] = scale.RayAddressOpt, arch: Optional[str] = scale.ArchOpt):
    """Build, verify and time the candidates of one problem."""
    cfg, dev, catalog = _setup(config, device, out, set_, baselines,
                               scale.overrides(gpus, workers, executor, ray_address, arch))
    prob = catalog.resolve(problem)
    _check_kernels(kernel, dev)
    jobs, skipped = plan(catalog, [prob], kernel, dev)
    results = _run(cfg, dev, jobs, skipped, json, f"check {prob.key}")
    bad_input = [r for r in results if r.status in R.INPUT_ERRORS]
    if bad_input:
        raise InputError(f"{bad_input[0].candidate_path}: {bad_input[0].message}")
    raise typer.Exit(_exit_code(results))


def _check_kernels(kernel: list[Path], dev: str) -> None:
    """Candidate files named with --kernel: each readable, with a ModelNew, runnable on the device."""
    for k in kernel:
        cand = read_candidate(k)
        if cand.file_error:
            raise InputError(f"{k}: {cand.file_error}")
        if not cand.runs_on(dev):
            raise InputError(f"{k}: a {cand.backend} candidate cannot run on device {dev}; "
                             f"use --device {'cpu' if cand.backend == 'cpu' else 'cuda'}")
        missing = backends.BY_NAME[cand.backend].missing()
        if missing:
            raise InputError(f"{k}: a {cand.backend} candidate, but {missing}")


def _select(catalog, problems: list[str], all_: bool):
    if all_ == bool(problems):
        raise InputError("name one or more problems, or pass --all (not both)")
    return catalog.problems() if all_ else [catalog.resolve(p) for p in problems]


@app.command()
def bench(problems: List[str] = typer.Argument(None, help="Problems to run (or --all): keys, stems or paths "
                                                           "of problem files."),
          all_: bool = typer.Option(False, "--all", help="Every problem under paths.problems."),
          kernel: List[Path] = typer.Option([], "--kernel", "-k", help="Candidate file(s), run on every selected "
                                                                      "problem; default: each problem's own."),
          config: Optional[Path] = ConfigOpt, device: Optional[str] = DeviceOpt, json: bool = JsonOpt,
          baselines: Optional[str] = BaselinesOpt,
          out: Optional[Path] = OutOpt, set_: List[str] = typer.Option([], "--set", help=SetOpt.help),
          html: Optional[Path] = typer.Option(None, "--html", help="Also write a self-contained HTML report."),
          baseline: Optional[str] = typer.Option(None, "--baseline", help="auto | FILE: compare the run with the "
                                                 "baseline of this machine (paths.baselines) or with FILE."),
          fail_on_regression: bool = typer.Option(False, "--fail-on-regression", help="Exit 1 only if a job "
                                                  "regressed against --baseline (inconclusive ones are rerun first)."),
          tau: Optional[float] = TauOpt, junit: Optional[Path] = JunitOpt, markdown: Optional[Path] = MarkdownOpt,
          resume: Optional[str] = typer.Option(None, "--resume", help="Run id or directory: skip the jobs it has "
                                               "recorded, append the rest to it."),
          gpus: Optional[str] = scale.GpusOpt, workers: Optional[int] = scale.WorkersOpt,
          executor: Optional[str] = scale.ExecutorOpt, ray_address: Optional[str] = scale.RayAddressOpt,
          arch: Optional[str] = scale.ArchOpt,
          problems_dir: Optional[Path] = typer.Option(None, "--problems", help="A KernelBench problems folder "
                                                      "(level1/, level2/... or flat <id>_<Name>.py files); "
                                                      "all of its problems unless some are named."),
          candidates: Optional[str] = typer.Option(None, "--candidates", help="Generated candidate files by "
                                                   "pattern: 'gens/level_{level}_problem_{id}_sample_{sample}"
                                                   "_kernel.py' ({sample} becomes the candidate name).")):
    """Run every candidate of the selected problems on the device."""
    cfg, dev, catalog = _setup(config, device, out, set_, baselines,
                               scale.overrides(gpus, workers, executor, ray_address, arch))
    if problems_dir or candidates:
        from .kernelbench_compat import FolderCatalog
        catalog = FolderCatalog(problems_dir or Path(cfg.paths.problems), Path(cfg.paths.kernels), candidates)
        all_ = all_ or not problems
    _check_kernels(kernel, dev)
    jobs, skipped = plan(catalog, _select(catalog, problems or [], all_), kernel, dev)
    if baseline or fail_on_regression or junit or markdown or resume or tau is not None:
        from . import gate
        plan_ = gate.start(cfg, jobs, baseline=baseline, fail_on_regression=fail_on_regression, resume=resume, tau=tau)
        if plan_.todo:
            _run(cfg, dev, plan_.todo, skipped, json, "bench", store=plan_.store)
        raise typer.Exit(gate.finish(plan_, cfg, dev, jobs, json, baseline=baseline, junit=junit, markdown=markdown,
                                     fail_on_regression=fail_on_regression, html=html))
    results = _run(cfg, dev, jobs, skipped, json, "bench")
    if html:
        from .reports.html import write_run_html
        write_run_html(html, results, Path(cfg.paths.runs), err)
    raise typer.Exit(_exit_code(results))


@app.command()
def build(problems: List[str] = typer.Argument(None, help="Problems whose candidates to build (or --all)."),
          all_: bool = typer.Option(False, "--all", help="Every problem under paths.problems."),
          kernel: List[Path] = typer.Option([], "--kernel", "-k", help="Candidate file(s), built for every selected "
                                                                      "problem; default: each problem's own."),
          config: Optional[Path] = ConfigOpt, device: Optional[str] = DeviceOpt, json: bool = JsonOpt,
          out: Optional[Path] = OutOpt, set_: List[str] = typer.Option([], "--set", help=SetOpt.help),
          arch: Optional[str] = scale.ArchOpt, executor: Optional[str] = scale.ExecutorOpt,
          ray_address: Optional[str] = scale.RayAddressOpt,
          baselines: Optional[str] = typer.Option(None, "--baselines", help="With compile: also compile each "
                                                  "problem's torch.compile baseline into the cache (untimed).")):
    """Compile candidates in parallel processes (cached by content); run nothing."""
    cfg, dev, catalog = _setup(config, device, out, set_, baselines, compile_only=True,
                               scaled=scale.overrides(None, None, executor, ray_address, arch))
    _check_kernels(kernel, dev)
    jobs, skipped = plan(catalog, _select(catalog, problems or [], all_), kernel, dev)
    store = RunStore(Path(cfg.paths.runs))
    results = _run(cfg, dev, jobs, skipped, json, "build", build_only=True, store=store)
    err.print(f"compile logs, one per candidate: {store.jobs}/build-*.log", highlight=False)
    if "compile" in cfg.baselines:
        done = precompile_baselines(cfg, dev, jobs, store, err)
        err.print(f"torch.compile baselines compiled: {sum(r.status == R.OK and r.phase != 'skipped' for r in done)}"
                  f"/{len(done)} problems", highlight=False)
        for r in done:
            if r.status != R.OK or r.phase == "skipped":
                err.print(f"  {r.problem}: {r.message}", markup=False, highlight=False)
    raise typer.Exit(_exit_code(results))


@app.command()
def lint(problems: List[str] = typer.Argument(None, help="Problems to lint (or --all)."),
         all_: bool = typer.Option(False, "--all", help="Every problem under paths.problems."),
         config: Optional[Path] = ConfigOpt, device: Optional[str] = DeviceOpt, json: bool = JsonOpt,
         out: Optional[Path] = OutOpt, set_: List[str] = typer.Option([], "--set", help=SetOpt.help)):
    """Flag degenerate problems: all-zeros or a constant passes, or the output ignores the inputs."""
    cfg, dev, catalog = _setup(config, device, out, set_)
    store = RunStore(Path(cfg.paths.runs))
    results = run_reference_only("lint", _select(catalog, problems or [], all_), cfg, dev, store, err)
    t = Table(title=f"lint · {dev} · run {store.run_id}", title_justify="left")
    for col in ("problem", "verdict", "detail"):
        t.add_column(col, overflow="fold")
    for r in results:
        verdict = "[red]failed[/]" if r.status != R.OK else "[yellow]degenerate[/]" if r.flags else \
            "[yellow]skipped[/]" if r.phase == "skipped" else "[green]ok[/]"
        t.add_row(r.problem, verdict, r.message)
    (err if json else Console()).print(t)
    if json:
        print(to_json(results, store.run_id, dev))
    raise typer.Exit(0 if all(r.status == R.OK and not r.flags for r in results) else 1)


@app.command()
def report(runs: List[str] = typer.Argument(..., help="RUN (a run id under paths.runs, a run directory or a "
                                                      "results.jsonl), or BASE NEW to compare two runs."),
           html: Optional[Path] = typer.Option(None, "--html", help="Also write a self-contained HTML report."),
           config: Optional[Path] = ConfigOpt, out: Optional[Path] = OutOpt, json: bool = JsonOpt):
    """Re-render a saved run's tables, or compare two runs; nothing is rerun. --html FILE: a page with plots.
    Exits 1 if a job of the (new) run failed, as `bench` would have."""
    from .reports.html import report_command
    cfg = load_config(config, overrides={"paths.runs": out and str(out)})
    raise typer.Exit(_exit_code(report_command(runs, Path(cfg.paths.runs), html, Console(), err, json)))


@app.command()
def calibrate(config: Optional[Path] = ConfigOpt, device: Optional[str] = DeviceOpt,
              out: Optional[Path] = OutOpt, set_: List[str] = typer.Option([], "--set", help=SetOpt.help)):
    """Measure this device's ceilings (copy bandwidth, matmul rate per dtype) for the roofline; cached."""
    cfg, dev, _ = _setup(config, device, out, set_)
    result = run_reference_only("calibrate", [None], cfg, dev, RunStore(Path(cfg.paths.runs)), err)[0]
    if result.status != R.OK:
        err.print(f"calibration failed: {result.status}: {result.message}\n{result.stderr_tail}", markup=False)
        raise typer.Exit(1)
    c = result.roofline
    t = Table(title=f"ceilings · {c['device']} · saved to {result.message}", title_justify="left")
    t.add_column("ceiling")
    t.add_column("measured", justify="right")
    t.add_row("copy bandwidth (read + write)", f"{c['copy_gbps']:.0f} GB/s")
    for dtype, rate in c["matmul_tflops"].items():
        t.add_row(f"matmul {dtype}", f"{rate:.3g} TFLOP/s")
    Console().print(t)


@app.command("list")
def list_(config: Optional[Path] = ConfigOpt,
          set_: List[str] = typer.Option([], "--set", help=SetOpt.help)):
    """Problems and their candidates (with the backend each candidate needs)."""
    cfg = load_config(config, sets=set_)
    catalog = Catalog(Path(cfg.paths.problems), Path(cfg.paths.kernels))
    t = Table(title=f"problems under {cfg.paths.problems}/", title_justify="left")
    t.add_column("problem")
    t.add_column("candidates")
    for p in catalog.problems():
        cands = catalog.candidates(p)
        t.add_row(p.key, ", ".join(f"{c.name} ({c.backend})" for c in cands) or "[dim]none[/]")
    Console().print(t)


baseline_app = typer.Typer(no_args_is_help=True, help="Baseline files for the CI gate.")
app.add_typer(baseline_app, name="baseline")


@baseline_app.command("save")
def baseline_save(run: List[str] = typer.Argument(..., help="Run id under paths.runs, a run directory or a "
                                                  "results.jsonl; several runs of the same jobs are pooled, and "
                                                  "3+ measure each job's run-to-run noise for the gate."),
                  file: Optional[Path] = typer.Option(None, "--file", help="Where to write it (default: "
                                                      "paths.baselines/<gpu-or-cpu>-torch<ver>-cuda<ver>.json)."),
                  config: Optional[Path] = ConfigOpt, set_: List[str] = typer.Option([], "--set", help=SetOpt.help)):
    """Save a run (or several) as the baseline of its GPU model and software stack."""
    from .gate import save_baseline_cmd
    save_baseline_cmd(load_config(config, sets=set_), run, file, Console())


@app.command()
def compare(base: str = typer.Argument(..., help="Baseline file, or a run (id, directory, results.jsonl)."),
            new: str = typer.Argument(..., help="A run (id, directory, results.jsonl), or a baseline file."),
            tau: Optional[float] = TauOpt, junit: Optional[Path] = JunitOpt, markdown: Optional[Path] = MarkdownOpt,
            config: Optional[Path] = ConfigOpt, json: bool = JsonOpt,
            set_: List[str] = typer.Option([], "--set", help=SetOpt.help)):
    """Verdict per job of NEW against BASE (regressed, improved, unchanged, ...); exit 1 if any regressed."""
    from .gate import compare_cmd
    cfg = load_config(config, overrides={"compare.tau": tau}, sets=set_)
    raise typer.Exit(compare_cmd(cfg, base, new, json, junit, markdown))


@app.command("calibrate-noise")
def calibrate_noise(problems: List[str] = typer.Argument(None, help="Problems to time against themselves (or --all)."),
                    all_: bool = typer.Option(False, "--all", help="Every problem with a candidate for the device."),
                    config: Optional[Path] = ConfigOpt, device: Optional[str] = DeviceOpt, json: bool = JsonOpt,
                    out: Optional[Path] = OutOpt, set_: List[str] = typer.Option([], "--set", help=SetOpt.help)):
    """Time each reference against itself (A/A) and suggest compare.tau (>= 3x the observed noise)."""
    from .gate.noise import calibrate, default_problems
    cfg, dev, catalog = _setup(config, device, out, set_)
    probs = default_problems(catalog, dev) if all_ and not problems else _select(catalog, problems or [], all_)
    raise typer.Exit(calibrate(cfg, dev, probs, err if json else Console(), err, json))


@app.command()
def serve(config: Optional[Path] = ConfigOpt, device: Optional[str] = DeviceOpt,
          set_: List[str] = typer.Option([], "--set", help=SetOpt.help)):
    """Keep a warm server (torch imported) that starts reference processes for kbench commands on this
    machine: a check no longer pays the python + torch import. Runs until Ctrl-C."""
    from .build import build_env
    from .orchestrate import lifecycle, warm
    from .orchestrate.judges import reference_env
    cfg, dev, _ = _setup(config, device, None, set_)
    try:
        code = warm.serve(reference_env(cfg, dev, build_env(cfg, dev, 1)), err)
    except KeyboardInterrupt:
        lifecycle.INTERRUPTED["signal"] = None
        err.print("kbench serve: stopped", highlight=False)
        code = 0
    raise typer.Exit(code)


CURRENT: dict = {"store": None}      # the run in progress, for the interrupt message


def _interrupted() -> str:
    store = CURRENT["store"]
    if store is None:
        return "interrupted before any job ran"
    n = len(store.results_file.read_text().splitlines()) if store.results_file.is_file() else 0
    return (f"interrupted: {n} job(s) recorded in {store.results_file}; resume with the same command plus "
            f"--resume {store.run_id}")


def main() -> None:
    from .orchestrate import lifecycle
    lifecycle.install_signal_handlers()
    lifecycle.become_subreaper()
    try:
        app()     # standalone: click reports usage errors itself (exit 2) and turns typer.Exit into the code
    except InputError as e:
        err.print(f"error: {e}", highlight=False, markup=False, soft_wrap=True)
        sys.exit(2)
    except (KeyboardInterrupt, SystemExit) as e:    # typer turns Ctrl-C into Exit(130)
        if lifecycle.INTERRUPTED["signal"] is None and not isinstance(e, KeyboardInterrupt):
            raise
        lifecycle.kill_all()
        err.print(_interrupted(), highlight=False, markup=False, soft_wrap=True)
        sys.exit(143 if lifecycle.INTERRUPTED["signal"] == 15 else 130)
    finally:
        for note in dict.fromkeys(R.TORN):     # a results file's torn last line, skipped on reading
            err.print(f"warning: {note}", highlight=False, markup=False, soft_wrap=True)
        from .orchestrate.warm import NOTICES  # why the warm server (kbench serve) was not used
        for note in NOTICES:
            err.print(f"note: {note}", highlight=False, markup=False, soft_wrap=True)
