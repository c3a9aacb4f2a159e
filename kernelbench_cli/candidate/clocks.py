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

# The clock canary (CUDA): kbench's own fixed work, timed with this process's clock after every batch, before
# the candidate's import (the hand-over pings) and after it. A clock rewritten below Python to read short
# reads kbench's work short too, however short the candidate's calls. One float add over a slice of a
# buffer, its size drawn by the judge per batch from channel.CANARY_SIZES (3 us to ~0.15 ms on the H200; the
# largest 4x L2, so what the candidate's calls left there cannot speed it up): memory-bound, so SM clocks
# barely move it. Not on the CPU: a plain loop there read 0.43x as long after the import as before it for an
# honest kernel on the loaded 2-core box (the pings run while spare candidate processes import torch).


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
