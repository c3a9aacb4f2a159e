"""One line per job of a kbench --json document: status, flags, the candidate's own time against the
witness (per call), the hand-over, batch size, speedup; from the witnessed batches, the time per call the
witness saw beyond the hand-over and the claim (U: median and mean over batches) and the speedup had every
batch been priced at the witness less the hand-over (xW). For reading witness margins on a GPU run."""
import json
import sys

for path in sys.argv[1:]:
    for r in json.load(open(path))["results"]:
        t = r["timing"]
        f = lambda x: "-" if x is None else f"{x:.4f}"  # noqa: E731
        h, batches = t.get("handover_ms") or 0.0, t.get("witness_batches") or []
        u = sorted((w - h - c) / n for c, w, n in batches)
        um = u[len(u) // 2] if u else None
        mean = sum(w - h - c for c, w, n in batches) / sum(n for c, w, n in batches) if batches else None
        priced = sorted(max(c, w - h) / n for c, w, n in batches)
        xw = t["ref_ms"] / priced[len(priced) // 2] if priced and t.get("ref_ms") else None
        print(f"{r['problem'][:28]:28} {r['candidate'][:24]:24} {r['status']:12} "
              f"{','.join(x['name'] for x in r['flags']) or '-':28} R {f(t['cand_ms'])} W {f(t['cand_host_ms'])} "
              f"H {f(t.get('handover_ms'))} sd {f(t.get('handover_spread_ms'))} B {t.get('batch')} "
              f"x {f(t['speedup'])} U {f(um)}/{f(mean)} xW {f(xw)} nb {len(batches)} job {r['phases'].get('job_s')} {r['message'][:90]}")
