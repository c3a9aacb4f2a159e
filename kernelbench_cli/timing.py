"""Timing: warm-up, then paired rounds of reference and candidate (A B, B A, ...), speedup with a CI.

Per sample on CUDA: overwrite a buffer twice the size of L2 (so every call starts cold, as it would in a
model where other layers ran in between), record a start event, call, record an end event. On the CPU a
monotonic clock around the call. Each round takes the median of its samples per side; the speedup is the
geometric mean of per-round ref/cand ratios, with a bootstrap CI; rounds continue until the CI is narrow
enough (cfg.ci_target) or the budget is spent. All inputs rotate among cfg.input_sets sets.
"""
from __future__ import annotations

import time

import torch

from . import stats
from .results import Timing


def refresh_contents(inputs) -> None:
    """New values, same distribution, same storage: roll each floating tensor by one step along its first
    dimension longer than 1 (batch items stay whole; integer/bool inputs such as indices and masks are left
    alone). Defeats result caches keyed by pointer or by content."""
    for t in inputs:
        if isinstance(t, torch.Tensor) and t.is_floating_point() and t.numel() > 1:
            dim = next(d for d in range(t.dim()) if t.size(d) > 1)
            t.copy_(t.roll(1, dims=dim))


class Sampler:
    def __init__(self, device: str, cfg):
        self.cuda = device == "cuda"
        self.flush = None
        if self.cuda and cfg.l2_flush:
            l2 = torch.cuda.get_device_properties(torch.cuda.current_device()).L2_cache_size
            self.flush = torch.empty(2 * max(l2, 1 << 20), dtype=torch.uint8, device="cuda")
        self.clock = "cuda-events" if self.cuda else "perf-counter"

    def sync(self):
        if self.cuda:
            torch.cuda.synchronize()

    def sample(self, fn, input_sets, n: int, offset: int = 0, refresh: bool = False) -> list[float]:
        """n timed calls, rotating input sets; returns milliseconds per call. With `refresh`, each input set
        gets new contents (untimed) before every call, so no call ever sees inputs it has seen before."""
        if self.cuda:
            events = []
            for i in range(n):
                inputs = input_sets[(offset + i) % len(input_sets)]
                if refresh:
                    refresh_contents(inputs)
                if self.flush is not None:
                    self.flush.zero_()
                start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                start.record()
                fn(*inputs)
                end.record()
                events.append((start, end))
            torch.cuda.synchronize()
            return [s.elapsed_time(e) for s, e in events]
        times = []
        for i in range(n):
            inputs = input_sets[(offset + i) % len(input_sets)]
            if refresh:
                refresh_contents(inputs)
            t0 = time.perf_counter_ns()
            fn(*inputs)
            times.append((time.perf_counter_ns() - t0) / 1e6)
        return times

    def host_times(self, fn, input_sets, n: int) -> list[float]:
        """Wall time of synchronised calls: includes launch overhead and work on any stream."""
        times = []
        for i in range(n):
            self.sync()
            t0 = time.perf_counter_ns()
            fn(*input_sets[i % len(input_sets)])
            self.sync()
            times.append((time.perf_counter_ns() - t0) / 1e6)
        return times

    def warmup(self, fn, input_sets, calls: int, ms: float) -> None:
        start, n = time.perf_counter(), 0
        while n < calls or (time.perf_counter() - start) * 1e3 < ms:
            fn(*input_sets[n % len(input_sets)])
            self.sync()
            n += 1


def usable(rounds: list, min_rounds: int) -> list:
    """Rounds to decide on: the unthrottled ones while there are at least min_rounds of them, else all.
    A heavy tensor-core kernel can run at the power cap for the whole job; both sides of a paired round
    then share the cap, so keeping those rounds is fair, and dropping them would leave no measurement."""
    clean = [rd for rd in rounds if not rd[2]]
    return clean if len(clean) >= min_rounds else rounds


def measure(ref, cand, input_sets, cfg, device: str, throttled=None) -> Timing:
    """cfg is the TimingConfig. Both callables are run under no_grad by the caller. `throttled()`, when
    given, says whether the GPU is being slowed by power or heat; such rounds are counted and dropped
    (see usable)."""
    sampler = Sampler(device, cfg)
    sampler.warmup(ref, input_sets, cfg.warmup_calls, cfg.warmup_ms)
    sampler.warmup(cand, input_sets, cfg.warmup_calls, cfg.warmup_ms)
    timing = Timing(clock=sampler.clock)
    rounds = []           # (ref samples, cand samples, throttled)
    deadline = time.perf_counter() + cfg.budget_s
    n = cfg.samples_per_round
    for r in range(cfg.max_rounds):
        sides = [("ref", ref), ("cand", cand)]
        if r % 2:
            sides.reverse()      # A B, B A: drift within a round hits both sides equally
        got = {name: sampler.sample(fn, input_sets, n, offset=r * n, refresh=cfg.refresh_inputs)
               for name, fn in sides}
        rounds.append((got["ref"], got["cand"], throttled is not None and throttled()))
        ratios = [stats.median(a) / max(stats.median(b), 1e-9) for a, b, _ in usable(rounds, cfg.min_rounds)]
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
    ratios = [a / max(b, 1e-9) for a, b in zip(timing.ref_rounds_ms, timing.cand_rounds_ms)]
    timing.rounds = len(kept)
    timing.samples = sum(len(a) + len(b) for a, b, _ in kept)
    timing.ref_ms = stats.median([x for a, _, _ in kept for x in a])
    timing.cand_ms = stats.median([x for _, b, _ in kept for x in b])
    timing.speedup = stats.geomean(ratios)
    timing.ci_low, timing.ci_high = stats.bootstrap_geomean_ci(ratios, cfg.bootstrap)
    host_n = max(3, min(2 * n, 10))
    timing.ref_host_ms = stats.median(sampler.host_times(ref, input_sets, host_n))
    timing.cand_host_ms = stats.median(sampler.host_times(cand, input_sets, host_n))
    return timing
