"""One line per job of a kbench --json document: status, flags, the candidate's own time against the
witness (per call), the hand-over, batch size, speedup. For reading witness margins on a GPU run."""
import json
import sys

for path in sys.argv[1:]:
    for r in json.load(open(path))["results"]:
        t = r["timing"]
        f = lambda x: "-" if x is None else f"{x:.4f}"  # noqa: E731
        print(f"{r['problem'][:28]:28} {r['candidate'][:24]:24} {r['status']:12} "
              f"{','.join(x['name'] for x in r['flags']) or '-':28} R {f(t['cand_ms'])} W {f(t['cand_host_ms'])} "
              f"H {f(t.get('handover_ms'))} sd {f(t.get('handover_spread_ms'))} B {t.get('batch')} "
              f"x {f(t['speedup'])} job {r['phases'].get('job_s')} {r['message'][:90]}")
