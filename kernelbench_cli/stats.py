"""Small statistics for timing: medians, geometric means, bootstrap CIs, fast_p.

Speedups are ratios, so they are averaged on the log scale (geometric mean); a CI is a percentile
bootstrap of that mean over rounds (Efron & Tibshirani 1993, ch. 13), resampling rounds, not samples,
because samples within a round share the GPU's momentary state.
"""
from __future__ import annotations

import math
import statistics

import torch


def median(xs) -> float:
    return float(statistics.median(xs))


def geomean(xs) -> float:
    xs = list(xs)
    if not xs or any(x <= 0 for x in xs):
        raise ValueError("geomean needs positive values")
    return math.exp(sum(math.log(x) for x in xs) / len(xs))


def bootstrap_geomean_ci(ratios, resamples: int = 2000, level: float = 0.95, seed: int = 0) -> tuple[float, float]:
    """Percentile bootstrap CI of the geometric mean of `ratios`."""
    logs = torch.tensor([math.log(r) for r in ratios], dtype=torch.float64)
    n = len(logs)
    if n < 2:
        return (math.exp(logs[0]),) * 2 if n else (math.nan, math.nan)
    g = torch.Generator().manual_seed(seed)
    means = logs[torch.randint(0, n, (resamples, n), generator=g)].mean(dim=1)
    lo, hi = torch.quantile(means, torch.tensor([(1 - level) / 2, (1 + level) / 2], dtype=torch.float64))
    return math.exp(lo), math.exp(hi)


def fast_p(speedups, p: float) -> float:
    """KernelBench's fast_p: share of ALL jobs that are correct and faster than p x the reference.

    `speedups` has one entry per job: the speedup if the job was correct, None otherwise.
    """
    speedups = list(speedups)
    if not speedups:
        return 0.0
    return sum(1 for s in speedups if s is not None and s > p) / len(speedups)
