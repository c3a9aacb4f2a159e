"""The witness's hand-over (docs/architecture.md, "The witness"): what a whole batch costs beyond its calls,
measured before any candidate code exists in the candidate process, on batches of a stand-in (the reference
itself; candidate/process.py op_ping): witness minus the stand-in's own time. Its median is the hand-over,
its MAD the noise, against which integrity.check_witness and witnessed_per_call read every timed batch."""
from __future__ import annotations

import os
import random
import time

from .. import stats, trace
from ..channel import CANARY_SIZES
from ..correctness import synchronize, tensors
from .sides import LocalSide, batch_diag

# Batches per device: up to the first figure, at least the second (two per canary size), for about the third in
# seconds of pinging. CUDA had 30 / 0.5 s until session 22: 0.26-0.59 s of every job (the H200 suite's median 0.43
# s) for a median and a MAD that 20 batches give about as well, as the allowance was max(0.5 ms, 2 x spread) and the
# spread 0.05-0.12 ms (H100, session 22): the floor decided it (integrity.price_allowance). The CPU keeps 30: its
# allowance follows the hand-over itself, on a loaded 2-core box.
PINGS = {"cuda": (20, 8, 0.3), "cpu": (30, 8, 0.5)}
# The CPU-time witness (handle.busy_ms) per ping: the batch's CPU work as wall less the least wall of the stand-in's
# calls by their own CPU time (op_ping says it: no candidate code exists yet), what kbench's loop costs beyond them.
# CPU time on both sides, so a loaded host does not move it; the stand-in's wall times did (CI, session 32: pings
# descheduled inside their calls read below 0). Its noise is capped, so a host made noisy during the pings widens
# no lie's allowance past 4 x the cap.
CPU_TIME_SPREAD_CAP_MS = 0.25


def calibrate(s, trials: list) -> None:
    """Ping the session's candidate process; sets s.handover_ms, s.handover_spread, s.canary_before (the clock
    canary on the stand-in's clock, per size), s.standin_reuses, s.ping_diag, and calibrates s.probe.

    The pings keep the timed rounds' rhythm (timing.measure: A B, B A): a reference batch of the same size runs
    in the judge before every other ping and after the next, so that a ping finds the candidate process as a
    timed batch will, after a frozen wait through the judge's work. Pinged back to back instead, the hand-over
    read low: on the H200 (session 26, A/A) the timed batches of the same stand-in code ran 0.25-0.4 ms a batch
    over it with the same device time (their host side slower: the loop 15-20%, the reply 0.2-0.3 ms), so the
    witness priced honest batches (integrity.witnessed_per_call) and the A/A of L2/3 read 0.94. CUDA only: on the
    CPU a reference batch's fresh inputs cost ~20 ms per million elements (sides.InputFeed), seconds a job beside
    the pings (the CPU test suite took 31 min instead of 21), and the CPU witness forgives a share of the call,
    not a fixed 0.5 ms a batch."""
    ref, cand = s.ref, s.cand
    s.quiet()
    beside = LocalSide(ref.model, ref.feed(random.Random(s.rng.getrandbits(64))), trials[0].inputs, s.device,
                       s.flush) if s.device == "cuda" else None
    walls, probes, flushes, start, aside, beside_n = [], [], [], time.perf_counter(), 0.0, 0
    cpu = []                      # CPU only: CPU work as wall beyond the stand-in's calls by their CPU time (below)
    s.canary_before = []          # (size index, ms) per ping
    s.standin_reuses = False      # the reference's own outputs share storage between calls
    s.ping_diag = []
    lanes = list(range(s.batch))
    most, least, budget = PINGS[s.device]

    def reference_batch() -> None:
        nonlocal aside, beside_n
        if beside is None:
            return
        t = time.perf_counter()
        beside.sample(s.batch)
        aside, beside_n = aside + time.perf_counter() - t, beside_n + 1

    while len(walls) < most and (len(walls) < least or time.perf_counter() - start - aside < budget):
        if len(walls) % 2 == 0:
            reference_batch()
        for k, (ins, _) in enumerate(s.lanes):
            for slot, x in zip(ins.tensors, tensors(trials[(len(walls) + k) % len(trials)].inputs)):
                slot.copy_(x)
        s.flush()
        synchronize(s.device)
        canary = len(walls) % len(CANARY_SIZES)       # every size, in turn
        reply, wall = cand.call({"op": "ping", "lanes": lanes, "canary": (canary, len(walls) % (len(lanes) + 1))},
                                s.call_timeout(), "start")
        s.standin_reuses = s.standin_reuses or s.reuse(reply) is not None
        probes.append(s.probe.latency() if s.probe.cuda else 0.0)
        walls.append(wall + probes[-1] - reply.ms)
        if cand.busy_ms is not None and len(reply.cpu_ms) == 2:
            cpu.append(cand.busy_ms - max(float(reply.cpu_ms[0]), float(reply.cpu_ms[1]) / (os.cpu_count() or 1)))
        s.ping_diag.append(batch_diag(wall + probes[-1], reply.ms, reply, cand.freeze_ms, probes[-1]))
        s.canary_before.append((canary, float(reply.canary)))
        flushes.append([float(x) for x in reply.flush_ms])
        if len(walls) % 2 == 0:
            reference_batch()
    del beside
    trace.mark("judge", f"{len(walls)} ping batches, {beside_n} reference batches beside them")
    s.probe.calibrate(probes[1:] or probes)
    s.handover_ms, s.handover_spread = median_mad(walls[1:] or walls)     # the first batch warms the stand-in up
    s.cpu_handover_ms, s.cpu_spread = cpu_handover(cpu[1:] or cpu) if cpu else (None, None)
    s.flush.calibrate_pings([f for fl in flushes[1:] for f in fl])
    s.ping_freeze_ms = stats.median([d[2] for d in s.ping_diag[1:] or s.ping_diag])    # (sides.RETIME_MS)


def median_mad(xs: list[float]) -> tuple[float, float]:
    """The median and the MAD as a standard deviation."""
    xs = sorted(xs)
    mid = xs[len(xs) // 2]
    deviations = sorted(abs(x - mid) for x in xs)
    return mid, 1.4826 * deviations[len(deviations) // 2]


def cpu_handover(xs: list[float]) -> tuple[float, float]:
    """The CPU-time witness's hand-over (never below 0) and noise (capped) from the pings (above)."""
    mid, spread = median_mad(xs)
    return max(0.0, mid), min(spread, CPU_TIME_SPREAD_CAP_MS)
