"""`kbench report BASE NEW`: one row per job of either run, judged by the CI gate's own rule (gate/baseline.py
compare_job), so the report and `kbench compare` always agree; as a terminal table here, as a page in html.py."""
from __future__ import annotations

from rich import box
from rich.table import Table

from ..results import Result


def _x(v: float | None, digits: int = 2) -> str:
    return "-" if v is None else f"{v:.{digits}f}×"


def compare_rows(base: list[Result], new: list[Result], tau: float = 0.05) -> list[dict]:
    """One row per job id in either run (base order first): both speedups, their ratio, what changed, by the
    CI gate's own rule (baseline.compare_job), so `kbench report BASE NEW` and `kbench compare` agree."""
    from ..gate import baseline as B
    bs, ns = B.snapshot_from_results(base, "base"), B.snapshot_from_results(new, "new")
    comps = {c.job: c for c in B.compare_snapshots(bs, ns, tau)}
    order = list(bs.jobs) + [j for j in ns.jobs if j not in bs.jobs]
    rows = []
    for job in order:
        c = comps[job]
        rb, rn = c.base, c.new
        change = {B.NEW: "added", B.MISSING: "removed", B.INCONCLUSIVE: "inconclusive"}.get(c.verdict)
        if change is None and c.verdict == B.REGRESSED:
            change = "slower" if rn.correct else "broke"
        elif change is None and c.verdict == B.IMPROVED:
            change = "faster" if rb.correct else "fixed"
        elif change is None:
            change = "same" if rn.correct else "still failing"
        rows.append({"job": job, "base_status": rb.status if rb else None, "new_status": rn.status if rn else None,
                     "base_speedup": rb.speedup if rb else None, "new_speedup": rn.speedup if rn else None,
                     "ratio": c.ratio, "change": change, "reason": c.reason})
    return rows


def compare_table(base: list[Result], new: list[Result], base_name: str, new_name: str) -> Table:
    t = Table(title=f"compare {base_name} → {new_name}", title_justify="left", box=box.SIMPLE_HEAD, pad_edge=False)
    for col, kw in (("job", {"overflow": "fold"}), ("status", {}), ("base", {"justify": "right"}),
                    ("new", {"justify": "right"}), ("new/base", {"justify": "right"}), ("change", {})):
        t.add_column(col, **kw)
    style = {"faster": "green", "fixed": "green", "slower": "red", "broke": "red", "still failing": "magenta"}
    for row in compare_rows(base, new):
        status = row["base_status"] if row["base_status"] == row["new_status"] else \
            f"{row['base_status'] or '-'} → {row['new_status'] or '-'}"
        t.add_row(row["job"], status, _x(row["base_speedup"]), _x(row["new_speedup"]), _x(row["ratio"]),
                  f"[{style.get(row['change'], 'dim')}]{row['change']}[/]")
    return t
