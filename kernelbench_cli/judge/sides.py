"""The two timed sides as the reference process sees them, and what both share: fresh inputs for every
timed call, the L2 flush, and (CUDA) the probe that tells whether the device is idle.

Fresh inputs: a pool of input sets drawn from a secret seed; every timed call gets one of them, chosen
at random, with each floating tensor's elements permuted by a fresh secret affine map (InputFeed). No call
sees contents it has seen before, and nothing in the harness's rule lets a candidate predict the next ones
or reuse work done on earlier ones.
"""
from __future__ import annotations

import math
import random
import time

import torch

from .. import stats
from ..integrity import witnessed_per_call
from . import evidence
from .flush import Flush, mark
from ..channel import CANARY_SIZES, MAX_FDS
from ..correctness import clone, maybe_flag, synchronize, tensors

SPOT_CHECK_P = 0.1      # besides one secret call per round, each other timed call is checked with this chance
PROBE_CALLS = 20        # device-idle probe baseline: median of this many
# busy: a probe this much slower than its idle latency after a context switch (on the H200 an honest softmax
# saw 5 of 24 probes 0.13 ms over a 0.2 ms idle, session 15: a switch's cost varies by that much)...
PROBE_BUSY_MARGIN_MS = 0.25
PROBE_BUSY_NOISE = 4.0       # ...and than this many robust standard deviations of it
PROBE_SETTLE = 4             # after a busy probe, up to this many more until one finds the device idle
# RETIME_MS: a CUDA batch priced by more than this is timed again, once (RemoteSide.sample), where the judge's own
# freeze of it took over LATE_FREEZE times its pings' median and LATE_FREEZE_MS over it: its host was late. On a lent
# H100 (session 31, the bundled suite) 17 of ~250 honest batches ran 1-15 ms over the hand-over, most of them with
# the freeze and the probe 4-5x their usual (0.85-0.89 ms); one such priced round moved an honest speedup by 8-10%
# (Transpose tiled64 2.25 with rounds of 2.44; three processes read 2.43, 2.33, 2.46). The judge's evidence, not the
# price alone: a candidate that could spoil a batch at will (an untimed wall over the price) would otherwise get to
# keep the better of two draws of a racy lie (one that can also slow its own stopping, which the freeze waits for,
# still can: one second draw a batch at most). Every batch stays in the witness's evidence either way.
RETIME_MS, LATE_FREEZE, LATE_FREEZE_MS = 1.0, 3.0, 0.3

# LEAD_SPIN: every timed CUDA reference batch starts with an untimed spin of this many cycles (~0.26 ms on
# the H200), so the host has queued the first call before the device reaches its start event, as it has every
# later call. Without it the reference batch, issued on an idle device in the judge's own context, held the host's
# dispatch of its first call (0.06-0.09 ms, scripts/probe_aa.py: first call 0.79 ms, the others 0.69), while the
# candidate's is hidden by the context switch to its process: A/A read 1.02-1.04x on memory-bound problems
# (session 19). Since session 26 both sides start a batch with kbench's full-device hold instead (l2flush.py
# HOLD_CYCLES, the same length, every thread slot of every SM, through Flush.hold): on the H200 the reference's
# first call after this one-SM spin still ran ~0.11 ms over its others on L2/3 and Transpose, every round (A/A
# 1.010 and 1.014, results/H200/aa-diag-20261206-s26.json), while the candidate's after the hold did not; every
# later call follows the flush, also full-device. This spin is left for a timing with the flush off.
LEAD_SPIN = 1 << 19

# Calls per witnessed batch, at most: the witness prices a batch at its wall less an allowance per batch
# (integrity.witnessed_per_call), so what a lying clock can hide per call shrinks as 1/n. More on CUDA, where
# short kernels need it (H200, 2026-12-03: a 10x clock lie on a 0.03 ms kernel kept 19x at 32 calls a batch
# after pricing at 10, 2.5x at 32); the lanes' memory, a tenth of the GPU's and at most 8 GiB there.
BATCH_MAX = {"cuda": 64, "cpu": 32}
LANE_MEMORY_BYTES = {"cuda": 8 << 30, "cpu": 2 << 30}


def calls_per_batch(ref, trial, variants: list, cfg, device: str) -> int:
    """Calls per hand-over: enough reference work (timing.batch_ms) that the witness's noise, spread over
    the batch, is small next to any time a candidate could hide per call; bounded by memory."""
    times = []
    for _ in range(6):          # the median of five after one untimed: a slow first call made batches of 17
        t0 = time.perf_counter()        # where 64 were due (H200, cpu/1 at 0.08 ms), and their pricing too coarse
        ref.run(trial.inputs)
        times.append((time.perf_counter() - t0) * 1e3)
    ref_ms = sorted(times[1:])[2]
    lane_bytes = sum(t.numel() * t.element_size() for t in tensors(trial.inputs) + tensors(trial.ref_out))
    budget = LANE_MEMORY_BYTES[device]
    if device == "cuda":
        budget = min(budget, torch.cuda.get_device_properties(torch.cuda.current_device()).total_memory // 10)
    by_memory = max(1, budget // max(lane_bytes, 1))
    if device == "cpu":      # every CPU buffer is a descriptor of the map message (channel.MAX_FDS)
        fixed = len(ref.model.state_dict()) + sum(len(tensors(v.inputs)) + len(tensors(v.ref_out)) +
                                                  len(v.model.state_dict()) for v in variants)
        per_lane = len(tensors(trial.inputs)) + len(tensors(trial.ref_out))
        by_memory = max(1, min(by_memory, (MAX_FDS - fixed) // max(per_lane, 1)))
    want = max(cfg.timing.samples_per_round, math.ceil(cfg.timing.batch_ms / max(ref_ms, 1e-3)))
    return int(max(1, min(want, BATCH_MAX[device], by_memory)))


class InputFeed:
    """Every timed call's floating inputs: a pool set (drawn from a secret seed) with its elements permuted by
    a fresh affine map i -> (a*i + b) mod n, a and b drawn in secret per call and per tensor (a coprime to n,
    at least sqrt(n) from 0 and n). A roll (a = 1) kept contiguous runs of the pool together, so a candidate
    holding prefix sums of the pool could answer a row reduction from two lookups per row; under a fresh
    multiplier, any contiguous window maps to a progression whose step it has never seen, and precomputing
    for it costs as much as the honest call. The values are the pool's (same distribution); integer and bool
    inputs (indices, masks) are kept as they are."""

    def __init__(self, pool: list[list], rng: random.Random):
        self.pool, self.rng = pool, rng
        self._index: dict = {}       # (n, device) -> (arange, scratch): no allocation per call

    def multiplier(self, n: int) -> int:
        lo = max(2, math.isqrt(n))
        if n - lo <= lo:             # tiny tensors: any unit but 1 (there are few maps; there is little to cache)
            units = [a for a in range(2, n) if math.gcd(a, n) == 1]
            return self.rng.choice(units) if units else 1
        while True:
            a = self.rng.randrange(lo, n - lo)
            if math.gcd(a, n) == 1:
                return a

    def fill(self, dst: list) -> None:
        """Write fresh contents into the tensors `dst` (shaped like a pool set)."""
        src = self.pool[self.rng.randrange(len(self.pool))]
        for d, s in zip(tensors(dst), tensors(src)):
            n = s.numel()
            if not s.is_floating_point() or n < 2:
                d.copy_(s)
                continue
            key = (n, s.device)
            if key not in self._index:
                self._index[key] = (torch.arange(n, device=s.device), torch.empty(n, dtype=torch.int64, device=s.device))
            arange, idx = self._index[key]
            idx.copy_(arange).mul_(self.multiplier(n)).add_(self.rng.randrange(n)).remainder_(n)
            torch.index_select(s.reshape(-1), 0, idx, out=d.view(-1))


class DeviceProbe:
    """A one-element kernel launched and synchronised from the judge's own context. While another context
    (the frozen candidate's) still has kernels running, the probe waits for them, so its latency tells
    whether the candidate left work on the device after it said it was done."""

    def __init__(self, device: str):
        self.cuda = device == "cuda"
        self.idle_ms = 0.0
        self.probed = self.busy_calls = 0
        self.worst = 0.0
        self.threshold_ms = float("inf")
        if self.cuda:
            self.t = torch.zeros(1, device="cuda")
            self.idle_ms = stats.median([self.latency() for _ in range(PROBE_CALLS)])

    def calibrate(self, latencies: list[float]) -> None:
        """The idle latency right after the other context ran (the GPU switches contexts first: ~0.25 ms on
        the H200 against 0.02 ms back to back), from probes after the trusted stand-in's calls."""
        if self.cuda and latencies:
            self.idle_ms = stats.median(latencies)
            self.threshold_ms = self.idle_ms + max(PROBE_BUSY_MARGIN_MS, PROBE_BUSY_NOISE * stats.mad_sd(latencies))
        self.probed = self.busy_calls = 0
        self.worst = 0.0

    def late(self) -> bool:
        """Busy after at least 3 calls and 20% of those probed: a candidate that leaves work behind does so
        every call; a slow context switch or two is not that (an honest wgmma kernel's probes after 2 of its 3
        correctness calls took 0.87 ms against 0.3 idle on an H100, session 30, and none after its timed ones)."""
        return self.busy_calls >= max(3, 0.2 * self.probed)

    def latency(self) -> float:
        t0 = time.perf_counter_ns()
        self.t.add_(1)
        torch.cuda.synchronize()
        return (time.perf_counter_ns() - t0) / 1e6

    def after_call(self) -> float:
        """Probe after a call (the candidate frozen); the latency in ms (0 on the CPU), part of the call's witness:
        device work the candidate left behind delays it. A busy probe is followed by more until one finds the
        device idle (PROBE_SETTLE): a probe waits for the other context's work only as long as the GPU lets it
        wait (a time slice, where that work is preempted), and what runs on would overlap the next reference
        batch in a round where the rule below forgives it (late()); waited for, it is the candidate's time."""
        if not self.cuda:
            return 0.0
        ms = total = self.latency()
        self.probed += 1
        if ms > self.threshold_ms:
            self.busy_calls += 1
            self.worst = max(self.worst, ms)
            for _ in range(PROBE_SETTLE):
                ms = self.latency()
                total += ms
                if ms <= self.threshold_ms:
                    break
        return total


class LocalSide:
    """The reference (eager or torch.compile) timed in this process."""

    def __init__(self, fn, feed: InputFeed, template: list, device: str, flush: Flush):
        self.fn, self.feed, self.device, self.flush = fn, feed, device, flush
        self.inputs = clone(template)
        self.lanes: list = []          # CUDA: one input set per call of a batch
        self.host_ms: list[float] = []
        self.first_rest: list = []     # per batch: [first call, mean of the others] (a cost per batch shows here)
        self.flushes: list = []        # per batch: Flush.charge's record
        self.flush_record: list = []

    def warmup(self, calls: int, ms: float) -> None:
        start, n = time.perf_counter(), 0
        while n < calls or (time.perf_counter() - start) * 1e3 < ms:
            self.feed.fill(self.inputs)
            with torch.no_grad():
                self.fn(*self.inputs)
            synchronize(self.device)
            n += 1

    def sample(self, n: int) -> list[float]:
        """CUDA: one batch of n calls timed as the candidate's are (candidate/process.py op_call): L2 flushed and
        the device idle before the batch, then the calls back to back, each on its own freshly filled inputs
        with a flush between them and between two events, so the device runs ahead of the host; the batch's mean per call, as the
        candidate's is (RemoteSide.sample). Timing each call alone after a synchronise counted the launch
        latency of its first kernel: the reference against itself read 1.06x (RMSNorm, 0.63 ms) to 1.15x
        (0.26 ms) on the H200 (session 18). CPU: per-call times, the call and not the free of its result."""
        if self.device != "cuda":
            return self._sample_cpu(n)
        fresh = len(self.lanes) < n
        while len(self.lanes) < n:        # every call's inputs written before the batch, as the judge does the
            self.lanes.append(clone(self.inputs))       # candidate's lanes: nothing but the flush between calls
        if fresh:      # untimed: new lanes (and the lead spin's first launch) made the first timed batch's first
            self._batch(n)      # call 0.2 ms slow (H100, L2/3: 0.48 ms, the rest 0.27); the candidate's warm-up
            #                     is whole batches
        each, wall, lead = self._batch(n)
        self.host_ms.append(wall / n)       # the batch's wall per call
        self.first_rest.append(first_rest(each) + [round(lead, 5)])
        self.flushes.append(self.flush_record)
        return [sum(each) / n] * n

    def _batch(self, n: int) -> tuple[list[float], float, float]:
        """n calls on fresh inputs: each call's device time, the batch's wall, and the host's time from the
        lead's launch to the first call queued (ms): over the lead's device time (~1 ms), the device waited
        for the host inside the first call's interval (a diagnostic: first_rest_ms). Its flushes are timed and
        recorded as the candidate's are (Flush.record)."""
        for lane in self.lanes[:n]:
            self.feed.fill(lane)
        self.flush()
        torch.cuda.synchronize()
        events, flushes, lead = [], [], 0
        t0 = time.perf_counter_ns()
        if not self.flush.hold():           # the host ahead of the device from the first call on, as the
            torch.cuda._sleep(LEAD_SPIN)    # candidate's is (LEAD_SPIN)
        with torch.no_grad():
            for k, lane in enumerate(self.lanes[:n]):
                f0 = mark() if k and self.flush.run is not None else None
                if k:
                    self.flush()
                start = mark()
                self.fn(*lane)
                events.append((start, mark()))
                if f0 is not None:
                    flushes.append((f0, start))
                lead = lead or time.perf_counter_ns() - t0
        if self.flush.run is not None:      # after the last call too, as the candidate process does
            f0 = mark()
            self.flush()
            flushes.append((f0, mark()))
        torch.cuda.synchronize()
        self.flush_record = self.flush.record([a.elapsed_time(b) for a, b in flushes])    # (trusted: no charge)
        return [a.elapsed_time(b) for a, b in events], (time.perf_counter_ns() - t0) / 1e6, lead / 1e6

    def _sample_cpu(self, n: int) -> list[float]:
        """n calls, each on freshly filled inputs; their mean per call, as the candidate's batch is counted
        (RemoteSide.sample). Each call's own time made the round's median drop the reference's slow calls
        while the candidate's mean kept its own (until session 27)."""
        out = []
        for _ in range(n):
            self.feed.fill(self.inputs)
            with torch.no_grad():
                t0 = time.perf_counter_ns()
                result = self.fn(*self.inputs)
                out.append((time.perf_counter_ns() - t0) / 1e6)    # the call, not the free of its result:
                del result                                         # as the candidate's own clock does
                self.host_ms.append(out[-1])
        return [sum(out) / n] * n


class RemoteSide:
    """The candidate, one witnessed batch at a time: the judge writes fresh inputs into each lane's slots
    (the candidate is frozen meanwhile), flushes L2, thaws it for exactly one batch (its calls back to back,
    the L2 flushed between them), freezes it when the reply arrives, probes the device, and checks the
    output of secretly chosen calls. `sample(n)` is one batch of n calls (n = the session's batch size)."""

    def __init__(self, cand, session, feed: InputFeed, flush: Flush, probe: DeviceProbe, rng: random.Random):
        self.cand, self.session, self.feed, self.flush, self.probe, self.rng = cand, session, feed, flush, probe, rng
        self.reported: list[float] = []     # per batch: the sum of the candidate's own times
        self.witness: list[float] = []      # per batch: the judge's time, hand-over to reply to device idle
        self.sizes: list[int] = []
        self.busy: list = []                # per batch, CPU: its CPU work as wall time (handle.busy_ms), or None
        self.canary: list[tuple] = []       # per batch: the clock canary (size index, ms on the candidate's clock)
        self.inside: list = []              # per batch, CUDA: the spin inside a call (_spun, evidence.check_inside)
        self.first_rest: list = []          # per batch: [first call, mean of the others], the candidate's clock
        self.diag: list = []                # per batch: judge/sides.batch_diag
        self.flushes: list = []             # per batch: Flush.charge's record
        self.checked = self.retimed = 0
        self.after_batch = None             # called after each batch, the candidate frozen (evidence.sampled)

    def batch(self, n: int, checks: set) -> list[float]:
        s = self.session
        lanes = s.lanes[:n]
        pristine = {}
        for k, (ins, _) in enumerate(lanes):
            self.feed.fill(ins.tensors)
            if k in checks:
                pristine[k] = clone(ins.tensors)
        self.flush()
        synchronize(s.device)
        # the clock canary's size and place (before which call; n: after the last), secret, so no hook can
        # spare it by its length or its position
        canary = self.rng.randrange(len(CANARY_SIZES))
        at = self.rng.randrange(len(lanes) + 1)
        msg = {"op": "call", "lanes": list(range(len(lanes))), "canary": (canary, at)}
        if s.device == "cuda" and len(lanes) > 1:     # the same spin inside one secret call, before another's start
            msg["inside"] = (len(CANARY_SIZES) - 1 - self.rng.randrange(2), *self.rng.sample(range(len(lanes)), 2))
        reply, wall = self.cand.call(msg, s.call_timeout(), "timing")
        probe = self.probe.after_call()
        wall += probe                          # the witness runs until the device is idle again
        if self.after_batch:
            self.after_batch()
        times = [float(x) for x in reply.times]
        flushed = [float(x) for x in reply.flush_ms]
        if len(times) != len(lanes) or not all(math.isfinite(x) and x >= 0 for x in times + flushed):
            raise_protocol(f"{len(times)} time(s) for a batch of {len(lanes)} calls")
        if len(flushed) != (len(lanes) if self.flush.run is not None else 0):
            raise_protocol(f"{len(flushed)} flush time(s) for a batch of {len(lanes)} calls")
        if "inside" in msg:
            wall -= self._spun(times, *msg["inside"])
        times, record = self.flush.charge(times, flushed)
        for k in sorted(checks):
            self.checked += 1
            evidence.verify_timed(s, reply, k, pristine[k])
        if not s.standin_reuses:
            s.flags.add(maybe_flag("output-reused", s.reuse(reply)))
        self.reported.append(sum(times))
        self.witness.append(wall)
        self.sizes.append(len(lanes))
        self.busy.append(self.cand.busy_ms)
        self.canary.append((canary, float(reply.canary)))
        self.first_rest.append(first_rest(times))
        self.flushes.append(record)
        self.diag.append(batch_diag(wall, sum(times), reply, self.cand.freeze_ms, probe))
        return times

    def _spun(self, times: list[float], size: int, inside: int, after: int) -> float:
        """Records the spin inside call `inside` (candidate/clocks.py) and takes it off that call, at its time
        before the import (the stand-in's, not this clock's word); returns what kbench's two spins added to the
        wall, in no call and not in the hand-over."""
        spin = evidence.canary_base(self.session.canary_before[1:]).get(size, 0.0)
        others = [t for k, t in enumerate(times) if k not in (inside, after)]
        spread = stats.mad_sd(others) if others else 0.0
        self.inside.append([round(x, 5) for x in (times[inside], times[after], spin, spread)])
        times[inside] = max(0.0, times[inside] - spin)
        return 2 * spin

    def warmup(self, calls: int, ms: float) -> None:
        start, n = time.perf_counter(), 0
        while n < calls or (time.perf_counter() - start) * 1e3 < ms:
            n += len(self.batch(len(self.session.lanes), {0} if n == 0 else set()))
        # (a cold first batch is not a lie: the witness rule's mean would count it)
        self.reported, self.witness, self.sizes, self.canary, self.first_rest, self.diag = [], [], [], [], [], []
        self.flushes, self.busy, self.inside = [], [], []

    def sample(self, n: int) -> list[float]:
        """One batch, counted as its mean per call: the witness vouches for a batch's total only, and a
        candidate can move time between the calls of a batch (all of the batch's work in its first call,
        reading the other lanes' inputs, which are in place before the hand-over; the rest return at once).
        CUDA: a batch the witness prices by over RETIME_MS while the judge's own freeze of it was late is timed
        again, once, and the second one counts."""
        s = self.session
        n = min(n, len(s.lanes))
        for again in (False, True):
            checks = {self.rng.randrange(n)} | {k for k in range(n) if self.rng.random() < SPOT_CHECK_P}
            times = self.batch(n, checks)
            per_call = witnessed_per_call(self.reported[-1], self.witness[-1], len(times), s.handover_ms,
                                          s.handover_spread, s.device)
            if again or s.device != "cuda" or per_call * len(times) - self.reported[-1] <= RETIME_MS or \
                    self.cand.freeze_ms <= max(LATE_FREEZE * s.ping_freeze_ms, s.ping_freeze_ms + LATE_FREEZE_MS):
                break
            self.retimed += 1
        return [per_call] * len(times)


def batch_diag(wall: float, claimed: float, reply, freeze: float, probe: float) -> list:
    """[witness, claimed, freeze, device-idle probe, *reply.diag] in ms, rounded; the freeze and the probe are
    the judge's, the diag part the candidate's word, kept only if it is 4 numbers (for reading where a batch's
    excess over the hand-over and its noise go, never for a verdict)."""
    said = reply.diag if len(reply.diag) == 4 and all(isinstance(x, (int, float)) for x in reply.diag) else []
    return [round(float(x), 4) for x in [wall, claimed, freeze, probe, *said]]


def first_rest(each: list[float]) -> list[float]:
    return [round(each[0], 5), round(sum(each[1:]) / (len(each) - 1), 5) if len(each) > 1 else None]


def raise_protocol(what: str):
    from .handle import CandidateFailed
    raise CandidateFailed("integrity", f"malformed reply from the candidate process: {what}", phase="timing")
