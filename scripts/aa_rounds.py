"""Round by round, where an A/A job's (or any job's) speedup comes from: the reference's batch mean, the
candidate's own clock (claimed / calls), the witness (wall / calls), and whether the witness's pricing
(integrity.witnessed_per_call) replaced the candidate's figure. Then the speedup three ways: as kbench
reported it, from the candidate's own clock alone, and without the priced rounds.

    python3 scripts/aa_rounds.py RESULT.json [--rounds]     (the --json output of calibrate-noise, check or bench)
"""
from __future__ import annotations

import json
import math
import statistics
import sys

from kernelbench_cli.integrity import price_allowance


def geomean(xs: list[float]) -> float:
    return math.exp(sum(math.log(x) for x in xs) / len(xs)) if xs else float("nan")


def one(r: dict, show_rounds: bool) -> None:
    t = r.get("timing") or {}
    ref, cand, wb = t.get("ref_rounds_ms") or [], t.get("cand_rounds_ms") or [], t.get("witness_batches") or []
    if not ref or len(wb) < len(ref):
        print(f"{r['problem']}: no per-round data ({r.get('status')})")
        return
    if t.get("throttled_rounds"):
        print(f"  ({t['throttled_rounds']} throttled round(s): rounds may not line up with batches)")
    ho, sp = t.get("handover_ms") or 0.0, t.get("handover_spread_ms") or 0.0
    allowance = price_allowance(ho, sp)
    fr = t.get("first_rest_ms") or {}
    rows = []
    for k, (a, b) in enumerate(zip(ref, cand)):
        claimed, wall, n = wb[k]
        own = claimed / n
        excess = wall - ho - claimed
        rf = (fr.get("ref") or [])[k] if k < len(fr.get("ref") or []) else [None, None]
        cf = (fr.get("cand") or [])[k] if k < len(fr.get("cand") or []) else [None, None]
        rows.append(dict(ref=a, cand=b, own=own, wall=wall / n, excess=excess, priced=b > own * 1.0001,
                         ref_first=rf[0], ref_rest=rf[1], cand_first=cf[0], cand_rest=cf[1],
                         ref_lead=rf[2] if len(rf) > 2 else None))      # (since session 30)
    print(f"{r['problem']} :: {r.get('candidate', '')}: batch {t.get('batch')}, hand-over {ho:.3f} ms "
          f"(spread {sp:.3f}), allowance {allowance:.3f} ms per batch, {len(rows)} rounds, stop {t.get('stop_reason')}")
    if show_rounds:
        print(f"  {'k':>3s} {'ref ms':>9s} {'cand ms':>9s} {'own ms':>9s} {'wall/n':>9s} {'excess':>8s} priced ratio"
              "   ref first/rest    cand first/rest")
        f = lambda v: f"{v:8.4f}" if v is not None else "       -"
        for k, x in enumerate(rows):
            print(f"  {k:3d} {x['ref']:9.4f} {x['cand']:9.4f} {x['own']:9.4f} {x['wall']:9.4f} {x['excess']:8.3f} "
                  f"{'yes' if x['priced'] else '   ':>6s} {x['ref'] / x['cand']:.4f} {f(x['ref_first'])} {f(x['ref_rest'])}"
                  f" {f(x['cand_first'])} {f(x['cand_rest'])}")
    as_reported = geomean([x["ref"] / x["cand"] for x in rows])
    own = geomean([x["ref"] / x["own"] for x in rows])
    clean = [x for x in rows if not x["priced"]]
    excess = [x["excess"] for x in rows]
    if all(x["ref_rest"] is not None and x["cand_rest"] is not None for x in rows):
        print(f"  first call over the rest, median: ref {statistics.median(x['ref_first'] - x['ref_rest'] for x in rows):+.4f} ms, "
              f"cand {statistics.median(x['cand_first'] - x['cand_rest'] for x in rows):+.4f} ms; speedup from the rest only "
              f"{geomean([x['ref_rest'] / x['cand_rest'] for x in rows]):.4f}"
              + (f"; the reference's host from its lead to its first call queued, median "
                 f"{statistics.median(x['ref_lead'] for x in rows):.3f} ms, max {max(x['ref_lead'] for x in rows):.3f}"
                 if all(x["ref_lead"] is not None for x in rows) else ""))
    fl = t.get("flush_ms") or {}
    if fl.get("allow") is not None:     # judge/flush.py: a flush's time alone, its allowance, what each side paid
        paid = {side: [b[2] for b in fl.get(side, []) if b] for side in ("ref", "cand")}
        print(f"  flush alone {fl['alone'][0]:.4f} ms (sd {fl['alone'][1]:.4f}), allowed {fl['allow']:.4f}; charged per "
              "batch, median/max: " + ", ".join(f"{side} {statistics.median(v):.4f}/{max(v):.4f}" for side, v in
                                                 paid.items() if v) + f"; retimed batches {t.get('retimed_batches', 0)}")
    print(f"  speedup as reported {as_reported:.4f} (kbench {t.get('speedup'):.4f}); own clock only {own:.4f}; "
          f"without the {len(rows) - len(clean)} priced round(s) {geomean([x['ref'] / x['cand'] for x in clean]):.4f}")
    diag = t.get("batch_diag_ms") or {}
    if diag.get("ping") and diag.get("cand"):
        names = ("witness", "claimed", "excess", "freeze", "probe", "dev span", "span-claimed", "host queued",
                 "delivered", "synced", "witness-synced")

        def cols(rows):
            out = []
            for x in rows:      # [witness, claimed, freeze, probe, *said] since session 30; before, no freeze, probe
                w, c, *rest = x
                judge, said = (rest[:2], rest[2:]) if len(rest) in (2, 6) else ([None, None], rest)
                more = [said[0], said[0] - c, *said[1:], w - said[3]] if len(said) == 4 else [None] * 6
                out.append([w, c, w - c, *judge, *more])
            return [statistics.median(v for v in col if v is not None) if any(v is not None for v in col) else None
                    for col in zip(*out)]
        print("  batch, median ms   " + " ".join(f"{n:>12s}" for n in names))
        for label, row in (("ping (stand-in)", cols(diag["ping"][1:])), ("timed (candidate)", cols(diag["cand"]))):
            print(f"  {label:19s}" + " ".join(f"{v:12.4f}" if v is not None else f"{'-':>12s}" for v in row))
    print(f"  per-round spread (stdev/mean): ref {statistics.pstdev(ref) / statistics.mean(ref):.4f}, "
          f"own {statistics.pstdev([x['own'] for x in rows]) / statistics.mean([x['own'] for x in rows]):.4f}, "
          f"cand {statistics.pstdev(cand) / statistics.mean(cand):.4f}; excess per batch median "
          f"{statistics.median(excess):.3f} ms, max {max(excess):.3f}")


def main(path: str, show_rounds: bool) -> None:
    doc = json.load(open(path))
    for r in doc.get("results", [doc] if "timing" in doc else []):
        one(r, show_rounds)


if __name__ == "__main__":
    main(sys.argv[1], "--rounds" in sys.argv[2:])
