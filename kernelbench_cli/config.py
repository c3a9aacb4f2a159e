"""Run configuration: dataclasses with defaults, YAML loading and validation.

Every key the YAML may hold is a dataclass field below; an unknown key, a wrong type or a value outside
`choices` raises InputError naming the file, the key and what is allowed.
"""
from __future__ import annotations

import dataclasses
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Optional, Union, get_args, get_origin, get_type_hints

import yaml

from .errors import InputError


GENERALISE_CLASSES = ("values", "special", "edge", "layout", "shapes")   # judge/generalise.py
GENERALISE_POLICIES = ("error", "warning", "off")


def _choice(default, *choices):
    return field(default=default, metadata={"choices": choices})


@dataclass
class TimingConfig:
    warmup_calls: int = 3          # at least this many untimed calls first (lazy init, autotuning, caches)
    warmup_ms: float = 25.0        # ...and at least this long, so clocks ramp up before sampling
    samples_per_round: int = 5     # samples per side per round; a round's value is their median
    batch_ms: float = 8.0          # reference work per witnessed hand-over of candidate calls (more: finer witness)
    min_rounds: int = 6            # never decide on fewer rounds than this
    max_rounds: int = 60
    ci_target: float = 0.005       # stop once the 95% CI half-width of the speedup is under this (relative)
    budget_s: float = 20.0         # per job timing budget; stop when spent even if the CI is wider
    l2_flush: bool = True          # overwrite a buffer of 2x the L2 before each sample (cold-cache timing)
    input_sets: int = 3            # timing pool: every timed call gets one, its elements permuted afresh (sides.py)
    bootstrap: int = 2000          # bootstrap resamples for the CI
    profile: bool = True           # profile one call: the share of time in the candidate's own code (library-heavy)
    cpu_threads: int = 0           # CPU: intra-op threads of the reference and of the candidate (0 = torch's default)


@dataclass
class BuildConfig:
    jobs: int = 0                  # parallel build processes; 0 = auto (cores, at most 8)
    arch: str = "auto"             # TORCH_CUDA_ARCH_LIST for CUDA builds, e.g. "9.0"; auto = the local GPU's
    cache_dir: str = "~/.cache/kbench/builds"
    verbose: bool = False          # echo compiler output even on success


@dataclass
class Timeouts:
    build_s: float = 900.0         # one candidate's import + compile
    run_s: float = 600.0           # one job's correctness + timing (after a cached build)


@dataclass
class Paths:
    problems: str = "problems"
    kernels: str = "kernels"
    runs: str = "runs"
    ceilings: str = "~/.cache/kbench/ceilings"   # device ceilings measured by `kbench calibrate`
    baselines: str = "results/baselines"   # baseline files for `kbench compare` / `bench --baseline auto`


@dataclass
class CompareConfig:
    tau: float = 0.05              # regression threshold: fail only when the whole CI of new/base < 1 - tau
    rerun_rounds_factor: int = 3   # inconclusive jobs are rerun once with min/max rounds and budget times this
    between_sd_cpu: float = 0.05   # run-to-run sd of a job's log speedup the CI of one run does not hold (CPU)
    between_sd_cuda: float = 0.05   # the same on a GPU (H200, 2026-12-02: 0.012-0.096 per job); a baseline saved
                                    # from 3+ runs measures its own per job


@dataclass
class ExecutorConfig:
    kind: str = _choice("local", "local", "ray")   # local: this host; ray: a Ray cluster (pip install 'kbench[ray]')
    gpus: str = ""                 # local, CUDA: "" = one GPU; "all", a count ("2") or indices ("0,2"): a slot per GPU
    workers: int = 1               # local, CPU backend: jobs run at once
    ray_address: str = ""          # ray: cluster address ("auto", "ray://host:10001"); "" = a local instance


@dataclass
class Config:
    device: str = _choice("auto", "auto", "cuda", "cpu")
    dtype: str = _choice("float32", "float32", "float16", "bfloat16")
    trials: int = 5
    seed: Optional[int] = None    # None: secret seeds drawn per run (recorded in each result); a number replays
    # atol and rtol per dtype; a problem's TOLERANCE constant overrides these
    tolerances: dict = field(default_factory=lambda: {"float32": 1e-4, "float16": 1e-2, "bfloat16": 1e-2})
    baselines: list = field(default_factory=lambda: ["eager"], metadata={"items": ("eager", "compile")})
    #                                what the candidate is timed against: eager always; compile = torch.compile
    #                                of the reference (its compile time is excluded and reported)
    precision_factor: float = 4.0  # a candidate within this many times the reference's fp64-oracle error
    #                                is fp32 class whatever the reduced-precision costs (correctness.py); 0 = off
    precision_allowed: str = _choice("fp32", "fp32", "tf32", "fp16", "bf16")   # the lowest precision class that
    #                                is not a `precision` error; a problem's PRECISION_ALLOWED overrides
    custom_share: float = 0.5      # below this share of the time in the candidate's own code: library-heavy
    #                                (an error); a problem's CUSTOM_SHARE overrides (0 = library calls allowed)
    generalise: dict = field(default_factory=lambda: {"values": "error", "special": "error", "edge": "error",
                                                      "layout": "warning", "shapes": "warning"})
    #                                per class of generalisation trial: error | warning (specialised) | off
    timing: TimingConfig = field(default_factory=TimingConfig)
    build: BuildConfig = field(default_factory=BuildConfig)
    timeouts: Timeouts = field(default_factory=Timeouts)
    paths: Paths = field(default_factory=Paths)
    compare: CompareConfig = field(default_factory=CompareConfig)
    executor: ExecutorConfig = field(default_factory=ExecutorConfig)

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)


def _check_value(where: str, key: str, value: Any, typ: Any, f: dataclasses.Field) -> Any:
    if get_origin(typ) is Union:          # Optional[X]: None, or a valid X
        if value is None:
            return None
        typ = next(a for a in get_args(typ) if a is not type(None))
    choices = f.metadata.get("choices")
    if choices and value not in choices:
        raise InputError(f"{where}: {key}: {value!r} is not allowed; use one of {', '.join(map(str, choices))}")
    if typ is float and isinstance(value, int) and not isinstance(value, bool):
        value = float(value)
    if typ is str and isinstance(value, (int, float)) and not isinstance(value, bool):
        value = str(value)         # YAML reads build.arch 9.0 / executor.gpus 2 as numbers
    if typ is list:
        items = f.metadata.get("items", ())
        if not isinstance(value, list) or any(v not in items for v in value):
            raise InputError(f"{where}: {key}: {value!r} is not allowed; use a list of {', '.join(items)}")
        return value
    if typ is dict:
        if not isinstance(value, dict):
            raise InputError(f"{where}: {key}: expected a mapping, got {value!r}")
        return value
    if typ in (int, float, str, bool):
        if not isinstance(value, typ) or (typ is int and isinstance(value, bool)):
            raise InputError(f"{where}: {key}: expected {typ.__name__}, got {value!r}")
        if typ in (int, float) and value < 0:
            raise InputError(f"{where}: {key}: must be >= 0, got {value!r}")
    return value


def _apply(obj: Any, data: dict, where: str, prefix: str = "") -> None:
    """Set fields of dataclass `obj` from mapping `data`, recursing into nested dataclasses."""
    if not isinstance(data, dict):
        raise InputError(f"{where}: {prefix.rstrip('.') or 'top level'}: expected a mapping, got {data!r}")
    fields = {f.name: f for f in dataclasses.fields(obj)}
    hints = get_type_hints(type(obj))
    for key, value in data.items():
        name = f"{prefix}{key}"
        if key not in fields:
            raise InputError(f"{where}: unknown key '{name}'; allowed keys here: {', '.join(fields)}")
        current = getattr(obj, key)
        if dataclasses.is_dataclass(current):
            _apply(current, value, where, name + ".")
        elif isinstance(current, dict) and isinstance(value, dict):     # a mapping's keys are set one by one
            setattr(obj, key, {**current, **_check_value(where, name, value, hints[key], fields[key])})
        else:
            setattr(obj, key, _check_value(where, name, value, hints[key], fields[key]))


def _validate(cfg: Config, where: str) -> None:
    for dtype, tol in cfg.tolerances.items():
        if dtype not in ("float32", "float16", "bfloat16", "float64"):
            raise InputError(f"{where}: tolerances.{dtype}: unknown dtype; use float32, float16 or bfloat16")
        if not isinstance(tol, (int, float)) or tol <= 0:
            raise InputError(f"{where}: tolerances.{dtype}: expected a positive number, got {tol!r}")
    cfg.generalise = {k: "off" if v is False else v for k, v in cfg.generalise.items()}   # YAML reads off as false
    for cls, policy in cfg.generalise.items():
        if cls not in GENERALISE_CLASSES or policy not in GENERALISE_POLICIES:
            raise InputError(f"{where}: generalise.{cls}: {policy!r}; classes are {', '.join(GENERALISE_CLASSES)}, "
                             f"each one of {', '.join(GENERALISE_POLICIES)}")
    if "eager" not in cfg.baselines:
        raise InputError(f"{where}: baselines: must include eager (speedups are always reported against it)")
    if cfg.trials < 1:
        raise InputError(f"{where}: trials: must be >= 1, got {cfg.trials}")
    t = cfg.timing
    if t.samples_per_round < 1 or t.min_rounds < 2 or t.max_rounds < t.min_rounds or t.input_sets < 1 \
            or t.cpu_threads < 0 or not 0 < t.batch_ms <= 1000:
        raise InputError(f"{where}: timing: need samples_per_round >= 1, 2 <= min_rounds <= max_rounds, "
                         "input_sets >= 1, cpu_threads >= 0, 0 < batch_ms <= 1000")
    if not 0 < cfg.compare.tau < 1 or cfg.compare.rerun_rounds_factor < 1 or \
            not 0 <= cfg.compare.between_sd_cpu < 1 or not 0 <= cfg.compare.between_sd_cuda < 1:
        raise InputError(f"{where}: compare: need 0 < tau < 1, rerun_rounds_factor >= 1 and 0 <= between_sd_* < 1")
    if not 0 <= cfg.custom_share <= 1:
        raise InputError(f"{where}: custom_share: must be between 0 and 1, got {cfg.custom_share}")
    if cfg.executor.workers < 1:
        raise InputError(f"{where}: executor.workers: must be >= 1, got {cfg.executor.workers}")


def _parse_override(item: str) -> tuple[list[str], Any]:
    if "=" not in item:
        raise InputError(f"--set {item!r}: expected KEY=VALUE, e.g. --set timing.budget_s=5")
    key, raw = item.split("=", 1)
    return key.strip().split("."), yaml.safe_load(raw)


def _nest(items) -> dict:
    """[(["timing", "budget_s"], 5), ...] -> {"timing": {"budget_s": 5}}"""
    nested: dict = {}
    for keys, value in items:
        d = nested
        for k in keys[:-1]:
            d = d.setdefault(k, {})
        d[keys[-1]] = value
    return nested


def load_config(path: str | os.PathLike | None = None, overrides: dict | None = None,
                sets: list[str] = ()) -> Config:
    """Defaults <- YAML file <- `--set key=value` items <- explicit CLI flags (`overrides`, dotted keys)."""
    cfg = Config()
    if path is not None:
        p = Path(path)
        if not p.is_file():
            raise InputError(f"{p}: config file not found; pass an existing YAML file, e.g. configs/default.yaml")
        try:
            data = yaml.safe_load(p.read_text()) or {}
        except yaml.YAMLError as e:
            mark = getattr(e, "problem_mark", None)
            line = f" line {mark.line + 1}" if mark else ""
            raise InputError(f"{p}:{line} invalid YAML ({getattr(e, 'problem', e)})") from None
        _apply(cfg, data, str(p))
    _apply(cfg, _nest(_parse_override(item) for item in sets), "--set")
    flags = ((k.split("."), v) for k, v in (overrides or {}).items() if v is not None)
    _apply(cfg, _nest(flags), "command line")
    _validate(cfg, str(path) if path else "config")
    return cfg


def config_from_dict(data: dict, where: str = "job spec") -> Config:
    """Rebuild a Config from Config.to_dict() output (the worker's side of the spec)."""
    cfg = Config()
    _apply(cfg, data, where)
    return cfg
