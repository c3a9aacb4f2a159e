"""Plan jobs (problem x candidate for the device) as typed specs; nothing here imports problem or candidate code."""
from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from .. import backends
from .. import results as R
from ..build import cache_dir
from ..catalog import Candidate, Catalog, Problem, problem_digest, read_candidate
from ..results import Result


@dataclass(frozen=True)
class JobSpec:
    """What the reference process needs to judge one candidate (config and device go once per problem)."""
    tag: str                  # log and file names under runs/<id>/jobs/
    problem_key: str
    problem_path: str
    candidate_name: str
    candidate_path: str
    cache_dir: str
    aa_calibration: bool = False     # calibrate-noise: the candidate IS the reference (no custom-kernel proof)
    backend: str = "torch"           # backends.REGISTRY: what the candidate is
    backends: tuple = ()             # every backend its file uses (their hooks go into the candidate process)


@dataclass
class Job:
    problem: Problem
    candidate: Candidate
    aa_calibration: bool = False

    def spec(self, cfg, tag: str) -> JobSpec:
        return JobSpec(tag, self.problem.key, str(Path(self.problem.path).resolve()), self.candidate.name,
                       str(Path(self.candidate.path).resolve()), str(Path(cache_dir(cfg)).resolve()), self.aa_calibration,
                       self.candidate.backend, tuple(self.candidate.uses))

    def result(self, cfg, device: str, **kw) -> Result:
        """The one way to make a Result for this job without running it (failed build, file error, crash...)."""
        r = Result(problem=self.problem.key, candidate=self.candidate.name, candidate_path=str(self.candidate.path),
                   device=device, dtype=cfg.dtype, **kw)
        if backends.interpreted(self.candidate.backend, device):
            r.timing.note = R.INTERPRETED
        return r


def plan(catalog: Catalog, problems: list[Problem], kernels: list[Path], device: str) -> tuple[list[Job], list[str]]:
    """Jobs for the device, and notes on what was left out (e.g. CUDA candidates on the CPU)."""
    jobs, skipped = [], []
    for problem in problems:
        try:
            problem_digest(problem.path)      # as read now, before any build (catalog.problem_digest)
        except OSError:
            pass                              # (its reference process says what is wrong with it)
        cands = [read_candidate(k) for k in kernels] if kernels else catalog.candidates(problem)
        for cand in cands:
            missing = backends.BY_NAME[cand.backend].missing()
            if cand.runs_on(device) and not missing:
                jobs.append(Job(problem, cand))
            else:
                skipped.append(f"{problem.key}::{cand.name} ({cand.backend} candidate, "
                               f"{missing or f'device {device}'})")
    return jobs, skipped


def file_error_result(job: Job, cfg, device: str) -> Result:
    status = R.MISSING_MODELNEW if "ModelNew" in job.candidate.file_error else R.IMPORT_ERROR
    return job.result(cfg, device, status=status, phase="done", message=f"{job.candidate.path}: {job.candidate.file_error}")


def tag(kind: str, n: int, job: Job) -> str:
    """build-003-56_Matmul_Sigmoid_Sum-fast, job-012-...: names of logs under runs/<id>/jobs/."""
    name = re.sub(r"[^A-Za-z0-9_.-]+", "_", f"{job.problem.stem}-{job.candidate.name}")[:80]
    return f"{kind}-{n:03d}-{name}"
