"""Timing: warm-up, then paired rounds of reference and candidate (A B, B A, ...), speedup with a CI.

A *side* is anything with `warmup(calls, ms)` and `sample(n) -> [ms per call]`: the reference runs in the
judge's own process (judge/sides.py LocalSide), the candidate in its frozen-between-calls process
(RemoteSide, which also keeps the witness times). Each round takes the median of its samples per side;
the speedup is the geometric mean of per-round ref/cand ratios, with a bootstrap CI, over the rounds near their
median (stats.central); rounds continue until the CI is narrow enough (cfg.ci_target) or the budget is spent.
"""
from __future__ import annotations

import time

from . import stats, trace
from .results import Timing

# What a speedup means, per device; bumped when kbench changes how it measures so that speedups move. Every
# result records it (environment.py), and the gate compares no baseline of another protocol with a run
# (gate/baseline.py): the move is kbench's, not the kernel's. cuda 2 (session 18): the reference timed in
# batches as the candidate is (protocol 1 timed each reference call alone and counted its first launch). Not
# bumped for session 19's lead spin (sides.LEAD_SPIN): it takes one first call's host dispatch (<= 0.09 ms on
# the H200) out of a reference batch of >= timing.batch_ms (8 ms), a move of ~1% that compare.tau absorbs. Nor
# for session 26's: the reference's full-device hold takes ~0.11 ms of one call out of such a batch (speedups
# down by as much, ~1.4% at most on the H200), and the CUDA hand-over pings in the timed rhythm stop the witness
# pricing honest batches (speedups of short calls up, by what the price took). cpu 2 (session 27): each intra-op
# thread of both processes on a core of its own (cpus.py) and the reference's batch counted by its mean, as the
# candidate's is: on the 2-core box the CPU A/A went from 0.44-0.70 to 0.94-1.08, so CPU speedups rose by up to 2x.
# cuda 3, cpu 3 (session 32): the speedup over the rounds near the median (stats.central). On the H100 a late host
# for seconds priced 12 of Transpose tiled64's 39 rounds (2.34 against 2.48 in two other processes: repeatability
# 5.8%); over the central rounds 2.474, 2.486, 2.479. In session 31's records honest speedups moved up to 10-50%
# where a few rounds were priced (GELU vec4 0.90 -> 1.00), and the A/A runs not at all.
PROTOCOL = {"cuda": 3, "cpu": 3}


def usable(rounds: list, min_rounds: int) -> list:
    """Rounds to decide on: the unthrottled ones while there are at least min_rounds of them, else all.
    A heavy tensor-core kernel can run at the power cap for the whole job; both sides of a paired round
    then share the cap, so keeping those rounds is fair, and dropping them would leave no measurement."""
    clean = [rd for rd in rounds if not rd[2]]
    return clean if len(clean) >= min_rounds else rounds


def measure(ref, cand, cfg, throttled=None, clock: str = "") -> Timing:
    """cfg is the TimingConfig. `throttled()`, when given, says whether the GPU is being slowed by power or
    heat; such rounds are counted and dropped (see usable)."""
    ref.warmup(cfg.warmup_calls, cfg.warmup_ms)
    trace.mark("judge", "reference warm-up done")
    cand.warmup(cfg.warmup_calls, cfg.warmup_ms)
    trace.mark("judge", "candidate warm-up done")
    timing = Timing(clock=clock)
    rounds = []           # (ref samples, cand samples, throttled)
    deadline = time.perf_counter() + cfg.budget_s
    n = cfg.samples_per_round
    for r in range(cfg.max_rounds):
        sides = [("ref", ref), ("cand", cand)]
        if r % 2:
            sides.reverse()      # A B, B A: drift within a round hits both sides equally
        got = {name: side.sample(n) for name, side in sides}
        rounds.append((got["ref"], got["cand"], throttled is not None and throttled()))
        trace.mark("judge", f"round {r}")
        ratios = stats.central([stats.median(a) / max(stats.median(b), 1e-9)
                                for a, b, _ in usable(rounds, cfg.min_rounds)])
        if len(ratios) >= cfg.min_rounds:
            lo, hi = stats.bootstrap_geomean_ci(ratios, cfg.bootstrap)
            if (hi - lo) / 2 / stats.geomean(ratios) <= cfg.ci_target:
                timing.stop_reason = "ci-target"
                break
            if time.perf_counter() > deadline:
                timing.stop_reason = "budget"
                break
    else:
        timing.stop_reason = "max-rounds"
    kept = usable(rounds, cfg.min_rounds)
    timing.throttled_rounds = sum(rd[2] for rd in rounds)
    timing.throttled_kept = any(rd[2] for rd in kept)
    timing.ref_rounds_ms = [stats.median(a) for a, _, _ in kept]
    timing.cand_rounds_ms = [stats.median(b) for _, b, _ in kept]
    every = [a / max(b, 1e-9) for a, b in zip(timing.ref_rounds_ms, timing.cand_rounds_ms)]
    ratios = stats.central(every)
    timing.outlier_rounds = len(every) - len(ratios)
    timing.rounds = len(kept)
    timing.samples = sum(len(a) + len(b) for a, b, _ in kept)
    timing.ref_ms = stats.median([x for a, _, _ in kept for x in a])
    timing.cand_ms = stats.median([x for _, b, _ in kept for x in b])
    timing.speedup = stats.geomean(ratios)
    timing.ci_low, timing.ci_high = stats.bootstrap_geomean_ci(ratios, cfg.bootstrap)
    return timing
