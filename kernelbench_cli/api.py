"""Python API for reward loops and notebooks: judge candidate source text (or files) without the CLI.

    from kernelbench_cli import evaluate, evaluate_many
    r = evaluate("level1/6_GELU", source_text)          # -> Result (status, correctness, timing, flags...)
    rs = evaluate_many([(problem, src), ...], workers=2)  # one Result per item, in order

Everything runs exactly as under `kbench bench`: each candidate is written to a file inside a run folder
(paths.runs/<run-id>/candidates/), built once, and judged in its own isolated worker process; results are
appended to that run's results.jsonl. Nothing here imports the candidate or torch's CUDA state.
"""
from __future__ import annotations

import copy
import os
from pathlib import Path

from rich.console import Console

from .catalog import Catalog, read_candidate
from .config import Config, config_from_dict, load_config
from .errors import InputError
from .orchestrate import Job, execute
from .results import Result, RunStore


def _config(config) -> Config:
    """None (defaults), a YAML path, a Config, or a dict shaped like the YAML."""
    if config is None:
        return load_config(None)
    if isinstance(config, Config):
        return copy.deepcopy(config)
    if isinstance(config, dict):
        return config_from_dict(config, "config dict")
    return load_config(config)


def _is_path(source) -> bool:
    if isinstance(source, os.PathLike):
        return True
    return isinstance(source, str) and "\n" not in source and source.strip().endswith(".py")


def _candidate_file(source, folder: Path, index: int) -> Path:
    """A path is used where it is (it may load files next to it); source text gets a file in the run."""
    if _is_path(source):
        path = Path(source)
        if not path.is_file():
            raise InputError(f"{path}: candidate file not found")
        return path
    path = folder / f"candidate_{index}.py"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(source)
    return path


def evaluate_many(items, config=None, executor: str = "local", workers: int = 1, device: str = "auto",
                  console: Console | None = None) -> list[Result]:
    """Judge [(problem, candidate), ...]; one Result per item, in the same order.

    problem: a path or a name as on the command line (level1/6, 56_Matmul_Sigmoid_Sum). candidate: source
    text or a path to a .py file. executor: "local" or "ray". workers: jobs at once: CPU workers on the CPU
    backend, GPUs (the first N) on CUDA. Raises InputError for a problem that cannot be found or loaded;
    anything wrong with a candidate is its Result's status.
    """
    from .orchestrate import resolve_device
    from .scale import check
    cfg = _config(config)
    cfg.executor.kind = executor
    dev = resolve_device(cfg.device if device == "auto" else device)
    if workers > 1:
        if dev == "cuda":
            cfg.executor.gpus = str(workers)
        else:
            cfg.executor.workers = workers
    check(cfg, dev)
    catalog = Catalog(Path(cfg.paths.problems), Path(cfg.paths.kernels))
    store = RunStore(Path(cfg.paths.runs))
    store.write_config(cfg.to_dict())
    jobs = []
    for i, (problem, source) in enumerate(items):
        cand = read_candidate(_candidate_file(source, store.dir / "candidates", i))
        jobs.append(Job(catalog.resolve(str(problem)), cand))
    if not jobs:
        return []
    results = execute(jobs, cfg, dev, store, console or Console(quiet=True))
    return results


def evaluate(problem, candidate_source, config=None, device: str = "auto") -> Result:
    """Judge one candidate (source text or a path) on one problem (a path or a name); returns its Result."""
    return evaluate_many([(problem, candidate_source)], config=config, device=device)[0]
