"""The timing protocol, the roofline and the torch.compile baseline, on the CPU path."""
from __future__ import annotations

import itertools
import json
import time

import pytest

from kernelbench_cli.config import TimingConfig
from kernelbench_cli.timing import measure


class sleeper:
    """A timing side whose calls take a known time."""

    def __init__(self, ms: float):
        self.ms = ms

    def warmup(self, calls, ms):
        pass

    def sample(self, n):
        out = []
        for _ in range(n):
            t0 = time.perf_counter()
            time.sleep(self.ms / 1e3)
            out.append((time.perf_counter() - t0) * 1e3)
        return out


def test_paired_rounds_measure_a_known_ratio():
    cfg = TimingConfig(warmup_calls=1, warmup_ms=1, samples_per_round=3, min_rounds=4, max_rounds=8,
                       ci_target=0.02, budget_s=5)
    t = measure(sleeper(4.0), sleeper(2.0), cfg, clock="perf-counter")
    assert t.clock == "perf-counter" and 4 <= t.rounds <= 8
    assert 1.7 < t.speedup < 2.3 and t.ci_low <= t.speedup <= t.ci_high
    assert 3.8 < t.ref_ms < 6 and 1.8 < t.cand_ms < 4 and len(t.ref_rounds_ms) == t.rounds


def test_throttled_rounds_are_dropped_and_counted():
    cfg = TimingConfig(warmup_calls=1, warmup_ms=0, samples_per_round=1, min_rounds=3, max_rounds=6,
                       ci_target=0.0, budget_s=60)
    pattern = itertools.cycle([False, True])       # every second round "throttled"
    t = measure(sleeper(1.0), sleeper(1.0), cfg, throttled=lambda: next(pattern))
    assert t.throttled_rounds == 3 and t.rounds == 3 and t.stop_reason == "max-rounds" and not t.throttled_kept


def test_a_kernel_at_the_power_cap_throughout_keeps_its_paired_rounds():
    cfg = TimingConfig(warmup_calls=1, warmup_ms=0, samples_per_round=1, min_rounds=3, max_rounds=6,
                       ci_target=0.0, budget_s=60)
    t = measure(sleeper(1.0), sleeper(1.0), cfg, throttled=lambda: True)
    assert t.throttled_rounds == 6 and t.rounds == 6 and t.throttled_kept


def test_the_flush_kernel_takes_every_thread_slot_of_every_sm():
    """l2flush.occupancy: blocks x threads = every SM's thread slots, so no other kernel's block fits beside
    the flush (H100/H200: 2048 a SM -> 2 x 1024; 1536 -> 2 x 768; 1024 -> 1 x 1024)."""
    from kernelbench_cli.l2flush import occupancy
    for per_sm, sms, want in ((2048, 132, (264, 1024)), (1536, 84, (168, 768)), (1024, 80, (80, 1024)),
                              (2560, 10, (40, 640))):
        blocks, block = occupancy(per_sm, sms)
        assert (blocks, block) == want and blocks * block == per_sm * sms and block % 32 == 0 and block <= 1024


def test_every_timed_call_gets_fresh_contents_from_the_pool():
    import random

    import torch

    from kernelbench_cli.judge.sides import InputFeed
    pool = [[torch.arange(64.0).reshape(8, 8), torch.tensor([2, 0, 1])]]
    feed = InputFeed(pool, random.Random(0))
    dst = [torch.empty(8, 8), torch.empty(3, dtype=torch.long)]
    seen = set()
    for _ in range(20):
        ptr = dst[0].data_ptr()
        feed.fill(dst)
        assert dst[0].data_ptr() == ptr and sorted(dst[0].flatten().tolist()) == list(range(64))
        assert dst[1].tolist() == [2, 0, 1]          # indices stay as they are
        seen.add(tuple(dst[0].flatten().tolist()))
    assert len(seen) >= 15                            # a new arrangement nearly every call


def test_calibrate_then_roofline_and_compile_baseline(kbench, tmp_path):
    ceilings = tmp_path / "ceilings"
    proc = kbench("calibrate", "--device", "cpu", "--set", f"paths.ceilings={ceilings}", config=None)
    assert proc.returncode == 0, proc.stderr
    saved = json.loads(next(ceilings.glob("*.json")).read_text())
    assert saved["copy_gbps"] > 0 and saved["matmul_tflops"]["float32"] > 0
    # `build --baselines compile` compiles the torch.compile baseline into Inductor's cache beside the builds: the
    # check's baseline then compiles nothing (no file added to that cache), where it took ~10 s on the H200
    built = kbench("build", "cpu/4", "--baselines", "eager,compile")
    assert built.returncode == 0 and "torch.compile baselines compiled: 1/1 problems" in built.stderr, built.stderr[-2000:]
    inductor = kbench.cache / "inductor"

    def cached() -> set:
        return {p for p in inductor.rglob("*") if p.is_file() and "locks" not in p.parts}
    before = cached()
    assert any(p.suffix == ".so" for p in before), sorted(before)[:20]
    timeline = tmp_path / "check.trace"
    code, doc = kbench.json("check", "cpu/4", "--set", f"paths.ceilings={ceilings}", "--baselines", "eager,compile",
                            env={"KBENCH_TRACE": str(timeline)})
    assert cached() == before, sorted(cached() - before)
    # the judge imports dynamo and inductor while its candidate processes start, before it loads the problem
    marks = [line.split(None, 3)[3] for line in timeline.read_text().splitlines() if " judge " in line]
    assert "dynamo and inductor imported" in marks and \
        marks.index("dynamo and inductor imported") < marks.index("reference built"), marks[:20]
    r = doc["results"][0]
    assert code == 0, r["message"]
    roof = r["roofline"]
    assert roof["bound"] == "memory" and roof["flops"] == 0
    assert roof["bytes"] == 4 * 4 * (1 << 22)       # three inputs read, one output written, float32
    assert roof["floor_ms"] > 0 and roof["sol"] == pytest.approx(roof["floor_ms"] / r["timing"]["cand_ms"])
    comp = r["baselines"]["compile"]
    assert comp["compile_s"] > 0 and comp["speedup"] > 0 and comp["ci_low"] <= comp["speedup"] <= comp["ci_high"]
    # a CPU copy ceiling measured on a busy 2-core machine is rough: a suspicious-speed warning may appear
    assert all(f["severity"] == "warning" for f in r["flags"]), r["flags"]
