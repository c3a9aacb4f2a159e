"""The clock canary per record (CUDA): its median time before the candidate's import per length, and the spread
of after/before ratios in the timed batches (evidence.check_canary flags a median under 0.5).
    python3 scripts/canary_table.py RESULTS.jsonl...   (or folders holding results.jsonl files)"""
import json
import sys
from pathlib import Path


def rows(paths):
    for p in map(Path, paths):
        for f in sorted(p.rglob("results.jsonl")) if p.is_dir() else [p]:
            for line in f.read_text().splitlines():
                r = json.loads(line) if line.strip() else {}
                c = r.get("timing", {}).get("canary_ms")
                if c and c.get("before") and c.get("after"):
                    yield f, r, c


def main(paths) -> None:
    for f, r, c in rows(paths):
        by: dict = {}
        for k, ms in c["before"]:
            by.setdefault(k, []).append(ms)
        base = {k: sorted(v)[len(v) // 2] for k, v in by.items()}
        ratios = sorted(ms / base[k] for k, ms in c["after"] if base.get(k, 0) > 0)
        if not ratios:
            continue
        us = " ".join(f"{base[k] * 1e3:6.1f}" for k in sorted(base))
        print(f"{r['problem'][:28]:29s}{r['candidate'][:26]:27s}{r['status']:10s} before (us) {us}  after/before "
              f"min {ratios[0]:5.2f} median {ratios[len(ratios) // 2]:5.2f} max {ratios[-1]:5.2f} (n {len(ratios)})")


if __name__ == "__main__":
    main(sys.argv[1:] or ["."])
