"""The timing protocol, the roofline and the torch.compile baseline, on the CPU path."""
from __future__ import annotations

import itertools
import json
import time

import pytest

from kernelbench_cli.config import TimingConfig
from kernelbench_cli.timing import measure, refresh_contents


def sleeper(ms: float):
    def fn(*_):
        time.sleep(ms / 1e3)
    return fn


def test_paired_rounds_measure_a_known_ratio():
    cfg = TimingConfig(warmup_calls=1, warmup_ms=1, samples_per_round=3, min_rounds=4, max_rounds=8,
                       ci_target=0.02, budget_s=5, refresh_inputs=False)
    t = measure(sleeper(4.0), sleeper(2.0), [[]], cfg, "cpu")
    assert t.clock == "perf-counter" and 4 <= t.rounds <= 8
    assert 1.7 < t.speedup < 2.3 and t.ci_low <= t.speedup <= t.ci_high
    assert 3.8 < t.ref_ms < 6 and 1.8 < t.cand_ms < 4
    assert t.ref_host_ms > 3.5 and len(t.ref_rounds_ms) == t.rounds


def test_throttled_rounds_are_dropped_and_counted():
    cfg = TimingConfig(warmup_calls=1, warmup_ms=0, samples_per_round=1, min_rounds=3, max_rounds=6,
                       ci_target=0.0, budget_s=60, refresh_inputs=False)
    pattern = itertools.cycle([False, True])       # every second round "throttled"
    t = measure(sleeper(1.0), sleeper(1.0), [[]], cfg, "cpu", throttled=lambda: next(pattern))
    assert t.throttled_rounds == 3 and t.rounds == 3 and t.stop_reason == "max-rounds" and not t.throttled_kept


def test_a_kernel_at_the_power_cap_throughout_keeps_its_paired_rounds():
    cfg = TimingConfig(warmup_calls=1, warmup_ms=0, samples_per_round=1, min_rounds=3, max_rounds=6,
                       ci_target=0.0, budget_s=60, refresh_inputs=False)
    t = measure(sleeper(1.0), sleeper(1.0), [[]], cfg, "cpu", throttled=lambda: True)
    assert t.throttled_rounds == 6 and t.rounds == 6 and t.throttled_kept


def test_refresh_changes_contents_in_place_but_keeps_values():
    import torch
    x, idx = torch.arange(6.0).reshape(3, 2), torch.tensor([2, 0, 1])
    ptr = x.data_ptr()
    refresh_contents([x, idx])
    assert x.data_ptr() == ptr and not torch.equal(x, torch.arange(6.0).reshape(3, 2))
    assert sorted(x.flatten().tolist()) == list(range(6)) and idx.tolist() == [2, 0, 1]


def test_calibrate_then_roofline_and_compile_baseline(kbench, tmp_path):
    ceilings = tmp_path / "ceilings"
    proc = kbench("calibrate", "--device", "cpu", "--set", f"paths.ceilings={ceilings}", config=None)
    assert proc.returncode == 0, proc.stderr
    saved = json.loads(next(ceilings.glob("*.json")).read_text())
    assert saved["copy_gbps"] > 0 and saved["matmul_tflops"]["float32"] > 0
    code, doc = kbench.json("check", "cpu/4", "--set", f"paths.ceilings={ceilings}", "--baselines", "eager,compile")
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
