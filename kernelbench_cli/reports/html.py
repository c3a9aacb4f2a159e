"""The HTML report: one self-contained page per run (or per comparison of two runs), plots inlined as SVG.

`kbench report RUN` re-renders a saved run's terminal tables (report.render); `--html FILE` (also on
`kbench bench`) writes a page with the summary, a speedup chart, a roofline chart and one section per job
(verdict, flags explained, errors, per-round timings, compiler log); `kbench report BASE NEW` compares two
runs job by job. Self-contained: every plot is an inline SVG from charts.py, no scripts or remote styles.
"""
from __future__ import annotations

import html
import json
import re
import time
from pathlib import Path

from rich.console import Console

from .. import results as R
from .. import stats
from ..errors import InputError
from .compare import _x, compare_rows, compare_table
from .terminal import fmt_time, render, summary_line, to_json
from ..results import Result, load_results, resolve_run
from .charts import StripPlot, _Plots, _roofline_data, compare_chart, roofline_chart, speedup_chart  # noqa: F401

FAST_P = (0.0, 0.5, 1.0, 1.5, 2.0)
STATUS_CLASS = {R.OK: "ok", R.INCORRECT: "bad", R.INTEGRITY: "flag", R.TIMEOUT: "warn"}
CRASHY = (R.CRASH, R.TIMEOUT, R.CUDA_ERROR, R.IMPORT_ERROR, R.RUNTIME_ERROR, R.PROBLEM_ERROR,
          R.MISSING_MODELNEW, R.BAD_CONSTRUCTOR)
esc = html.escape


# ---------------------------------------------------------------------------------------------- loading

def load_run(arg: str, runs_root: Path) -> tuple[Path, list[Result]]:
    path = resolve_run(arg, runs_root)
    try:
        results = load_results(path)
    except (ValueError, TypeError, KeyError) as e:    # a truncated line, or a file that is not ours
        raise InputError(f"{path}: not a kbench results file ({type(e).__name__}: {e})") from None
    return path, results


def _run_label(path: Path, results: list[Result]) -> str:
    return next((r.run_id for r in results if r.run_id), "") or path.stem


def _device(results: list[Result]) -> str:
    return next((r.device for r in results), "?")


# ---------------------------------------------------------------------------------------------- command

def report_command(runs: list[str], runs_root: Path, html_path: Path | None, console: Console,
                   err: Console, as_json: bool = False) -> list[Result]:
    """`kbench report RUN [--html FILE] [--json]` and `kbench report BASE NEW [--html FILE] [--json]`: the
    tables (on stderr with --json, which prints the run, or both runs, as `bench --json` does); returns the
    (new) run's results, for the exit code."""
    if as_json:
        console = err
    if len(runs) not in (1, 2):
        raise InputError(f"report takes one run, or two (BASE NEW) to compare; got {len(runs)}")
    loaded = [load_run(r, runs_root) for r in runs]
    # the page is written before the tables are printed: `kbench report ... | head` must still write it
    if len(loaded) == 1:
        (path, results), = loaded
        if html_path is not None:
            write(html_path, render_html(results, source=str(path)), err)
        render(results, console, f"report · {_device(results)} · run {_run_label(path, results)}", caption=f"results: {path}")
        if as_json:
            print(to_json(results, _run_label(path, results), _device(results)))
        return results
    else:
        (bpath, base), (npath, new) = loaded
        if html_path is not None:
            write(html_path, render_compare_html(base, new, str(bpath), str(npath)), err)
        bn, nn = _run_label(bpath, base), _run_label(npath, new)
        if bn == nn:                        # the same run id twice (a copied file): name them by path
            bn, nn = str(bpath), str(npath)
        console.print(compare_table(base, new, bn, nn))
        console.print(f"base {bn}: {summary_line(base)}", highlight=False)
        console.print(f"new  {nn}: {summary_line(new)}", highlight=False)
        if as_json:
            print(json.dumps({"base": json.loads(to_json(base, bn, _device(base))),
                              "new": json.loads(to_json(new, nn, _device(new)))}, indent=2))
        return new


def write_run_html(html_path: Path, results: list[Result], runs_root: Path, err: Console) -> None:
    """`kbench bench --html FILE`: the report of the run just measured."""
    source = Path(runs_root) / _run_label(Path("run"), results) / "results.jsonl"
    write(html_path, render_html(results, source=str(source)), err)


def write(path: Path, page: str, err: Console) -> None:
    path = Path(path)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(page, encoding="utf-8")
    except OSError as e:
        raise InputError(f"{path}: cannot write the HTML report ({e.strerror or e})") from None
    err.print(f"wrote {path} ({len(page) // 1024} KiB)", highlight=False, markup=False)


# ---------------------------------------------------------------------------------------------- HTML

CSS = """
:root{--ink:#263238;--mute:#607d8b;--line:#e0e6ea;--ok:#2e7d32;--bad:#c62828;--flag:#8e24aa;--warn:#ef6c00}
*{box-sizing:border-box}
body{font:14px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,"DejaVu Sans",sans-serif;color:var(--ink);
 margin:0;background:#f5f7f8}
main{max-width:1240px;margin:0 auto;padding:24px 28px 60px}
h1{font-size:22px;margin:0 0 4px} h2{font-size:17px;margin:32px 0 10px;border-bottom:1px solid var(--line);
 padding-bottom:4px} h3{font-size:15px;margin:0;display:flex;gap:10px;align-items:baseline;flex-wrap:wrap}
.sub{color:var(--mute);font-size:12.5px} code,pre{font-family:"DejaVu Sans Mono",Menlo,Consolas,monospace}
.cards{display:flex;gap:12px;flex-wrap:wrap;margin:16px 0}
.card{background:#fff;border:1px solid var(--line);border-radius:8px;padding:10px 16px;min-width:150px}
.card b{display:block;font-size:24px;line-height:1.2} .card>span{color:var(--mute);font-size:12px}
table{border-collapse:collapse;background:#fff;font-size:12.5px}
th,td{padding:4px 10px;border-bottom:1px solid var(--line);text-align:left;vertical-align:top}
th{background:#eef2f4;font-weight:600} td.num,th.num{text-align:right;font-variant-numeric:tabular-nums;white-space:nowrap}
.scroll{overflow-x:auto} .overview{width:100%} .overview td,.overview th{padding:4px 8px} .overview a{color:inherit;text-decoration:none;border-bottom:1px dotted var(--mute)}
.badge{display:inline-block;padding:1px 8px;border-radius:10px;font-size:12px;font-weight:600;color:#fff;
 background:var(--bad);white-space:nowrap}
.badge.ok{background:var(--ok)} .badge.flag{background:var(--flag)} .badge.warn{background:var(--warn)}
.badge.same{background:#90a4ae} .badge.faster,.badge.fixed{background:var(--ok)}
.badge.slower,.badge.broke{background:var(--bad)} .badge.still{background:var(--flag)} .badge.added,.badge.removed{background:#546e7a}
.figure{background:#fff;border:1px solid var(--line);border-radius:8px;padding:12px;margin:8px 0;overflow-x:auto}
.figure p{margin:6px 4px 0;color:var(--mute);font-size:12.5px}
svg.plot{max-width:100%;height:auto;display:block}
.job{background:#fff;border:1px solid var(--line);border-left:4px solid var(--bad);border-radius:6px;
 padding:12px 16px;margin:12px 0}
.job.ok{border-left-color:var(--ok)} .job.flag{border-left-color:var(--flag)} .job.warn{border-left-color:var(--warn)}
.job .msg{margin:6px 0;color:var(--bad);font-weight:500;overflow-wrap:anywhere}
.job .grid{display:grid;grid-template-columns:repeat(auto-fit,minmax(300px,1fr));gap:6px 24px;margin-top:8px}
.group h4{margin:2px 0 2px;font-size:12.5px}
.kv th{background:none;color:var(--mute);font-weight:500;padding:1px 10px 1px 0;border:0;white-space:nowrap}
.kv td{padding:1px 0;border:0;font-variant-numeric:tabular-nums;overflow-wrap:anywhere}
.strip svg.plot{width:100%;max-width:360px;margin-top:4px}
ul.flags{margin:8px 0 0;padding-left:18px} ul.flags li.error{color:var(--flag)} ul.flags li.warning{color:var(--warn)}
details{margin-top:8px} summary{cursor:pointer;color:var(--mute);font-size:12.5px}
pre{background:#263238;color:#eceff1;padding:10px 12px;border-radius:6px;overflow-x:auto;font-size:11.5px;
 line-height:1.4;max-height:460px;margin:6px 0 0;white-space:pre-wrap;overflow-wrap:anywhere}
pre .e{color:#ff8a80;font-weight:600}
.fastp td,.fastp th{text-align:center;min-width:58px}
.note{color:var(--mute);font-size:12.5px}
"""


def _page(title: str, body: str) -> str:
    return (f'<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
            f'<meta name="viewport" content="width=device-width, initial-scale=1">'
            f"<title>{esc(title)}</title><style>{CSS}</style></head>\n<body><main>\n{body}\n</main></body></html>\n")


def _err(v: float | None) -> str:
    if v is None:
        return "-"
    return "0" if v == 0 else f"{v:.2e}"


def _badge(status: str) -> str:
    return f'<span class="badge {STATUS_CLASS.get(status, "bad")}">{esc(status)}</span>'


def _anchor(i: int) -> str:
    return f"job-{i + 1}"


def _env_line(results: list[Result]) -> str:
    env = next((r.env for r in results if r.env), {})
    parts = [f"{k} {env[k]}" for k in ("gpu", "sm", "torch", "cuda", "python") if env.get(k)]
    dtypes = sorted({r.dtype for r in results})
    return " · ".join([f"device {_device(results)}", "dtype " + "/".join(dtypes), *parts])


def _when(results: list[Result]) -> str:
    t = max((r.finished_at for r in results), default=0)
    return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(t)) if t else "?"


def summary_cards(results: list[Result]) -> str:
    speedups = [r.timing.speedup if r.correct else None for r in results if r.speed]   # (interpreted: no speed)
    good = [s for s in speedups if s]
    gm = stats.geomean(good) if good else None
    counts: dict[str, int] = {}
    for r in results:
        counts[r.status] = counts.get(r.status, 0) + 1
    statuses = " ".join(f"{_badge(s)}&nbsp;{n}" for s, n in sorted(counts.items(), key=lambda kv: -kv[1]))
    fast = "".join(f'<td>{stats.fast_p(speedups, p):.2f}</td>' for p in FAST_P)
    return (f'<div class="cards">'
            f'<div class="card"><b>{sum(r.correct for r in results)} / {len(results)}</b><span>correct</span></div>'
            f'<div class="card"><b>{_x(gm)}</b><span>geomean speedup over correct candidates</span></div>'
            f'<div class="card"><b>{sum(1 for s in good if s > 1)}</b><span>correct and faster than eager</span></div>'
            f'<div class="card"><span>fast_p: share of all jobs correct and &gt; p× faster</span>'
            f'<table class="fastp"><tr>{"".join(f"<th>p={p:g}</th>" for p in FAST_P)}</tr><tr>{fast}</tr></table>'
            f'</div><div class="card"><span>status</span><div style="margin-top:6px">{statuses}</div></div></div>')


def overview_table(results: list[Result]) -> str:
    head = ("<tr><th>#</th><th>problem</th><th>candidate</th><th>status</th><th>build</th><th>trials</th>"
            "<th class=num>max abs err</th><th class=num>ref</th><th class=num>cand</th>"
            "<th class=num>speedup [95% CI]</th><th>flags</th></tr>")
    rows = []
    for i, r in enumerate(results):
        c, t = r.correctness, r.timing
        ci = f" [{t.ci_low:.2f}, {t.ci_high:.2f}]" if t.speedup and t.ci_low and t.ci_high else ""
        rows.append(
            f'<tr><td>{i + 1}</td><td>{esc(r.problem)}</td><td><a href="#{_anchor(i)}">{esc(r.candidate)}</a></td>'
            f"<td>{_badge(r.status)}</td><td>{esc(r.build.status)}</td>"
            f"<td>{f'{c.passed}/{c.trials}' if c.trials else '-'}</td>"
            f"<td class=num>{_err(c.max_abs_err) if c.trials else '-'}</td>"
            f"<td class=num>{esc(fmt_time(t.ref_ms))}</td><td class=num>{esc(fmt_time(t.cand_ms))}</td>"
            f"<td class=num>{esc(t.note) if t.note else _x(t.speedup)}{ci}</td><td>{esc(', '.join(f.name for f in r.flags))}</td></tr>")
    return f'<div class="scroll"><table class="overview">{head}{"".join(rows)}</table></div>'


def _kv(title: str, rows: list[tuple[str, str]], extra: str = "") -> str:
    trs = "".join(f"<tr><th>{esc(k)}</th><td>{v}</td></tr>" for k, v in rows)
    return f'<div class="group"><h4>{esc(title)}</h4><table class="kv">{trs}</table>{extra}</div>'


def _log_html(log: str) -> str:
    """Escaped compiler output, error lines highlighted."""
    lines = []
    for ln in log.splitlines():
        e = esc(ln)
        lines.append(f'<span class="e">{e}</span>' if re.search(r"\berror\b", ln, re.I) else e)
    return "\n".join(lines)


def _optional_timing(r: Result) -> list[tuple[str, str]]:
    """Fields newer than some saved runs: shown when present."""
    t, rows = r.timing, []
    if getattr(t, "ref_host_ms", None) is not None or getattr(t, "cand_host_ms", None) is not None:
        rows.append(("host wall ref / cand", f"{esc(fmt_time(getattr(t, 'ref_host_ms', None)))} / "
                                             f"{esc(fmt_time(getattr(t, 'cand_host_ms', None)))}"))
    rf = _roofline_data(r)
    if rf:
        rows.append(("roofline floor", f"{esc(fmt_time(rf['floor_ms']))} ({esc(str(rf.get('bound', '?')))}-bound, "
                                       f"{rf.get('flops', 0):.3g} FLOP, {rf['bytes']:.3g} B)"))
        if t.cand_ms:
            rows.append(("speed of light", f"{rf['floor_ms'] / t.cand_ms:.0%} of the floor"))
    share, at = getattr(r, "custom_share", None), (getattr(r, "baselines", None) or {}).get("precision") or {}
    if share is not None:
        rows.append(("time in own code", f"{share:.0%} ({esc(getattr(r, 'custom_share_top', '') or '-')})"))
    if at.get("speedup"):
        rows.append((f"speedup vs reference at {esc(at['precision'])}", f"{at['speedup']:.3f}× [{at['ci_low']:.3f}, "
                                                                        f"{at['ci_high']:.3f}]"))
    if getattr(t, "handover_ms", None) is not None:
        rows.append(("witness per call", f"{esc(fmt_time(t.cand_host_ms))} (hand-over {esc(fmt_time(t.handover_ms))} "
                                         f"per batch of {t.batch}; {t.checked_calls} timed calls checked)"))
    phases = getattr(r, "phases", None) or {}
    if phases:
        rows.append(("phases", esc(", ".join(f"{k.removesuffix('_s')} {v:.2f} s" for k, v in phases.items()))))
    return rows


def job_section(strips: StripPlot, i: int, r: Result) -> str:
    c, t, b = r.correctness, r.timing, r.build
    groups = []
    if c.trials:
        rows = [("trials passed", f"{c.passed} / {c.trials}"), ("atol / rtol", f"{c.atol:g} / {c.rtol:g}"),
                ("max abs / rel err", f"{_err(c.max_abs_err)} / {_err(c.max_rel_err)}"),
                ("mismatches", f"{c.mismatches:,}"), ("weights", esc(c.weights or "-")),
                ("fp64 oracle err, ref", _err(c.oracle_err_ref)), ("fp64 oracle err, cand", _err(c.oracle_err_cand))]
        if c.oracle_err_ref and c.oracle_err_cand is not None:
            rows.append(("cand / ref oracle err", f"{c.oracle_err_cand / c.oracle_err_ref:.2f}×"))
        costs = ", ".join(f"{k} {_err(v)}" for k, v in sorted(c.precision_levels.items(), key=lambda kv: kv[1]))
        rows += [("precision class", esc(c.precision_class + (f" (reference at {costs})" if costs else "")) or "-"),
                 ("ablation (compiled results as noise)", esc(c.ablation or "-")),
                 ("generalisation", esc(", ".join(f"{k} {v['passed']}/{v['trials']}" + (f": {v['detail']}" if v["detail"]
                                                   else "") for k, v in c.variants.items()) or "-"))]
        if c.detail:
            rows.append(("detail", esc(c.detail)))
        groups.append(_kv("correctness", rows))
    if t.clock or t.speedup:
        ci = f" [{t.ci_low:.3f}, {t.ci_high:.3f}]" if t.ci_low and t.ci_high else ""
        strip = strips.svg(t) if (t.ref_rounds_ms or t.cand_rounds_ms) else ""
        groups.append(_kv("timing", [("ref / cand", f"{esc(fmt_time(t.ref_ms))} / {esc(fmt_time(t.cand_ms))}"),
                                     ("speedup [95% CI]", _x(t.speedup, 3) + ci),
                                     ("rounds / samples", f"{t.rounds} / {t.samples}"),
                                     ("clock, stopped by", f"{esc(t.clock or '-')}, {esc(t.stop_reason or '-')}")]
                          + _optional_timing(r), f'<div class="strip">{strip}</div>' if strip else ""))
    built = esc(b.status) + (f" in {b.seconds:.2f} s" if b.seconds else "")
    rows = [("build", built)]
    if b.extensions:
        rows.append(("extensions", esc(", ".join(str(e.get("name", "?")) for e in b.extensions))))
    rows += [("phase reached", esc(r.phase)), ("wall time", f"{r.wall_s:.1f} s"),
             ("file", f"<code>{esc(r.candidate_path)}</code>")]
    groups.append(_kv("build and job", rows))
    flags = ""
    if r.flags:
        items = "".join(f'<li class="{esc(f.severity)}"><b>{esc(f.name)}</b> ({esc(f.severity)}): {esc(f.detail)}</li>'
                        for f in r.flags)
        flags = f'<ul class="flags">{items}</ul>'
    logs = ""
    if b.log and (r.status == R.COMPILE_ERROR or b.status == "failed"):
        logs += (f'<details open><summary>compiler log ({len(b.log.splitlines())} lines)</summary>'
                 f"<pre>{_log_html(b.log)}</pre></details>")
    elif b.log:
        logs += f"<details><summary>build log</summary><pre>{_log_html(b.log)}</pre></details>"
    if r.stderr_tail:
        opened = " open" if r.status in CRASHY else ""
        logs += (f"<details{opened}><summary>worker stderr (tail)</summary>"
                 f"<pre>{_log_html(r.stderr_tail)}</pre></details>")
    said = {f"{f.name}: {f.detail}" for f in r.flags}       # a flag's own words are in the list already
    msg = f'<div class="msg">{esc(r.message)}</div>' if r.message and r.message not in said else ""
    speed = f'<span class="sub">{_x(t.speedup)}</span>' if t.speedup else ""
    return (f'<section class="job {STATUS_CLASS.get(r.status, "bad")}" id="{_anchor(i)}">'
            f"<h3>{_badge(r.status)} <span>{esc(r.problem)} · <b>{esc(r.candidate)}</b></span>{speed}</h3>"
            f'{msg}{flags}<div class="grid">{"".join(groups)}</div>{logs}</section>')


def render_html(results: list[Result], source: str = "") -> str:
    P = _Plots()
    run = next((r.run_id for r in results if r.run_id), "") or Path(source).stem
    title = f"kbench report · run {run}"
    if not results:
        return _page(title, f"<h1>{esc(title)}</h1><p>This run recorded no jobs.</p>")
    roof_svg, roof_caption = roofline_chart(P, results)
    strips = StripPlot(P)
    jobs = "\n".join(job_section(strips, i, r) for i, r in enumerate(results))
    body = (f"<h1>{esc(title)}</h1>"
            f'<div class="sub">{esc(_env_line(results))} · {len(results)} jobs · finished {esc(_when(results))}'
            f"{' · ' + esc(source) if source else ''}</div>"
            f"{summary_cards(results)}"
            f"<h2>Speedup per job</h2><div class=\"figure\">{speedup_chart(P, results)}"
            f"<p>Green: faster than eager PyTorch (CI above 1×); red: slower (CI below 1×); grey: CI includes 1×; "
            f"purple: measured but not correct (does not count).</p></div>"
            f"<h2>{'Roofline' if roof_caption.startswith('Roofline:') else 'Candidate vs reference time'}</h2>"
            f"<div class=\"figure\">{roof_svg}<p>{roof_caption}</p></div>"
            f"<h2>Jobs</h2>{overview_table(results)}"
            f"<h2>Per job</h2>{jobs}")
    return _page(title, body)


# ---------------------------------------------------------------------------------------------- compare



def render_compare_html(base: list[Result], new: list[Result], base_src: str = "", new_src: str = "") -> str:
    P = _Plots()
    bn, nn = _run_label(Path(base_src or "base"), base), _run_label(Path(new_src or "new"), new)
    if bn == nn:
        bn, nn = base_src or "base", new_src or "new"
    title = f"kbench comparison · {bn} → {nn}"
    rows = compare_rows(base, new)
    head = ("<tr><th>job</th><th>base status</th><th>new status</th><th class=num>base speedup</th>"
            "<th class=num>new speedup</th><th class=num>new / base</th><th>change</th></tr>")
    trs = "".join(
        f"<tr><td>{esc(r['job'])}</td><td>{_badge(r['base_status']) if r['base_status'] else '-'}</td>"
        f"<td>{_badge(r['new_status']) if r['new_status'] else '-'}</td><td class=num>{_x(r['base_speedup'])}</td>"
        f"<td class=num>{_x(r['new_speedup'])}</td><td class=num>{_x(r['ratio'], 3)}</td>"
        f'<td><span class="badge {esc(r["change"].split()[0])}">{esc(r["change"])}</span></td></tr>' for r in rows)
    ratios = [r["ratio"] for r in rows if r["ratio"] and r["base_status"] == r["new_status"] == R.OK]
    changed = {}
    for r in rows:
        changed[r["change"]] = changed.get(r["change"], 0) + 1
    body = (f"<h1>{esc(title)}</h1>"
            f'<div class="sub">base: {esc(base_src or bn)} ({esc(_env_line(base))})<br>'
            f'new: {esc(new_src or nn)} ({esc(_env_line(new))})</div>'
            f'<h2>Base run {esc(bn)}</h2>{summary_cards(base)}<h2>New run {esc(nn)}</h2>{summary_cards(new)}'
            f'<div class="cards"><div class="card"><b>{_x(stats.geomean(ratios), 3) if ratios else "-"}</b>'
            f"<span>geomean of new/base speedup over jobs correct in both ({len(ratios)})</span></div>"
            + "".join(f'<div class="card"><b>{n}</b><span>{esc(k)}</span></div>' for k, n in changed.items())
            + f'</div><h2>Speedup, base → new</h2><div class="figure">{compare_chart(P, rows)}'
            f"<p>“faster”/“slower”: the CI gate's rule (the whole 95% CI of new/base beyond 1 ± τ); “inconclusive”: "
            f"the CI straddles 1 - τ; “same”: otherwise.</p></div>"
            f'<h2>Per job</h2><div class="scroll"><table class="overview">{head}{trs}</table></div>')
    return _page(title, body)
