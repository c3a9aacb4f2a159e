"""CPU jobs: a slot's cores, and every intra-op thread of a timed process on a core of its own (kernelbench_cli/cpus.py).
Real processes: the pinning is read back from /proc, and the confined process is the candidate's seccomp filter."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from kernelbench_cli import cpus
from kernelbench_cli.config import load_config
from kernelbench_cli.orchestrate.judges import reference_env
from kernelbench_cli.orchestrate.local import make_slots

ROOT = Path(__file__).resolve().parents[1]
TWO_CPUS = pytest.mark.skipif(len(os.sched_getaffinity(0)) < 2, reason="needs two CPUs")


def python(code: str, **env) -> subprocess.CompletedProcess:
    full = {k: v for k, v in os.environ.items() if not k.startswith(("OMP_", "KBENCH_"))}
    full.update(PYTHONPATH=str(ROOT), **env)
    return subprocess.run([sys.executable, "-c", code], env=full, capture_output=True, text=True, timeout=120)


AFFINITY = """
def affinity(tid):
    text = open(f"/proc/self/task/{tid}/status").read()
    return text.split("Cpus_allowed_list:")[1].split()[0]
"""


@TWO_CPUS
def test_each_thread_of_a_team_that_fills_its_slot_gets_a_core_of_its_own():
    slot = sorted(os.sched_getaffinity(0))[:2]
    r = python(AFFINITY + """
import json, threading, torch
from kernelbench_cli import cpus
cpus.take_slot()
torch.set_num_threads(2)
pinned = cpus.pin_pool(torch)
torch.set_num_threads(1)
print(json.dumps({"pinned": pinned, "main": threading.get_native_id(), "alone": cpus.pin_pool(torch),
                  "affinity": {t: affinity(t) for t, _ in pinned}}))
""", KBENCH_CPUS=",".join(map(str, slot)))
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    tids = [t for t, _ in out["pinned"]]
    cores = [c for _, c in out["pinned"]]
    assert len(tids) == 2 and tids[0] == out["main"]          # the caller and its one worker, not idle threads
    assert sorted(cores) == slot
    assert [out["affinity"][str(t)] for t in tids] == [str(c) for c in cores]
    assert out["alone"] == []       # a team smaller than its slot stays where the scheduler puts it


@TWO_CPUS
def test_a_process_started_by_a_pinned_thread_takes_its_slot_back():
    first = sorted(os.sched_getaffinity(0))
    r = python(f"""
import os, subprocess, sys
os.sched_setaffinity(0, {{{first[0]}}})         # as the judge's main thread is once its problem is loaded
child = "from kernelbench_cli import cpus; cpus.take_slot(); import os; print(sorted(os.sched_getaffinity(0)))"
print(subprocess.run([sys.executable, "-c", child], capture_output=True, text=True).stdout.strip())
""", KBENCH_CPUS=",".join(map(str, first)))
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == str(first)


def test_a_confined_process_may_still_start_a_larger_team(monkeypatch):
    """kbench pins, not libgomp: with OMP_PROC_BIND libgomp gives each new thread an affinity from its creator,
    which the candidate's filter refuses (another thread's id), and kills the process. A confined candidate that
    grows its team after pinning must go on, in the environment a reference process (and its candidates) gets
    from a parent where the user set libgomp's binding."""
    monkeypatch.setenv("OMP_PROC_BIND", "true")
    monkeypatch.setenv("OMP_PLACES", "cores")
    env = reference_env(load_config(None), "cpu")
    assert "OMP_PROC_BIND" not in env and "OMP_PLACES" not in env
    r = subprocess.run([sys.executable, "-c", """
import torch
from kernelbench_cli import cpus, sandbox
torch.set_num_threads(1)
cpus.pin_pool(torch)
assert sandbox.confine()
torch.set_num_threads(4)
x = torch.ones(1 << 22)
print(float(x.mul(2).sum()))
"""], env={**env, "PYTHONPATH": str(ROOT)}, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert float(r.stdout.strip()) == 2.0 * (1 << 22)


@TWO_CPUS
def test_cpu_slots_get_cores_of_their_own():
    slots = make_slots(load_config(None, sets=["executor.workers=2"]), "cpu")
    named = [set(map(int, s.env[cpus.ENV].split(","))) for s in slots]
    assert all(named) and not named[0] & named[1]
    assert set().union(*named) <= os.sched_getaffinity(0)
    one = make_slots(load_config(None), "cpu")
    assert set(map(int, one[0].env[cpus.ENV].split(","))) == os.sched_getaffinity(0)
