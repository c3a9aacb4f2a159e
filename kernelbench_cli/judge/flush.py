"""The judge's L2 flush (both sides' cold cache before every timed CUDA call) and what it charges a call."""
from __future__ import annotations

import math

import torch

from .. import stats
from ..l2flush import DriverFlush

# A flush after a call may take its time alone (Flush.allow_ms: the median of FLUSH_ALONE back to back) plus
# the most of FLUSH_SLACK_MS, FLUSH_SLACK_SHARE of it and FLUSH_NOISE robust sds before the rest is the call's.
FLUSH_ALONE, FLUSH_SLACK_MS, FLUSH_SLACK_SHARE, FLUSH_NOISE = 26, 0.003, 0.05, 4.0


def mark():
    event = torch.cuda.Event(enable_timing=True)
    event.record()
    return event


class Flush:
    """Overwrite a buffer twice the size of L2 before every timed call (cold cache, as in a model where other
    layers ran in between), with kbench's fenced, SM-filling kernel (l2flush.py: nothing else runs beside its
    stores). The judge does it for both sides, so a candidate cannot skip it; `nbytes` is what the candidate
    process's own flush between a batch's calls must cover.

    Each side also times every flush after a call (from an event before it to the next call's start). A flush
    waits for every block still running, so work a candidate started ahead on another stream, or left running
    past its call, shows there: a candidate's flush over `allow_ms` charges the call before it the rest (charge).
    `allow_ms` is the most of (1) this process's flush back to back, every L2 line dirty with its own zeros, the
    slowest a flush finds the cache (a call leaves lines clean or dirty, never more to write back), and (2) the
    flushes of the hand-over's pings (calibrate_pings: the stand-in, before the import, on the candidate
    process's own path, so a flush interval that holds its host's launch of the flush, where a call leaves the
    device idle, is allowed as the reference's own code needs it), each plus the slack. The reference, trusted, is
    not charged; its flushes are recorded (`record`)."""

    def __init__(self, device: str, enabled: bool):
        self.run, self.nbytes, self.allow_ms, self.alone_ms = None, 0, math.inf, (math.nan, math.nan)
        if device == "cuda" and enabled:
            l2 = torch.cuda.get_device_properties(torch.cuda.current_device()).L2_cache_size
            self.nbytes = 2 * max(l2, 1 << 20)
            self.run = DriverFlush(torch, self.nbytes)
            self.alone_ms = self._alone()
            self.allow_alone_ms = self.allow_ms = slack(*self.alone_ms)

    def _alone(self) -> tuple[float, float]:
        """(median, robust sd) of a flush's time, back to back after a hold (so the host is ahead)."""
        marks = [torch.cuda.Event(enable_timing=True) for _ in range(FLUSH_ALONE + 1)]
        self.run.hold()
        marks[0].record()
        for m in marks[1:]:
            self.run()
            m.record()
        torch.cuda.synchronize()
        ms = [a.elapsed_time(b) for a, b in zip(marks, marks[1:])][2:]
        return stats.median(ms), stats.mad_sd(ms)

    def calibrate_pings(self, flush_ms: list[float]) -> None:
        """allow_ms for this job's candidate: the flushes of its hand-over pings (trusted) may raise it."""
        if self.run is not None:
            self.allow_ms = max(self.allow_alone_ms, slack(stats.median(flush_ms), stats.mad_sd(flush_ms))) \
                if flush_ms else self.allow_alone_ms

    def __call__(self) -> None:
        if self.run is not None:
            self.run()

    def hold(self) -> bool:
        """The full-device hold that starts a timed batch (l2flush.HOLD_CYCLES); False where there is no flush."""
        if self.run is not None:
            self.run.hold()
        return self.run is not None

    def charge(self, times: list[float], flush_ms: list[float]) -> tuple[list[float], list]:
        """Each call's time plus the time of the flush after it over allow_ms, and the record."""
        over = [max(0.0, f - self.allow_ms) for f in flush_ms]
        return [t + o for t, o in zip(times, over + [0.0] * (len(times) - len(over)))], self.record(flush_ms)

    def record(self, flush_ms: list[float]) -> list:
        """[median, max, over allow_ms in all] of a batch's flushes (ms), for the result."""
        if not flush_ms:
            return []
        over = sum(max(0.0, f - self.allow_ms) for f in flush_ms)
        return [round(stats.median(flush_ms), 5), round(max(flush_ms), 5), round(over, 5)]


def slack(median: float, sd: float) -> float:
    """A flush's time plus what noise may add to it (FLUSH_SLACK_MS, FLUSH_SLACK_SHARE, FLUSH_NOISE)."""
    return median + max(FLUSH_SLACK_MS, FLUSH_SLACK_SHARE * median, FLUSH_NOISE * sd)
