"""Plan jobs (problem x candidate for the device) and run them: parallel builds, and one fresh worker
per job on the device (executors/), each Result appended to the run store the moment it arrives."""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from . import results as R
from .build import build_env, cache_dir
from .catalog import Candidate, Catalog, Problem, read_candidate
from .isolation import run_isolated
from .results import Result, RunStore


@dataclass
class Job:
    problem: Problem
    candidate: Candidate

    def spec(self, cfg, device: str) -> dict:
        return {"problem_key": self.problem.key, "problem_path": str(self.problem.path),
                "candidate_name": self.candidate.name, "candidate_path": str(self.candidate.path),
                "device": device, "config": cfg.to_dict(), "cache_dir": cache_dir(cfg), "mode": "run"}


def plan(catalog: Catalog, problems: list[Problem], kernels: list[Path], device: str) -> tuple[list[Job], list[str]]:
    """Jobs for the device, and notes on what was left out (e.g. CUDA candidates on the CPU)."""
    jobs, skipped = [], []
    for problem in problems:
        cands = [read_candidate(k) for k in kernels] if kernels else catalog.candidates(problem)
        for cand in cands:
            if cand.runs_on(device):
                jobs.append(Job(problem, cand))
            else:
                skipped.append(f"{problem.key}::{cand.name} ({cand.backend} candidate, device {device})")
    return jobs, skipped


def run_reference_only(mode: str, problems: list[Problem | None], cfg, device: str, store: RunStore,
                       console: Console) -> list[Result]:
    """Worker jobs without a candidate: "lint" runs each problem's reference; "calibrate" (problem None)
    measures the device's ceilings."""
    env = build_env(cfg, device, 1)
    results = []
    with _progress(console) as progress:
        task = progress.add_task(mode, total=len(problems), current="")
        for i, problem in enumerate(problems):
            problem = problem or Problem(Path(""), "device", device)
            progress.update(task, current=problem.key)
            spec = dict(Job(problem, Candidate(Path(""), f"({mode})", "torch")).spec(cfg, device), mode=mode)
            result = run_isolated(spec, store.jobs, f"{mode}-{i}", cfg.timeouts.run_s, env)
            store.append(result)
            results.append(result)
            progress.update(task, advance=1)
    return results


def _progress(console: Console) -> Progress:
    return Progress(TextColumn("[bold]{task.description}"), BarColumn(), MofNCompleteColumn(),
                    TimeElapsedColumn(), TextColumn("{task.fields[current]}"), console=console)


def file_error_result(job: Job, cfg, device: str) -> Result:
    status = R.MISSING_MODELNEW if "ModelNew" in job.candidate.file_error else R.IMPORT_ERROR
    return Result(problem=job.problem.key, candidate=job.candidate.name, candidate_path=str(job.candidate.path),
                  device=device, dtype=cfg.dtype, status=status, phase="done",
                  message=f"{job.candidate.path}: {job.candidate.file_error}")


def execute(jobs: list[Job], cfg, device: str, store: RunStore, console: Console, build_only: bool = False,
            on_result=None) -> list[Result]:
    """Build every candidate once and run each job in a fresh worker, on the executor the config names
    (executors/: this host's GPUs or CPU workers, or a Ray cluster); Results in job order."""
    from .executors import run_jobs
    return run_jobs(jobs, cfg, device, store, console, build_only=build_only, on_result=on_result)
