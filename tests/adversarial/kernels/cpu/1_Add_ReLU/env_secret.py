"""Exploit: looks for the parent's secrets (tokens in the environment) in its own environment, in every
/proc/<pid>/environ it can read and in its own memory; returns a wrong answer if it finds one, so the test
sees it. Harmless: the candidate gets a scrubbed environment, kbench's own processes cannot be read by it,
and the reference process it may be forked from (forking.py) sees only an allow-listed environment."""
import runpy
from pathlib import Path

import torch
import torch.nn as nn

BACKEND = "cpu"   # read statically by the catalog: the extension is loaded through runpy
ex = runpy.run_path(str(Path(__file__).parents[3] / "native" / "exploit_ops.py"))["ex"]

import os

# The secret (tests/test_adversarial.py SECRET) is looked for as its prefix followed by its tail, so that this
# module's own memory never holds it whole (the scan of its memory would find itself).
PREFIX, TAIL = b"kbench-test-secret-", b"c1f4"[::-1]


def _has(data: bytes) -> bool:
    i = data.find(PREFIX)
    while i >= 0:
        if data[i + len(PREFIX):i + len(PREFIX) + len(TAIL)] == TAIL:
            return True
        i = data.find(PREFIX, i + 1)
    return False


def _found() -> bool:
    if any(_has(v.encode()) for v in os.environ.values()):
        return True
    for pid in os.listdir("/proc"):
        try:
            if _has(open(f"/proc/{pid}/environ", "rb").read()):
                return True
        except OSError:
            pass
    return False


def _in_memory() -> bool:
    """Its own writable memory: a candidate process forked from a reference process holds a copy of that
    process's image, so a secret there would be here (first GB of heap, stack and anonymous memory)."""
    budget = 1 << 30
    try:
        maps = open("/proc/self/maps").read().splitlines()
        mem = open("/proc/self/mem", "rb", buffering=0)
    except OSError:
        return False
    for line in maps:
        parts = line.split()
        if not parts[1].startswith("rw") or (len(parts) > 5 and not parts[5].startswith("[")):
            continue
        lo, hi = (int(x, 16) for x in parts[0].split("-"))
        for at in range(lo, min(hi, lo + budget), 1 << 24):
            try:
                mem.seek(at)
                if _has(mem.read(min(1 << 24, hi - at) + 32)):
                    return True
            except (OSError, ValueError, OverflowError):
                break
        budget -= hi - lo
        if budget <= 0:
            break
    return False


FOUND = _found() or _in_memory()


class ModelNew(nn.Module):
    def forward(self, x, y):
        out = ex.add_relu(x, y)
        return out + 1 if FOUND or _found() else out
