"""CPU jobs: the cores of a slot, and each intra-op thread of a timed process on a core of its own.

Why (session 27): the 2-vCPU box that CI and the CPU path run on has a guest scheduler that packs little-used
threads onto fewer vCPUs. A candidate process thawed after its frozen wait had both intra-op threads on one
vCPU for the 50-100 ms that load tracking takes to catch up, so its calls ran at half speed: relu(x + y) on 4M
floats took 6 ms against 3.3 ms in the judge, whose input fills keep its threads busy. The CPU A/A read
0.44-0.70, so every CPU speedup was understated by that much. Threads on cores of their own cannot be packed.

OMP_PROC_BIND would place them, but libgomp then creates each thread with an affinity: the creator calls
sched_setaffinity with the new thread's id, which the candidate's seccomp filter refuses, since it is another
thread's id (sandbox._self_only). A candidate that started a larger team after confine() would die with
"libgomp: Thread creation failed". So kbench pins the threads it sees working in a parallel region: the
candidate process does it before confine() and keeps it, and the judge does it when its problem is loaded.
Threads started later inherit their creator's core. That can slow only the process that starts them.

KBENCH_CPUS names a slot's cores (orchestrate/local.py make_slots). Every kbench process takes them back at
start (take_slot), because a process exec'd by a pinned thread would otherwise inherit that thread's single
core, and libgomp and torch size their pools from the mask they start with."""
from __future__ import annotations

import ctypes
import os
import re
import threading
import time
from pathlib import Path

ENV = "KBENCH_CPUS"


def _by_core(cpus: list[int]) -> list[int]:
    """One logical CPU of each core first, then their siblings: n threads on the first n land on n cores."""
    def key(c: int) -> tuple:
        try:
            siblings = sorted(int(s) for s in _expand((Path(f"/sys/devices/system/cpu/cpu{c}/topology/"
                                                            "thread_siblings_list")).read_text()))
            return siblings.index(c), c
        except (OSError, ValueError):
            return 0, c
    return sorted(cpus, key=key)


def _expand(spec: str) -> list[int]:
    out = []
    for part in spec.strip().split(","):
        if part:
            a, _, b = part.partition("-")
            out += range(int(a), int(b or a) + 1)
    return out


def allowed() -> list[int]:
    return _by_core(sorted(os.sched_getaffinity(0)))


def slot_cpus(n: int) -> list[list[int]]:
    """The allowed CPUs split into n slots (whole cores where there are enough; at least one CPU each)."""
    cpus = allowed()
    if n >= len(cpus):
        return [[cpus[i % len(cpus)]] for i in range(n)]
    size = len(cpus) // n
    return [sorted(cpus[i * size:(i + 1) * size]) for i in range(n)]


def slot() -> list[int]:
    """This process's slot's cores (KBENCH_CPUS; none if unnamed)."""
    try:
        return _expand(os.environ.get(ENV, ""))
    except ValueError:
        return []


def take_slot() -> None:
    """At a kbench process's start, before torch: this process on its slot's cores (KBENCH_CPUS); with none
    named, the cores it has now are named for the processes it starts."""
    mine = slot()
    if not mine:
        os.environ[ENV] = ",".join(map(str, sorted(os.sched_getaffinity(0))))
        return
    try:
        os.sched_setaffinity(0, mine)
    except OSError:
        pass        # (cores not ours here: keep the mask inherited)


def _runtimes() -> dict[int, int]:
    out = {}
    for tid in os.listdir("/proc/self/task"):
        try:
            out[int(tid)] = int(Path(f"/proc/self/task/{tid}/schedstat").read_text().split()[0])
        except (OSError, ValueError, IndexError):
            pass
    return out


def pin_pool(torch) -> list[tuple[int, int]]:
    """Each thread of this thread's intra-op team on a core of its own, where the team fills its slot; returns
    [(thread id, cpu)]. The team is the threads that run during a few parallel passes of 4M floats. Their
    creation order is unknown, so they are found by their run time (/proc/self/task/*/schedstat), not from a
    list diffed around pool start."""
    cpus = _by_core(slot() or sorted(os.sched_getaffinity(0)))
    me = threading.get_native_id()
    team = [me]
    if torch.get_num_threads() > 1 and len(cpus) > 1:
        x = torch.ones(1 << 22)
        x.mul_(1.0)                  # the team exists before the window
        before, t0 = _runtimes(), time.perf_counter()
        while time.perf_counter() - t0 < 0.01:
            x.mul_(1.0)
        after = _runtimes()
        ran = {t: after[t] - before.get(t, 0) for t in after}
        least = 0.2 * ran.get(me, 0)  # a worker shares the passes; a sleeping thread runs ~0
        team += sorted(t for t, ns in ran.items() if t != me and ns > least)
    if len(team) < len(cpus):
        # A team smaller than its slot is left to the scheduler. Pinned to the slot's first cores, every
        # kbench run beside it (pytest-xdist on the 16-core GPU host, a user's second terminal) would pin there
        # too; a team of one cannot be packed anyway.
        return []
    pinned = []
    for k, tid in enumerate(team):
        cpu = cpus[k % len(cpus)]
        try:
            os.sched_setaffinity(tid, {cpu})
            pinned.append((tid, cpu))
        except OSError:
            pass
    return pinned


def team_waker(torch):
    """A parallel region of the team's own (libgomp's GOMP_parallel, each thread calling free(NULL)), bound now:
    the candidate process runs it before each timed call. The judge's reference calls each follow an input fill
    that keeps its team awake; the candidate's first call followed a frozen wait, and paid for waking its team
    (a halted vCPU) on its own clock. Not a torch op: that goes through the dispatcher, where candidate code
    can register a kernel of its own and work off its clock right before each call (session 34's red team:
    `aten::fill_`, then a TorchDispatchMode). Without libgomp (a torch built on its native pool), a fill."""
    gomp = next((line.split(maxsplit=5)[5].strip() for line in Path("/proc/self/maps").read_text().splitlines()
                 if len(line.split(maxsplit=5)) == 6 and re.search(r"/libgomp[\w.-]*\.so", line)), None)
    if gomp is None:
        scratch = torch.empty(1 << 15 << max(1, torch.get_num_threads()).bit_length())
        return lambda: scratch.fill_(0.0)
    run = ctypes.CDLL(gomp).GOMP_parallel
    run.argtypes, run.restype = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_uint, ctypes.c_uint], None
    free = ctypes.cast(ctypes.CDLL(None).free, ctypes.c_void_p)
    return lambda: run(free, None, 0, 0)
