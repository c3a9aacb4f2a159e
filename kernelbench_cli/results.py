"""Result records (plain dataclasses) and the run store: runs/<run-id>/results.jsonl, one line per job.

A Result is serialised in exactly one place (`to_json` / `from_dict`); the worker writes it, the parent
appends it to the run file as soon as the job ends, report and compare read it back.
"""
from __future__ import annotations

import dataclasses
import difflib
import json
import os
import time
from dataclasses import dataclass, field
from pathlib import Path

from .errors import InputError

# Status values, in pipeline order. Only "ok" counts as correct.
OK = "ok"
INCORRECT = "incorrect"              # ran, but outputs differ from the reference beyond tolerance
COMPILE_ERROR = "compile-error"      # load_inline failed to build
IMPORT_ERROR = "import-error"        # the candidate module raised while importing (not a build failure)
MISSING_MODELNEW = "missing-modelnew"
BAD_CONSTRUCTOR = "bad-constructor"  # ModelNew(*get_init_inputs()) raised
RUNTIME_ERROR = "runtime-error"      # forward raised a Python/torch exception
CUDA_ERROR = "cuda-error"            # forward raised a CUDA error (illegal address, launch failure...)
CRASH = "crash"                      # worker died: signal (segfault, abort) or exited without a result
TIMEOUT = "timeout"                  # worker exceeded its wall-clock limit and was killed
INTEGRITY = "integrity"              # outputs matched but an integrity check failed (see flags)
PROBLEM_ERROR = "problem-error"      # the reference itself failed (Model(), get_inputs() or forward raised)
SKIPPED = "skipped"                  # not run on this device, and why (an interpreted candidate of a GPU-sized problem)

INTERPRETED = "interpreted — not a speed"    # Timing.note of a backend run in an interpreter (Triton on the CPU)

# Statuses caused by a malformed file rather than by a kernel: `check` exits 2 on these.
INPUT_ERRORS = (MISSING_MODELNEW, BAD_CONSTRUCTOR, PROBLEM_ERROR)


@dataclass
class Flag:
    name: str           # e.g. "precision", "input-mutated", "no-custom-kernel"
    severity: str       # "error" fails the job; "warning" is reported only
    detail: str


@dataclass
class BuildInfo:
    status: str = "none"        # none (no load_inline) | built | cached | failed
    seconds: float = 0.0
    extensions: list = field(default_factory=list)   # [{"name", "key", "functions", "backend", "cached"}]
    log: str = ""               # compiler output tail, kept on failure (or when build.verbose)
    sources: list = field(default_factory=list)      # files the candidate's import read (build records check them)


@dataclass
class Correctness:
    trials: int = 0
    passed: int = 0
    atol: float = 0.0
    rtol: float = 0.0
    max_abs_err: float = 0.0
    max_rel_err: float = 0.0
    mismatches: int = 0         # elements outside tolerance, summed over trials
    oracle_passed: int = 0      # elements outside tolerance of the reference but as close to float64 as it
    weights: str = ""           # state_dict | seed (how the candidate got the reference's parameters)
    oracle_err_ref: float | None = None    # ||ref - fp64|| / ||fp64||
    oracle_err_cand: float | None = None   # ||cand - fp64|| / ||fp64||
    precision_class: str = ""   # fp32 | tf32 | fp16 | bf16 | below-bf16 (float32 runs; the worst trial's)
    precision_levels: dict = field(default_factory=dict)   # the reference's own error at each precision there
    variants: dict = field(default_factory=dict)   # generalisation: class -> {trials, passed, skipped, detail}
    ablation: str = ""          # compiled results replaced by noise: "output changed" | "output unchanged" | why not run
    detail: str = ""            # first failing trial's reason


@dataclass
class Timing:
    clock: str = ""             # cuda-events | perf-counter
    ref_ms: float | None = None       # median per call over all samples
    cand_ms: float | None = None
    speedup: float | None = None      # geometric mean of per-round ref/cand ratios
    ci_low: float | None = None       # 95% bootstrap CI of the speedup
    ci_high: float | None = None
    rounds: int = 0
    samples: int = 0
    ref_rounds_ms: list = field(default_factory=list)    # per-round medians, for later statistics
    cand_rounds_ms: list = field(default_factory=list)
    stop_reason: str = ""       # ci-target | budget | max-rounds
    outlier_rounds: int = 0     # rounds left out of the speedup, far from the median (stats.central)
    throttled_rounds: int = 0   # rounds taken while NVML reported power/thermal throttling
    throttled_kept: bool = False  # too few clean rounds: throttled ones kept (both sides of a round share the cap)
    ref_host_ms: float | None = None    # CUDA: a batch's wall per call (launch-bound code shows here); CPU: per call
    cand_host_ms: float | None = None   # the witness: the judge's clock from hand-over to reply, per call
    handover_ms: float | None = None    # what the witness allows per call beyond the candidate's own time
    handover_spread_ms: float | None = None   # the hand-over's noise: robust standard deviation (MAD)
    checked_calls: int = 0              # timed calls whose outputs were compared with the reference (in secret)
    batch: int = 0                      # candidate calls per witnessed hand-over (and samples per round)
    witness_batches: list = field(default_factory=list)  # per witnessed batch: [claimed ms, witness ms, calls]
    canary_ms: dict = field(default_factory=dict)   # CUDA: the clock canary per batch, "before" the import, "after"
    first_rest_ms: dict = field(default_factory=dict)  # CUDA, per timed batch and side: [first call, mean of the rest]
    #                                   (the reference's also the host's ms from its lead to the first call queued)
    batch_diag_ms: dict = field(default_factory=dict)  # CUDA, per "ping" (hand-over) and timed "cand" batch: [witness,
    #                                   claimed, freeze, probe, device span, host queued, delivered, synced] (the
    #                                   freeze and the device-idle probe are the judge's; the span and host times the
    #                                   candidate process's word: for reading the witness's excess, not judging)
    flush_ms: dict = field(default_factory=dict)  # CUDA: a flush's time "alone" [median, sd] and "allow"ed, and per
    #                                   timed batch and side the flushes after its calls [median, max, charged]
    cpu_busy_ms: dict = field(default_factory=dict)  # CPU: the CPU-time witness (judge/handle.busy_ms): its
    #                                   "handover" and "spread" from the pings, and per timed batch its ms ("batches")
    retimed_batches: int = 0            # CUDA: candidate batches timed again after a price over judge/sides.RETIME_MS
    witness_retried: bool = False       # the witness was not satisfied by a first timing; these are the second's
    note: str = ""              # why this job has no speed (INTERPRETED): left out of speedups and the gate


@dataclass
class Result:
    problem: str                # level/stem, e.g. level2/56_Matmul_Sigmoid_Sum
    candidate: str              # candidate name (file stem)
    candidate_path: str
    device: str
    dtype: str
    status: str = CRASH
    phase: str = "start"        # last phase reached: start|build|load|correctness|timing|done
    message: str = ""           # one line: why the job failed, or empty
    build: BuildInfo = field(default_factory=BuildInfo)
    correctness: Correctness = field(default_factory=Correctness)
    timing: Timing = field(default_factory=Timing)
    flags: list = field(default_factory=list)            # [Flag]
    custom_share: float | None = None   # share of a call's time in the candidate's own code (GPU kernels; CPU: outside aten)
    custom_share_top: str = ""          # the largest entries of that profile
    roofline: dict = field(default_factory=dict)   # flops, bytes, floor_ms, bound, sol (floor / candidate time)
    baselines: dict = field(default_factory=dict)  # "compile": {compile_s, ref_ms, cand_ms, speedup, ci_low, ci_high};
    #                                "precision": the same against the reference at the candidate's precision class
    env: dict = field(default_factory=dict)              # gpu, torch, cuda versions, sandbox
    seeds: dict = field(default_factory=dict)            # source (secret | config), init, trials, timing: replay
    phases: dict = field(default_factory=dict)           # seconds per phase: start_s, load_s, correctness_s, ...
    stderr_tail: str = ""
    wall_s: float = 0.0
    run_id: str = ""
    finished_at: float = 0.0

    @property
    def correct(self) -> bool:
        return self.status == OK

    @property
    def speed(self) -> bool:
        """A job whose times may be a speed (not an interpreted one): what speedup summaries count."""
        return not self.timing.note

    @property
    def job_id(self) -> str:
        return f"{self.problem}::{self.candidate}"

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)

    def to_json(self) -> str:
        return json.dumps(self.to_dict())

    @classmethod
    def from_dict(cls, d: dict) -> "Result":
        d = dict(d)
        d["build"] = BuildInfo(**d.get("build", {}))
        d["correctness"] = Correctness(**d.get("correctness", {}))
        d["timing"] = Timing(**d.get("timing", {}))
        d["flags"] = [Flag(**f) for f in d.get("flags", [])]
        return cls(**d)


def new_run_id() -> str:
    return time.strftime("%Y%m%d-%H%M%S") + f"-{int(time.time() * 1000) % 1000:03d}"


WITHHELD = "until the run ends: later candidates of this problem are judged with them"


class RunStore:
    """runs/<run-id>/: results.jsonl (appended per job), config.json, jobs/ (each job's logs).

    The parent is the only writer, and it keeps what it wrote: `verify()` puts the files back if anything
    else changed them (a build process runs candidate code with write access to the file system).

    Secret seeds are written only when the run's processes are gone (`reveal()`): a problem's judge draws
    them once and serves every candidate of the problem with them, and the run folder is readable by those
    candidates, so a record holding them mid-run would let the next candidate rebuild its trial and variant
    inputs with their answers (exploit sibling_seeds). A run killed with SIGKILL keeps its records without
    them (the numbers stay; only the replay of those jobs is lost)."""

    def __init__(self, root: Path, run_id: str | None = None):
        self.run_id = run_id or new_run_id()
        self.dir = Path(root) / self.run_id
        self.jobs = self.dir / "jobs"
        try:
            self.jobs.mkdir(parents=True, exist_ok=True)
        except OSError as e:
            raise InputError(f"{root}: cannot create the runs folder there ({e.strerror or e}); pass --out with a "
                             "writable directory (or set paths.runs)") from None
        self.results_file = self.dir / "results.jsonl"
        self._results = self.results_file.read_text() if self.results_file.is_file() else ""
        if self._results and not self._results.endswith("\n"):     # resuming after a torn write: drop it
            self._results = self._results[: self._results.rfind("\n") + 1]
            self.results_file.write_text(self._results)
        self._config: str | None = None
        self.restored = 0          # times the files had to be put back
        self._withheld: list[tuple[str, str]] = []     # (line written, line with the seeds) until reveal()

    def write_config(self, config: dict) -> None:
        self._config = json.dumps(config, indent=2)
        (self.dir / "config.json").write_text(self._config)

    def append(self, result: Result) -> None:
        result.run_id = self.run_id
        line = result.to_json() + "\n"
        if result.seeds.get("source") == "secret":
            full, d = line, result.to_dict()
            d["seeds"] = {"source": "secret", "withheld": WITHHELD}
            line = json.dumps(d) + "\n"
            self._withheld.append((line, full))
        self.verify()
        try:
            with open(self.results_file, "a") as f:
                f.write(line)
                f.flush()
        except OSError as e:        # a full disk, a file-size limit: keep every complete record, say so, stop
            try:
                os.truncate(self.results_file, len(self._results.encode()))
            except OSError:
                pass
            n = self._results.count("\n")
            raise InputError(f"{self.results_file}: cannot write this job's record ({e.strerror or e}); the {n} "
                             f"earlier record(s) are intact; free space (or pass --out elsewhere) and rerun with "
                             f"--resume {self.dir}") from None
        self._results += line

    def reveal(self) -> None:
        """Put the withheld seeds into their records (one atomic rewrite): once no process of the run is left."""
        if not self._withheld:
            return
        self.verify()
        text = self._results
        for line, full in self._withheld:
            text = text.replace(line, full, 1)
        tmp = self.results_file.with_name(self.results_file.name + ".reveal")
        tmp.write_text(text)
        tmp.replace(self.results_file)
        self._results, self._withheld = text, []

    def verify(self) -> bool:
        """True if the files hold exactly what this store wrote; else rewrite them and count it."""
        ok = True
        for path, text in ((self.results_file, self._results), (self.dir / "config.json", self._config)):
            if text is None:
                continue
            try:
                same = path.read_text() == text
            except OSError:
                same = text == ""           # nothing recorded yet, nothing there
            if not same:
                ok = False
                tmp = path.with_name(path.name + ".restore")
                tmp.write_text(text)
                tmp.replace(path)
        self.restored += not ok
        return ok

    def load(self) -> list[Result]:
        return load_results(self.results_file)


def resolve_run(spec: str | Path, runs_root: str | Path) -> Path:
    """A run id under runs_root, a run directory or a results.jsonl -> the results file."""
    for p in (Path(spec), Path(runs_root) / str(spec)):
        if p.is_file():
            return p
        if p.is_dir():
            if (p / "results.jsonl").is_file():
                return p / "results.jsonl"
            raise InputError(f"{p}: run directory without a results.jsonl (did the run record any job?)")
    known = sorted(d.name for d in Path(runs_root).glob("*") if (d / "results.jsonl").is_file())
    close = difflib.get_close_matches(str(spec), known, n=3, cutoff=0.5)
    hint = f"; did you mean {', '.join(close)}?" if close else (f"; latest: {known[-1]}" if known else "")
    raise InputError(f"unknown run {str(spec)!r}: not a run id under {runs_root}/, a run directory or a "
                     f"results.jsonl{hint}")


TORN: list[str] = []      # files whose torn last line load_results skipped (the CLI warns once per file)


def load_results(path: Path) -> list[Result]:
    """Every record of a results file. A last line cut short (what a kill during a write leaves) is skipped
    and noted in TORN; any other unreadable line is an error naming its number."""
    path = Path(path)
    if path.is_dir():
        path = path / "results.jsonl"
    if not path.is_file():
        raise InputError(f"{path}: no results file; pass a run directory or a results.jsonl")
    lines = path.read_text(errors="replace").splitlines()
    last = max((i for i, line in enumerate(lines) if line.strip()), default=-1)
    results = []
    for i, line in enumerate(lines):
        if not line.strip():
            continue
        try:
            results.append(Result.from_dict(json.loads(line)))
        except (ValueError, TypeError, KeyError, AttributeError) as e:
            if i == last and not path.read_bytes().endswith(b"\n"):
                TORN.append(f"{path}: skipped line {i + 1}, cut short by an interrupted write")
                continue
            raise InputError(f"{path}:{i + 1}: not a kbench result record ({type(e).__name__}: {e}); "
                             "the file is damaged or not a kbench results file") from None
    return results
