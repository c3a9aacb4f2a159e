"""Rendering: the rich results table, the summary line, and the --json document."""
from __future__ import annotations

import json
import re

from rich import box
from rich.console import Console
from rich.table import Table

from .. import results as R
from .. import stats
from ..results import Result

STATUS_STYLE = {R.OK: "green", R.INCORRECT: "red", R.INTEGRITY: "magenta", R.TIMEOUT: "yellow", R.SKIPPED: "dim"}


def fmt_time(ms: float | None) -> str:
    if ms is None:
        return "-"
    return f"{ms * 1e3:.1f} µs" if ms < 1 else f"{ms:.3f} ms"


def fmt_build(r: Result) -> str:
    b = r.build
    if b.status == "built":
        return f"built {b.seconds:.0f}s"
    return b.status


def fmt_correct(r: Result) -> str:
    c = r.correctness
    style = STATUS_STYLE.get(r.status, "red")
    if c.trials and r.status in (R.OK, R.INCORRECT, R.INTEGRITY):
        failed = [k for k, v in c.variants.items() if v["passed"] < v["trials"]]
        gen = f" gen✗{','.join(failed)}" if failed else " gen✓" if c.variants else ""
        label = f"{c.passed}/{c.trials}{gen}" + ("" if r.status == R.OK else f" {r.status}")
    else:
        label = r.status
    return f"[{style}]{label}[/]"


def fmt_speedup(r: Result) -> str:
    t = r.timing
    if t.speedup is None:       # (an interpreted run: its build column says so; --json keeps the whole note)
        return "not a speed" if t.note == R.INTERPRETED else (t.note or "-")
    return f"{t.speedup:.2f}× [{t.ci_low:.2f}, {t.ci_high:.2f}]"


def fmt_flags(r: Result) -> str:
    """Errors in red, warnings in yellow: errors fail the job, warnings are for review."""
    return " ".join(f"[{'red' if f.severity == 'error' else 'yellow'}]{f.name}[/]" for f in r.flags)


def summary(results: list[Result]) -> dict:
    ran = [r for r in results if r.status != R.SKIPPED]
    speedups = [r.timing.speedup if r.correct else None for r in ran if r.speed]   # (interpreted: no speed)
    correct = [s for s in speedups if s is not None]
    return {"jobs": len(ran), "correct": sum(r.correct for r in ran), "skipped": len(results) - len(ran),
            "interpreted": sum(not r.speed for r in ran),
            "geomean_speedup": stats.geomean(correct) if correct else None,
            "fast_1": stats.fast_p(speedups, 1.0),
            "fast_p": {f"{p:g}": stats.fast_p(speedups, p) for p in FAST_P}}


FAST_P = (0.0, 0.5, 1.0, 1.5, 2.0)   # KernelBench's thresholds: fast_0 = correct, fast_1 = correct and faster


def summary_line(results: list[Result]) -> str:
    s = summary(results)
    gm = f"{s['geomean_speedup']:.2f}×" if s["geomean_speedup"] else "-"
    fast = "/".join(f"{v:.2f}" for v in s["fast_p"].values())
    interp = f" ({s['interpreted']} interpreted: no speed)" if s["interpreted"] else ""
    skipped = f" · {s['skipped']} skipped (not run on this device)" if s["skipped"] else ""
    return (f"{s['correct']}/{s['jobs']} correct · geomean speedup {gm} over correct candidates{interp} · "
            f"fast_1 {s['fast_1']:.2f} · fast_p at p={'/'.join(s['fast_p'])}: {fast}{skipped}")


NARROW = 130    # below this many columns the table drops what a verdict can do without (max err, custom, SOL)
SLIM = 100      # ...and below this, the build column (the build bar said it) and the reference's time


def table(results: list[Result], title: str, width: int = 200, caption: str = "") -> Table:
    problems = {r.problem for r in results}
    one = len(problems) == 1          # one problem (kbench check): named once in the title, not on every row
    if one and next(iter(problems)) not in title:
        title = f"{title} · {next(iter(problems))}"
    t = Table(title=title, caption=caption or None, title_justify="left", caption_justify="left",
              box=box.SIMPLE_HEAD, pad_edge=False)
    right = {"justify": "right", "no_wrap": True}    # numbers never break; the names fold instead
    wide, slim = width >= NARROW, width < SLIM
    with_compile = any("compile" in r.baselines for r in results)
    custom = wide and any(r.custom_share is not None for r in results)
    sol = wide and any(r.roofline.get("sol") for r in results)
    names = {"overflow": "fold", "min_width": 10 if slim else 16}      # (else a narrow table squeezes them out)
    columns = ([] if one else [("problem", names)]) + [("candidate", dict(names, min_width=8 if slim else 10))] + \
        ([] if slim else [("build", {"no_wrap": True})]) + [("correct", {"no_wrap": True})] + \
        ([("max err", right)] if wide else []) + ([] if slim else [("ref", right)]) + \
        [("cand", right), ("speedup [95% CI]", right)] + \
        ([("vs compile", right)] if with_compile else []) + ([("custom", right)] if custom else []) + \
        ([("SOL", right)] if sol else []) + [("flags", {"overflow": "fold", "min_width": 5})]
    for col, kw in columns:
        t.add_column(col, **kw)
    for r in results:
        c = r.correctness
        row = ([] if one else [r.problem]) + [r.candidate] + ([] if slim else [fmt_build(r)]) + [fmt_correct(r)]
        if wide:
            compared = c.passed or c.mismatches or c.max_abs_err     # not when the output never reached the comparison
            row.append(f"{c.max_abs_err:.1e}" if c.trials and compared else "-")
        row += ([] if slim else [fmt_time(r.timing.ref_ms)]) + [fmt_time(r.timing.cand_ms), fmt_speedup(r)]
        if with_compile:
            comp = r.baselines.get("compile")
            row.append(f"{comp['speedup']:.2f}×" if comp else "-")     # its CI: --json / --html
        if custom:
            row.append("-" if r.custom_share is None else f"{r.custom_share:.0%}")
        if sol:
            row.append(f"{r.roofline['sol']:.0%}" if r.roofline.get("sol") else "-")
        row.append(fmt_flags(r))
        t.add_row(*row)
    return t


def build_table(results: list[Result], title: str, caption: str = "") -> Table:
    """`kbench build`: what was compiled, nothing was run (no correctness, no speed)."""
    t = Table(title=title, caption=caption or None, title_justify="left", caption_justify="left",
              box=box.SIMPLE_HEAD, pad_edge=False)
    for col in ("problem", "candidate", "build"):
        t.add_column(col, overflow="fold")
    for r in results:
        failed = r.status != R.OK
        t.add_row(r.problem, r.candidate, f"[red]{r.status}[/]" if failed else f"[green]{fmt_build(r)}[/]")
    return t


def notes(r: Result) -> list[str]:
    """What a reader of the verdict should know: elements judged against float64 rather than the fp32
    reference, host time per call when it differs materially from device time (launch-bound code), and
    rounds taken while the GPU was throttled."""
    t, out = r.timing, []
    if r.correctness.oracle_passed:
        out.append(f"{r.correctness.oracle_passed} element(s) outside tolerance of the reference passed against "
                   "float64: no further from it than the reference itself")
    if t.cand_host_ms is not None and t.cand_ms is not None and t.clock == "cuda-events" and (
            t.cand_host_ms > HOST_DEVICE_RATIO * t.cand_ms or t.ref_host_ms > HOST_DEVICE_RATIO * t.ref_ms):
        out.append(f"host time per call (a batch's wall over its calls; the candidate's with the hand-over): ref {fmt_time(t.ref_host_ms)}, cand "
                   f"{fmt_time(t.cand_host_ms)} vs device {fmt_time(t.ref_ms)}, {fmt_time(t.cand_ms)}")
    if r.correctness.variants:
        out.append("generalisation: " + ", ".join(
            f"{k} {v['passed']}/{v['trials']}" + (f" ({v['skipped']} skipped)" if v["skipped"] else "")
            for k, v in r.correctness.variants.items()))
    at = r.baselines.get("precision")
    if at and at.get("speedup"):
        out.append(f"computes at {at['precision']}: {at['speedup']:.2f}× against the reference run at {at['precision']} "
                   f"[{at['ci_low']:.2f}, {at['ci_high']:.2f}], beside {fmt_speedup(r)} against fp32")
    if r.custom_share is not None and r.custom_share < 0.9 and r.custom_share_top:
        out.append(f"own code {r.custom_share:.0%} of the call's time; largest: {r.custom_share_top}")
    if t.throttled_rounds:
        out.append(f"GPU throttled (power/thermal) in {t.throttled_rounds} round(s): "
                   + ("too few clean rounds, so all were kept (both sides of a round share the cap)"
                      if t.throttled_kept else "dropped"))
    return out


HOST_DEVICE_RATIO = 1.5


def render(results: list[Result], console: Console, title: str, caption: str = "", build_only: bool = False) -> None:
    console.print(build_table(results, title, caption) if build_only else table(results, title, console.width, caption))
    for r in results:
        if r.status != R.OK and r.message:
            mark = "[dim]–[/]" if r.status == R.SKIPPED else "[red]✗[/]"
            console.print(f"{mark} {r.problem}::{r.candidate}: {r.status}: {r.message}", highlight=False)
        for note in notes(r) if r.correct and not build_only else []:
            console.print(f"[dim]·[/] {r.problem}::{r.candidate}: {note}", highlight=False)
        for f in r.flags:
            if f.severity == "warning":
                console.print(f"[yellow]![/] {r.problem}::{r.candidate}: {f.name}: {f.detail}", highlight=False)
        if r.status == R.COMPILE_ERROR and r.build.log:
            console.print(_compiler_excerpt(r.build.log, r.candidate_path), style="dim", highlight=False, markup=False)
            log = next((ln for ln in r.stderr_tail.splitlines() if ln.startswith("(build log:")), "")
            if log:
                console.print(log, style="dim", highlight=False, markup=False)
        elif r.status in (R.CRASH, R.TIMEOUT, R.CUDA_ERROR, R.IMPORT_ERROR, R.RUNTIME_ERROR) and r.stderr_tail:
            console.print(_failure_excerpt(r.stderr_tail, r.candidate_path), style="dim", highlight=False, markup=False)
    if build_only:
        ok = sum(r.status == R.OK for r in results)
        console.print(f"{ok}/{len(results)} built (nothing was run: `kbench bench` verifies and times them)")
    else:
        console.print(summary_line(results), highlight=False)
        if any(r.device == "cpu" and r.speed and r.timing.speedup for r in results):
            console.print(CPU_NOISE, style="dim", highlight=False)


# Said once under a CPU run's table: its CIs cannot show what moves between runs on a shared CPU (measured on the
# 2-core box: one candidate 1.10x-3.00x over six runs, each with a narrow CI; issue 19).
CPU_NOISE = ("note: on a CPU each CI covers this run's rounds only; reruns on a shared machine move further (sd of "
             "the log speedup up to 0.05 single-threaded, several times that with threads: "
             "README, \"Run-to-run noise (CPU)\"); gate with timing.cpu_threads pinned and a baseline from 3+ runs")


SOURCE_LINE = re.compile(r"^\s*(\d+\s*)?\|")          # gcc's quoted source and marker lines: "  7 |  code", "    |  ^~"
COMMAND = ("[", "FAILED:", "ninja:", "c++ ", "g++ ", "nvcc ", "/usr/")


def _compiler_excerpt(log: str, candidate_path: str = "", lines: int = 14) -> str:
    """The compiler's error lines with the source lines it quotes under them (not ninja's command lines), each
    quoted source line located in the candidate file (the compiler numbers the generated main.cpp/cuda.cu)."""
    out, take = [], 0
    for ln in log.splitlines():
        if (": error" in ln.lower() or "error:" in ln.lower()) and not ln.lstrip().startswith(COMMAND):
            out.append(ln)
            take = 3
        elif take and (SOURCE_LINE.match(ln) or ln.strip().startswith("^") or not ln.startswith(COMMAND)):
            if SOURCE_LINE.match(ln) and ln.split("|", 1)[0].strip().isdigit():
                ln += _where(ln.split("|", 1)[1], candidate_path)
            out.append(ln)
            take -= 1
        else:
            take = 0
    return "\n".join((out or log.splitlines())[-lines:])


def _failure_excerpt(tail: str, candidate_path: str, lines: int = 8) -> str:
    """A crash's last lines, with the candidate's own frames and the fatal-error line kept even when kbench's
    frames below them would push them out (a segfault's dump ends in the candidate process's serve loop)."""
    all_ = tail.splitlines()
    name = candidate_path.rsplit("/", 1)[-1] if candidate_path else "\0"
    key = [i for i, ln in enumerate(all_) if "Fatal Python error" in ln or (name in ln and "File" in ln)]
    keep = sorted(set(key) | {i + 1 for i in key if i + 1 < len(all_) and name in all_[i]} |
                  set(range(max(0, len(all_) - lines), len(all_))))
    return "\n".join(all_[i] for i in keep)


def _where(code: str, candidate_path: str) -> str:
    """'  <- candidate.py:123' for a quoted source line found once in the candidate file."""
    code = code.strip()
    if len(code) < 8 or not candidate_path:
        return ""
    try:
        text = open(candidate_path, encoding="utf-8", errors="replace").read().splitlines()
    except OSError:
        return ""
    hits = [i for i, line in enumerate(text, 1) if code in line]
    return f"   <- {candidate_path}:{hits[0]}" if len(hits) == 1 else ""


def to_json(results: list[Result], run_id: str, device: str) -> str:
    return json.dumps({"run_id": run_id, "device": device, "summary": summary(results),
                       "results": [r.to_dict() for r in results]}, indent=2)
