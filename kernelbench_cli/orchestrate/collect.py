"""What every executor shares: one build per candidate file, the progress bars, and the collector that
appends each Result to the run store as it arrives and hands the batch back in job order."""
from __future__ import annotations

import copy
import dataclasses
import threading

from .. import results as R
from ..results import Result, RunStore


def progress_bar(console):
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
    return Progress(TextColumn("[bold]{task.description}"), BarColumn(), MofNCompleteColumn(),
                    TimeElapsedColumn(), TextColumn("{task.fields[current]}"), console=console)


def group_builds(jobs) -> dict[str, list[int]]:
    """{candidate path: indices of the jobs that need it}: a candidate used by several jobs builds once.
    Jobs whose file is unusable (no ModelNew, syntax error) need no build."""
    groups: dict[str, list[int]] = {}
    for i, job in enumerate(jobs):
        if not job.candidate.file_error:
            groups.setdefault(str(job.candidate.path), []).append(i)
    return groups


def as_job_result(built: Result, job) -> Result:
    """A build result stands for every job of its candidate (a failed build, or `kbench build`)."""
    return built if built.problem == job.problem.key else dataclasses.replace(copy.deepcopy(built),
                                                                              problem=job.problem.key)


def internal_error(job, cfg, device: str, error: BaseException) -> Result:
    """A Result for a job whose launch itself failed (never a candidate's doing), so the batch goes on."""
    return job.result(cfg, device, status=R.CRASH, phase="done",
                      message=f"could not run the job: {type(error).__name__}: {error}"[:300])


def record_slot(result: Result, slot: str) -> None:
    """Result.env["slot"]: the GPU or worker that ran the job. Only where the worker recorded its environment:
    an env holding nothing but the slot would pass for the machine's (baseline.env_of takes the first)."""
    if result.env:
        result.env["slot"] = slot


class Collector:
    """Receives results from any thread: appends each to the store at once, calls on_result, advances the
    progress bar; `results()` gives them back in the order of the jobs."""

    def __init__(self, jobs, store: RunStore, on_result=None):
        self.jobs, self.store, self.on_result = jobs, store, on_result
        self.slots: list[Result | None] = [None] * len(jobs)   # by job index
        self.lock = threading.Lock()
        self.progress = self.task = None
        self.closed = False

    def close(self) -> None:
        """After an interrupt: workers killed on the way out must not be recorded as crashes (--resume
        would skip them)."""
        with self.lock:
            self.closed = True

    def finish(self, index: int, result: Result) -> None:
        with self.lock:
            if self.closed:
                return
            self.slots[index] = result
            self.store.append(result)
            if self.on_result:
                self.on_result(result)
            if self.progress is not None:
                self.progress.update(self.task, advance=1, current=f"{result.job_id}: {result.status}")

    def start(self, progress, n_builds: int, build_only: bool, cfg, device: str):
        """Add the progress bars and settle the jobs whose file is unusable (they need no build or run);
        returns the build bar's task."""
        from .plan import file_error_result
        build_bar = progress.add_task("build", total=n_builds, current="")
        if not build_only:
            self.progress, self.task = progress, progress.add_task("run", total=len(self.jobs), current="")
        for i, job in enumerate(self.jobs):
            if job.candidate.file_error:
                self.finish(i, file_error_result(job, cfg, device))
        return build_bar

    @property
    def done(self) -> int:
        return sum(r is not None for r in self.slots)

    def results(self) -> list[Result]:
        return [r for r in self.slots if r is not None]

