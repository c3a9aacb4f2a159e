"""Outputs of the gate: the terminal table and JSON of its comparisons, a JUnit XML report (one testcase per job)
and a markdown summary table.

Both take the list of baseline.Comparison the gate decided on. A testcase fails when its job `regressed`;
with `strict=True` (a plain `bench` with no baseline, where every job is `new`) a job that is not correct
fails instead, matching bench's exit code. `missing` jobs are reported as skipped.
"""
from __future__ import annotations

import json
import os
import xml.etree.ElementTree as ET
from pathlib import Path

from rich import box
from rich.console import Console
from rich.table import Table

from . import baseline as B


def failure_reason(c: B.Comparison, strict: bool = False) -> str | None:
    if c.verdict == B.REGRESSED:
        return c.reason
    if strict and c.new is not None and not c.new.correct:
        return f"{c.new.status}" + (f": {c.new.message}" if c.new.message else "")
    return None


def _numbers(c: B.Comparison) -> str:
    lines = [f"verdict: {c.verdict}" + (" (after a rerun with more rounds)" if c.rerun else ""),
             f"reason: {c.reason}",
             f"baseline: {fmt_speedup(c.base)}", f"new: {fmt_speedup(c.new)}"]
    if c.ratio is not None:
        lines.append(f"new/base: {fmt_ratio(c)} (95% CI, {c.method})")
    for side, rec in (("baseline", c.base), ("new", c.new)):
        if rec is not None and rec.ref_ms is not None:
            lines.append(f"{side} times: reference {rec.ref_ms:.6g} ms, candidate {rec.cand_ms:.6g} ms, "
                         f"{rec.rounds} rounds")
    return "\n".join(lines)


def junit_xml(comps: list[B.Comparison], suite: str, tau: float, baseline: str = "",
              strict: bool = False) -> str:
    cases, failures, skipped, total_time = [], 0, 0, 0.0
    for c in comps:
        problem, _, candidate = c.job.partition("::")
        wall = c.new.wall_s if c.new is not None else 0.0
        total_time += wall
        case = ET.Element("testcase", classname=problem.replace("/", "."), name=candidate or c.job,
                          time=f"{wall:.3f}")
        reason = failure_reason(c, strict)
        if reason is not None:
            failures += 1
            ET.SubElement(case, "failure", message=f"{c.verdict}: {reason}"[:1000],
                          type=c.verdict).text = _numbers(c)
        elif c.verdict == B.MISSING:
            skipped += 1
            ET.SubElement(case, "skipped", message=c.reason)
        ET.SubElement(case, "system-out").text = _numbers(c)
        cases.append(case)
    attrs = {"name": suite, "tests": str(len(comps)), "failures": str(failures), "errors": "0",
             "skipped": str(skipped), "time": f"{total_time:.3f}"}
    root = ET.Element("testsuites", {k: v for k, v in attrs.items() if k != "skipped"})
    ts = ET.SubElement(root, "testsuite", attrs)
    props = ET.SubElement(ts, "properties")
    for name, value in (("tau", f"{tau:g}"), ("baseline", baseline or "none")):
        ET.SubElement(props, "property", name=name, value=value)
    ts.extend(cases)
    ET.indent(root)
    return '<?xml version="1.0" encoding="utf-8"?>\n' + ET.tostring(root, encoding="unicode") + "\n"


def write_junit(path: Path, comps: list[B.Comparison], suite: str, tau: float, baseline: str = "",
                strict: bool = False) -> None:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(junit_xml(comps, suite, tau, baseline, strict))


def _cell(text: str) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


def markdown(comps: list[B.Comparison], title: str, tau: float, baseline: str = "", strict: bool = False) -> str:
    n = B.counts(comps)
    failed = sum(failure_reason(c, strict) is not None for c in comps)
    head = f"### {title}: {'❌ FAIL' if failed else '✅ pass'}\n\n"
    head += (f"{len(comps)} job(s): " + ", ".join(f"{n[v]} {v}" for v in B.VERDICTS if n[v])
             + f" · τ = {tau:g} · baseline: `{baseline or 'none'}`\n\n")
    rows = ["| job | baseline | new | new/base [95% CI] | verdict | reason |", "|---|---:|---:|---:|---|---|"]
    for c in comps:
        verdict = f"**{c.verdict}**" if failure_reason(c, strict) is not None else c.verdict
        reason = c.reason + (" (after a rerun with more rounds)" if c.rerun else "")
        rows.append("| " + " | ".join(_cell(x) for x in (c.job, fmt_speedup(c.base), fmt_speedup(c.new),
                                                          fmt_ratio(c), verdict, reason)) + " |")
    return head + "\n".join(rows) + "\n"


def write_markdown(path: Path, text: str) -> list[Path]:
    """Write the summary to `path`; when GITHUB_STEP_SUMMARY is set, append it to that file too."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    written = [path]
    step = os.environ.get("GITHUB_STEP_SUMMARY")
    if step:
        with open(step, "a") as f:
            f.write(text + "\n")
        written.append(Path(step))
    return written


def fmt_speedup(rec: B.JobRecord | None) -> str:
    if rec is None:
        return "-"
    if not rec.correct:
        return rec.status
    if not rec.timed:
        return "ok"
    if rec.ci_low is None or rec.ci_high is None:
        return f"{rec.speedup:.2f}×"
    return f"{rec.speedup:.2f}× [{rec.ci_low:.2f}, {rec.ci_high:.2f}]"


def fmt_ratio(c: B.Comparison) -> str:
    if c.ratio is None:
        return "-"
    return f"{c.ratio:.3f}× [{c.ratio_low:.3f}, {c.ratio_high:.3f}]"


def summary_line(comps: list[B.Comparison], tau: float) -> str:
    n = B.counts(comps)
    parts = [f"{n[v]} {v}" for v in B.VERDICTS if n[v]]
    gate = "FAIL" if B.exit_code(comps) else "pass"
    return f"{len(comps)} job(s): {', '.join(parts) or 'none'} (τ = {tau:g}) · gate: {gate}"


def table(comps: list[B.Comparison], title: str) -> Table:
    t = Table(title=title, title_justify="left", box=box.SIMPLE_HEAD, pad_edge=False)
    for col, kw in (("job", {"overflow": "fold"}), ("baseline", {"justify": "right"}),
                    ("new", {"justify": "right"}), ("new/base [95% CI]", {"justify": "right"}),
                    ("verdict", {}), ("reason", {"overflow": "fold"})):
        t.add_column(col, **kw)
    for c in comps:
        style = B.VERDICT_STYLE.get(c.verdict, "")
        verdict = f"[{style}]{c.verdict}[/]" if style else c.verdict
        reason = c.reason + (" (after a rerun with more rounds)" if c.rerun else "")
        t.add_row(c.job, fmt_speedup(c.base), fmt_speedup(c.new), fmt_ratio(c), verdict, reason)
    return t


def render(comps: list[B.Comparison], console: Console, title: str, tau: float) -> None:
    console.print(table(comps, title))
    still = [c.job for c in comps if c.verdict == B.INCONCLUSIVE]
    if still:
        console.print(f"[yellow]warning:[/] {len(still)} job(s) inconclusive (CI straddles 1 - τ): "
                      + ", ".join(still), highlight=False)
    console.print(summary_line(comps, tau), highlight=False)


def comparisons_json(comps: list[B.Comparison], base: B.Snapshot, new: B.Snapshot, tau: float) -> str:
    return json.dumps({"base": base.source, "new": new.source, "tau": tau, "counts": B.counts(comps),
                       "exit_code": B.exit_code(comps), "jobs": [c.to_dict() for c in comps]}, indent=2)
