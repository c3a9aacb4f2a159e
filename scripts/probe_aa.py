"""Where the A/A residual comes from (issue 15): after session 18's fix, the reference timed against itself
through the pipeline still read ~1.02x on memory-bound problems (the candidate process's copy faster) and
1.000x on L2/56 (a GEMM). This times one problem's reference the way the judge times each side, in variants
that differ from the reference's way by one thing at a time, interleaved round by round in random order:

  judge-drop   this process, its own input lanes, each output freed at once   (how the judge times a reference)
  judge-keep   this process, its own lanes, every output of the batch kept     (the candidate keeps them)
  judge-gap    as judge-drop, after a message's round trip to the second process between the idle device and
               the batch (the hand-over's gap without its context switch)
  judge-lead   as judge-drop, the batch started by an untimed spin of LEAD cycles (how the judge times a
               reference since session 19: the host queues the first call while the device spins)
  child-own    a second process, lanes it allocated itself, outputs kept
  child-ipc    a second process, lanes this process allocated and shared by CUDA IPC, outputs kept
               (how a candidate is timed: the judge's lanes, mapped once)
  child-lead   as child-ipc, started by the same spin (kbench's candidate loop has none: a spin there
               leaves the other SMs to work launched ahead on a side stream)

Every batch: L2 flushed and the device idle first (by this process, also for the child's), then the calls
back to back with a flush between, each between two events; the batch's mean per call, and apart from it the
first call's time and the mean of the others (a cost per batch sits in the first call). No kbench code is
used, so a difference here is the device's or torch's, not the harness's.

    python3 scripts/probe_aa.py level1/8_Transpose level1/5_RMSNorm --rounds 30 --out probe-aa.json
"""
from __future__ import annotations

import argparse
import importlib.util
import json
import math
import random
import statistics
import sys
from pathlib import Path

import torch
import torch.multiprocessing as mp

VARIANTS = ("judge-drop", "judge-keep", "judge-gap", "judge-lead", "child-own", "child-ipc", "child-lead")
LEAD = 1 << 19      # the judge's untimed lead spin, in cycles (kernelbench_cli/judge/sides.py LEAD_SPIN)


def load(problem: str):
    path = Path(problem)
    if not path.exists():
        path = Path("problems") / f"{problem}.py"
    spec = importlib.util.spec_from_file_location("probe_problem", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def model_of(mod):
    torch.manual_seed(0)
    return mod.Model(*mod.get_init_inputs()).cuda().eval()


def flush_buffer():
    l2 = torch.cuda.get_device_properties(0).L2_cache_size
    return torch.empty(2 * l2, dtype=torch.uint8, device="cuda")


def batch(model, lanes, flush, keep: bool, lead: bool = False) -> list[float]:
    events, kept = [], []
    if lead:
        torch.cuda._sleep(LEAD)
    with torch.no_grad():
        for k, lane in enumerate(lanes):
            if k:
                flush.zero_()
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            out = model(*lane)
            end.record()
            events.append((start, end))
            if keep:
                kept.append(out)
            del out
    torch.cuda.synchronize()
    return [a.elapsed_time(b) for a, b in events]


def child(problem: str, shared, n: int, conn) -> None:
    model = model_of(load(problem))
    own = [[x.clone() for x in lane] for lane in shared]
    flush = flush_buffer()
    torch.cuda.synchronize()
    conn.send("ready")
    while True:
        what = conn.recv()
        if what is None:
            return
        if what == "nothing":
            conn.send(None)
            continue
        conn.send(batch(model, own if what == "child-own" else shared, flush, keep=True, lead=what == "child-lead"))


def calls_per_batch(model, template: list, batch_ms: float) -> int:
    """Calls for batch_ms of work (4 to 64), from one warm call's time, as the judge sizes a batch."""
    with torch.no_grad():
        for _ in range(3):
            model(*template)
        torch.cuda.synchronize()
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        model(*template)
        end.record()
        torch.cuda.synchronize()
    return max(4, min(64, math.ceil(batch_ms / max(start.elapsed_time(end), 1e-3))))


def probe(problem: str, rounds: int, batch_ms: float) -> dict:
    mod = load(problem)
    model = model_of(mod)
    torch.manual_seed(1)
    template = [x.cuda() for x in mod.get_inputs()]
    n = calls_per_batch(model, template, batch_ms)
    lanes = [[x.clone() for x in template] for _ in range(n)]
    shared = [[x.clone() for x in template] for _ in range(n)]
    flush = flush_buffer()
    ctx = mp.get_context("spawn")
    mine, theirs = ctx.Pipe()
    proc = ctx.Process(target=child, args=(problem, shared, n, theirs), daemon=True)
    proc.start()
    assert mine.recv() == "ready"
    times = {v: [] for v in VARIANTS}
    order = list(VARIANTS)
    try:
        for r in range(rounds + 2):                  # two warm-up rounds, not counted
            random.shuffle(order)
            for v in order:
                flush.zero_()
                torch.cuda.synchronize()
                if v == "judge-gap":
                    mine.send("nothing")
                    mine.recv()
                if v.startswith("judge"):
                    ms = batch(model, lanes, flush, keep=v == "judge-keep", lead=v == "judge-lead")
                else:
                    mine.send(v)
                    ms = mine.recv()
                if r >= 2:
                    times[v].append(ms)
    finally:
        mine.send(None)
        proc.join(10)
    def mean(xs):
        return sum(xs) / len(xs)
    base = statistics.median(mean(b) for b in times["judge-drop"])
    base_rest = statistics.median(mean(b[1:]) for b in times["judge-drop"])
    out = {"problem": problem, "calls_per_batch": n, "rounds": rounds, "variants": {}}
    for v in VARIANTS:
        xs = sorted(mean(b) for b in times[v])
        med = statistics.median(xs)
        rest = statistics.median(mean(b[1:]) for b in times[v])
        out["variants"][v] = {"median_ms": med, "q1_ms": xs[len(xs) // 4], "q3_ms": xs[(3 * len(xs)) // 4],
                              "first_call_ms": statistics.median(b[0] for b in times[v]), "others_ms": rest,
                              "judge_drop_over_this": base / med, "others_judge_drop_over_this": base_rest / rest}
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("problems", nargs="+")
    ap.add_argument("--rounds", type=int, default=30)
    ap.add_argument("--batch-ms", type=float, default=8.0)
    ap.add_argument("--out", type=Path)
    args = ap.parse_args()
    if not torch.cuda.is_available():
        print("probe_aa: needs a CUDA device", file=sys.stderr)
        return 2
    results = []
    for p in args.problems:
        res = probe(p, args.rounds, args.batch_ms)
        results.append(res)
        print(f"{p}: {res['calls_per_batch']} calls a batch, {res['rounds']} rounds")
        for v, s in res["variants"].items():
            print(f"  {v:11s} {s['median_ms']:.4f} ms [{s['q1_ms']:.4f}, {s['q3_ms']:.4f}]  "
                  f"judge-drop / this {s['judge_drop_over_this']:.4f}   first call {s['first_call_ms']:.4f} ms, "
                  f"others {s['others_ms']:.4f} ms ({s['others_judge_drop_over_this']:.4f})")
        if args.out:
            args.out.write_text(json.dumps(results, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
