"""The candidate process's own clocks, bound before any candidate code runs (imported by process.py at its
start). Its times are claims the judge's witness checks, but a claim should not be forgeable by a one-line
patch: a candidate that rebinds `time.perf_counter_ns`, or `torch.cuda.Event.elapsed_time` / `.record` /
`torch.cuda.synchronize` (from Python or from C++ through the interpreter), changes names this module no
longer looks up. What stays possible is native code rewriting the clock below Python (libc's
clock_gettime, libcudart's event functions): there the witness is the defence, and on a call shorter than
its resolution (docs/integrity.md, "timer") a lie can still hide."""
from __future__ import annotations

import time

perf_counter_ns = time.perf_counter_ns      # bound now: `time.perf_counter_ns = ...` later is not seen

# The clock canary (CUDA): kbench's own fixed work, timed with this process's clock in every batch, before the
# candidate's import (the hand-over pings) and after it. A clock rewritten below Python to read short reads
# kbench's work short too, however short the candidate's calls. The work is torch's spin kernel for a number of
# GPU cycles drawn by the judge per batch (channel.CANARY_SIZES), launched through its C entry point bound
# before the import: no dispatcher, so no Python-reachable override (a torch.library kernel, a dispatch mode)
# can make it do more work to match a clock that reads short; an untimed spin first keeps the host ahead of the
# device so the interval is the spin's alone (session 16: a float add timed mid-batch read 0.03 ms for 3 us of
# work, launch gaps, which let a 10x-short clock pass). Its time follows the SM clock, which moves it by far
# less than the 2x the check needs. Not on the CPU: a plain loop there read 0.43x as long after the import as
# before it for an honest kernel on the loaded 2-core box (the pings run while spare candidate processes
# import torch).
# The spin inside a call: a clock that reads short only on intervals holding the candidate's own launches (it
# tracks the events recorded around them) reads the canary true. So in every timed batch the same spin, of a secret
# size, also runs inside one secret call's interval (after its start event, before the forward) and, outside any
# interval, just before another's start: honest, the two calls read alike once the spin is taken off; such a clock
# hides the spin, and one that spares the interval holding kbench's launch reads that call long
# (judge/evidence.check_inside). What it leaves: a hook that sees kbench's launches or reads the batch's message
# (which names both calls: this process must know them), and reads true on the spin or on both calls: the witness
# bounds those (docs/integrity.md).


class DeviceTimer:
    """CUDA event timing through torch's C-level event type and the stream current at bind time (the
    default stream, where the candidate's forward runs), synchronised through the C-level entry point."""

    def __init__(self, torch):
        base = torch._C._CudaEventBase
        self._new, self._record, self._elapsed = base, base.record, base.elapsed_time
        self._sync = torch._C._cuda_synchronize
        self._stream = torch.cuda.current_stream()

    def mark(self):
        ev = self._new(enable_timing=True)
        self._record(ev, self._stream)
        return ev

    def elapsed_ms(self, pairs: list) -> list[float]:
        self._sync()
        return [self._elapsed(start, end) for start, end in pairs]
