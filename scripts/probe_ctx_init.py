"""Does another process bringing CUDA up disturb a job being timed on the same GPU? (issue 15: a held reference
process waits for its turn before touching the device; could it at least initialise the driver, or create its
context, beside another problem's timed job?)

This process times a memory-bound kernel in batches the way kbench does (events around each call, L2 not
flushed: the kernel's own footprint is 4x L2), with a monotonic host timestamp per batch. Meanwhile fresh
python processes, torch imported before they are told to go, do one of:
  cuinit   the driver's cuInit(0) alone (no context)
  context  cuInit and the primary context (torch.zeros(1, device="cuda"), synchronised)
and say how long each took. Batches are then split into those that overlap a child's window and the rest.
No kbench code.

    python3 scripts/probe_ctx_init.py [--children 8] [--mb 256] [--out probe-ctx.json]
"""
from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import threading
import time

import torch

CHILD = r"""
import ctypes, json, sys, time
import torch
mode = sys.argv[1]
sys.stdout.write("ready\n"); sys.stdout.flush()
sys.stdin.readline()
t0 = time.monotonic()
lib = ctypes.CDLL("libcuda.so.1")
rc = lib.cuInit(0)
t1 = time.monotonic()
if mode == "context":
    torch.zeros(1, device="cuda"); torch.cuda.synchronize()
t2 = time.monotonic()
print(json.dumps({"mode": mode, "rc": rc, "start": t0, "cuinit_s": t1 - t0, "end": t2, "context_s": t2 - t1}))
"""


def children(n: int, gap_s: float, out: list) -> None:
    time.sleep(1.5)         # a baseline before the first
    for k in range(n):
        mode = ("cuinit", "context")[k % 2]
        p = subprocess.Popen([sys.executable, "-c", CHILD, mode], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                             text=True)
        p.stdout.readline()                 # torch imported: only the CUDA part is in the window
        time.sleep(gap_s)
        p.stdin.write("go\n")
        p.stdin.flush()
        line = p.stdout.readline()
        p.wait()
        out.append(json.loads(line))
        time.sleep(gap_s)


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--children", type=int, default=8)
    ap.add_argument("--mb", type=int, default=256, help="the timed kernel's buffer (read + written)")
    ap.add_argument("--calls", type=int, default=16, help="calls per timed batch")
    ap.add_argument("--gap", type=float, default=0.6, help="seconds between children's windows")
    ap.add_argument("--out")
    a = ap.parse_args()
    x = torch.randn(a.mb << 18, device="cuda")
    y = torch.empty_like(x)
    for _ in range(20):
        torch.mul(x, 2.0, out=y)
    torch.cuda.synchronize()
    got: list = []
    th = threading.Thread(target=children, args=(a.children, a.gap, got), daemon=True)
    th.start()
    batches = []
    while th.is_alive():
        ev = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)) for _ in range(a.calls)]
        t0 = time.monotonic()
        for s, e in ev:
            s.record()
            torch.mul(x, 2.0, out=y)
            e.record()
        torch.cuda.synchronize()
        t1 = time.monotonic()
        each = [s.elapsed_time(e) for s, e in ev]
        batches.append({"t0": t0, "t1": t1, "mean": sum(each) / len(each), "max": max(each)})
    doc = {"gpu": torch.cuda.get_device_name(), "mb": a.mb, "children": got, "classes": {}}
    print(f"{doc['gpu']}: {len(batches)} batches of {a.calls} calls of a {a.mb} MB multiply")
    for mode in ("none", "cuinit", "context"):
        wins = [(c["start"], c["end"]) for c in got if c["mode"] == mode]

        def inside(b, wins=wins):
            return any(b["t0"] < e and b["t1"] > s for s, e in wins)
        if mode == "none":
            sel = [b for b in batches if not any(b["t0"] < c["end"] + 0.05 and b["t1"] > c["start"] - 0.05 for c in got)]
        else:
            sel = [b for b in batches if inside(b)]
        if not sel:
            continue
        means = [b["mean"] for b in sel]
        row = {"batches": len(sel), "median_ms": statistics.median(means), "max_batch_ms": max(means),
               "max_call_ms": max(b["max"] for b in sel)}
        if mode != "none":
            row["cuinit_s"] = statistics.median(c["cuinit_s"] for c in got if c["mode"] == mode)
            row["context_s"] = statistics.median(c["context_s"] for c in got if c["mode"] == mode)
        doc["classes"][mode] = row
        print(f"  {mode:8s} " + ", ".join(f"{k} {v:.4f}" if isinstance(v, float) else f"{k} {v}" for k, v in row.items()))
    base = doc["classes"].get("none", {}).get("median_ms")
    for mode in ("cuinit", "context"):
        if base and mode in doc["classes"]:
            c = doc["classes"][mode]
            print(f"  {mode}: batch median {c['median_ms'] / base:.4f}x, worst batch {c['max_batch_ms'] / base:.4f}x, "
                  f"worst call {c['max_call_ms'] / base:.4f}x the undisturbed median")
    if a.out:
        with open(a.out, "w") as f:
            json.dump(doc, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
