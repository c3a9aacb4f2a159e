"""Small statistics for timing: medians, geometric means, bootstrap CIs, fast_p.

Speedups are ratios, so they are averaged on the log scale (geometric mean); a CI is a percentile
bootstrap of that mean over rounds (Efron & Tibshirani 1993, ch. 13), resampling rounds, not samples,
because samples within a round share the GPU's momentary state. Pure Python (a few thousand resamples of
at most a few hundred rounds take milliseconds), so the parent imports no torch to report or compare.
"""
from __future__ import annotations

import math
import random
import statistics


def _quantile(sorted_xs: list[float], q: float) -> float:
    """Linear interpolation between order statistics (numpy's and torch's default)."""
    pos = q * (len(sorted_xs) - 1)
    lo = int(math.floor(pos))
    hi = min(lo + 1, len(sorted_xs) - 1)
    return sorted_xs[lo] + (sorted_xs[hi] - sorted_xs[lo]) * (pos - lo)


def _resampled_means(logs: list[float], resamples: int, rng: random.Random) -> list[float]:
    n = len(logs)
    return [sum(rng.choices(logs, k=n)) / n for _ in range(resamples)]


def median(xs) -> float:
    return float(statistics.median(xs))


def mad_sd(xs) -> float:
    """The median absolute deviation, scaled to a normal distribution's standard deviation."""
    m = median(xs)
    return 1.4826 * median([abs(x - m) for x in xs])


def geomean(xs) -> float:
    xs = list(xs)
    if not xs or any(x <= 0 for x in xs):
        raise ValueError("geomean needs positive values")
    return math.exp(sum(math.log(x) for x in xs) / len(xs))


def central(ratios: list, k: float = 4.0, floor: float = 0.01) -> list:
    """The rounds a speedup is taken over: those whose log ratio lies within k robust standard deviations (MAD,
    at least `floor`, i.e. ~1%) of the median's, where more than half do; else all. A stretch of seconds in which
    the host is late prices a run of honest batches (timing.py); a lie confined to a few rounds is priced there
    too, and dropped here as well: it moves the median no more than an honest outlier does."""
    if len(ratios) < 3:
        return list(ratios)
    logs = [math.log(r) for r in ratios]
    mid = median(logs)
    band = k * max(mad_sd(logs), floor)
    kept = [r for r, x in zip(ratios, logs) if abs(x - mid) <= band]
    return kept if 2 * len(kept) > len(ratios) else list(ratios)


def bootstrap_geomean_ci(ratios, resamples: int = 2000, level: float = 0.95, seed: int = 0) -> tuple[float, float]:
    """Percentile bootstrap CI of the geometric mean of `ratios`."""
    logs = [math.log(r) for r in ratios]
    n = len(logs)
    if n < 2:
        return (math.exp(logs[0]),) * 2 if n else (math.nan, math.nan)
    means = sorted(_resampled_means(logs, resamples, random.Random(seed)))
    return math.exp(_quantile(means, (1 - level) / 2)), math.exp(_quantile(means, (1 + level) / 2))


def fast_p(speedups, p: float) -> float:
    """KernelBench's fast_p: share of ALL jobs that are correct and faster than p x the reference.

    `speedups` has one entry per job: the speedup if the job was correct, None otherwise.
    """
    speedups = list(speedups)
    if not speedups:
        return 0.0
    return sum(1 for s in speedups if s is not None and s > p) / len(speedups)


def bootstrap_ratio_ci(new_ratios, base_ratios, resamples: int = 2000, level: float = 0.95,
                       seed: int = 0) -> tuple[float, float]:
    """Percentile bootstrap CI of geomean(new_ratios) / geomean(base_ratios).

    Parameters: `new_ratios` and `base_ratios` are the per-round speedups (ref/cand, one per timing round)
    of two independent runs of the same job; `resamples` bootstrap draws; `level` the confidence level;
    `seed` makes the CI reproducible.

    Method: the two runs are independent samples, so each draw resamples each run's rounds on its own
    (with replacement, keeping its own round count), takes the mean of the logs of each resample, and
    records the difference of the two means (the log of the ratio of geometric means). The CI is the
    (1 - level)/2 and (1 + level)/2 quantiles of those differences, exponentiated. A run with a single
    round contributes no spread (its one value is used in every draw). Returns (nan, nan) if either
    list is empty.
    """
    new_logs = [math.log(r) for r in new_ratios]
    base_logs = [math.log(r) for r in base_ratios]
    if not new_logs or not base_logs:
        return math.nan, math.nan
    rng = random.Random(seed)
    diffs = sorted(a - b for a, b in zip(_resampled_means(new_logs, resamples, rng),
                                         _resampled_means(base_logs, resamples, rng)))
    return math.exp(_quantile(diffs, (1 - level) / 2)), math.exp(_quantile(diffs, (1 + level) / 2))
