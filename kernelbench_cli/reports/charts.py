"""The HTML report's plots: matplotlib figures (Agg backend, no display) rendered to inline SVG, so the page
needs no network. html.py lays out the page around them."""
from __future__ import annotations

import io
import math
import re

from ..errors import InputError
from ..results import Result

FASTER, SLOWER, UNSURE, FAILED = "#2e7d32", "#c62828", "#78909c", "#8e24aa"
CHANGE_COLOR = {"faster": FASTER, "fixed": FASTER, "slower": SLOWER, "broke": SLOWER, "same": UNSURE,
                "inconclusive": UNSURE,
                "added": "#546e7a", "removed": "#546e7a", "still failing": FAILED}


class _Plots:
    """matplotlib figures to inline SVG. No pyplot: Figure objects only, so nothing global is touched
    except the backend choice (Agg, no display). Each figure gets its own hash salt so the ids of
    clip paths and markers are deterministic and never collide between figures on one page."""

    def __init__(self):
        try:
            import matplotlib
        except ImportError:
            raise InputError("the HTML report needs matplotlib: python3 -m pip install matplotlib "
                             "(or reinstall kbench: pip install -e .)") from None
        matplotlib.use("Agg")
        from matplotlib.figure import Figure
        from matplotlib.ticker import FuncFormatter, LogLocator, NullFormatter
        self.mpl, self.Figure = matplotlib, Figure
        self.FuncFormatter, self.LogLocator, self.NullFormatter = FuncFormatter, LogLocator, NullFormatter
        self.count = 0
        self.rc = {"svg.fonttype": "none", "font.size": 8, "font.family": "sans-serif",
                   "font.sans-serif": ["DejaVu Sans", "Liberation Sans", "Arial", "Helvetica"],
                   "axes.spines.top": False, "axes.spines.right": False, "axes.edgecolor": "#90a4ae",
                   "axes.labelcolor": "#37474f", "xtick.color": "#546e7a", "ytick.color": "#546e7a",
                   "path.simplify": True, "axes.formatter.useoffset": False}

    def svg(self, fig, tight: bool = True) -> str:
        self.count += 1
        buf = io.StringIO()
        with self.mpl.rc_context({**self.rc, "svg.hashsalt": f"kbench-fig{self.count}"}):
            fig.savefig(buf, format="svg", bbox_inches="tight" if tight else None, pad_inches=0.05,
                        metadata={"Date": None, "Creator": None, "Format": None, "Type": None})
        text = buf.getvalue()
        text = text[text.index("<svg"):]                              # no XML prolog or DTD inline
        text = re.sub(r"<metadata>.*?</metadata>", "", text, flags=re.S)
        text = re.sub(r'\s+xmlns(:\w+)?="[^"]*"', "", text)           # the HTML parser sets namespaces
        return text.replace("<svg ", '<svg class="plot" role="img" ', 1)

    def figure(self, w: float, h: float):
        with self.mpl.rc_context(self.rc):
            fig = self.Figure(figsize=(w, h))
            ax = fig.add_subplot()
        return fig, ax

    def log_axis(self, axis) -> None:
        axis.set_major_locator(self.LogLocator(base=10, subs=(1.0, 2.0, 5.0)))
        axis.set_minor_formatter(self.NullFormatter())
        axis.set_major_formatter(self.FuncFormatter(lambda v, _: f"{v:g}×"))


def _fit_rows(P: _Plots, fig, labels: list[str], w: float, h: float) -> None:
    """Margins for a chart with one labelled row per job, from the labels' measured width: saving with
    bbox_inches="tight" would draw the (large) figure twice."""
    from matplotlib.font_manager import FontProperties
    from matplotlib.textpath import TextToPath
    with P.mpl.rc_context(P.rc):
        prop, t2p = FontProperties(size=P.mpl.rcParams["ytick.labelsize"]), TextToPath()
        widest = max((t2p.get_text_width_height_descent(s, prop, ismath=False)[0] for s in labels), default=0)
    fig.subplots_adjust(left=min(0.6, (widest / 72 + 0.12) / w), right=0.985, top=1 - 0.08 / h, bottom=0.5 / h)


def _speed_color(r: Result) -> str:
    t = r.timing
    if not r.correct:
        return FAILED
    lo, hi = t.ci_low or t.speedup, t.ci_high or t.speedup
    return FASTER if lo > 1 else SLOWER if hi < 1 else UNSURE


def _label(r: Result) -> str:
    return f"{r.problem} · {r.candidate}"


def _log_limits(values, lo_floor=0.5, hi_floor=2.0, pad=1.35) -> tuple[float, float]:
    vals = [v for v in values if v and v > 0 and math.isfinite(v)]
    lo = min([lo_floor, *vals]) / pad
    hi = max([hi_floor, *vals]) * pad
    return lo, hi


def speedup_chart(P: _Plots, results: list[Result]) -> str:
    """One row per job, grouped by problem: a bar from 1× to the speedup, the 95% CI as an error bar."""
    n = len(results)
    with P.mpl.rc_context(P.rc):
        fig, ax = P.figure(11.2, 0.75 + 0.24 * n)
        ys = list(range(n))
        timed = [(i, r) for i, r in enumerate(results) if r.timing.speedup]
        lo, hi = _log_limits([v for _, r in timed for v in (r.timing.speedup, r.timing.ci_low, r.timing.ci_high)])
        # alternate a light band per problem so a problem's candidates read as one group
        band, prev = False, None
        for i, r in enumerate(results):
            if r.problem != prev:
                band, prev = not band, r.problem
            if band:
                ax.axhspan(i - 0.5, i + 0.5, color="#f3f6f8", zorder=0, lw=0)
        if timed:
            idx, rs = zip(*timed)
            s = [r.timing.speedup for r in rs]
            ax.barh(idx, [v - 1 for v in s], left=1, height=0.62, zorder=2,
                    color=[_speed_color(r) for r in rs], alpha=0.9)
            cis = [(i, r) for i, r in timed if r.timing.ci_low and r.timing.ci_high]
            if cis:
                ax.errorbar([r.timing.speedup for _, r in cis], [i for i, _ in cis], fmt="none", ecolor="#212121",
                            elinewidth=0.9, capsize=2.5, zorder=3,
                            xerr=[[r.timing.speedup - r.timing.ci_low for _, r in cis],
                                  [r.timing.ci_high - r.timing.speedup for _, r in cis]])
        for i, r in enumerate(results):
            t = r.timing
            if t.speedup:
                right = max(t.speedup, t.ci_high or 0, 1.0)
                note = f"{t.speedup:.2f}×" + ("" if r.correct else f"  ({r.status})")
                ax.text(right * 1.04, i, note, va="center", fontsize=7.5, color="#263238" if r.correct else FAILED)
            else:
                ax.text(1.04, i, r.status, va="center", fontsize=7.5, color=FAILED, style="italic")
        ax.axvline(1, color="#263238", lw=0.9, zorder=4)
        ax.set_xscale("log")
        ax.set_xlim(lo, hi * 1.6)
        P.log_axis(ax.xaxis)
        ax.set_yticks(ys, [_label(r) for r in results])
        ax.set_ylim(n - 0.5, -0.5)
        ax.tick_params(axis="y", length=0)
        ax.grid(axis="x", which="major", color="#e0e0e0", lw=0.6, zorder=1)
        ax.set_xlabel("speedup over the reference (log scale; bar = geomean of the central per-round ratios, "
                      "whisker = 95% bootstrap CI)")
        _fit_rows(P, fig, [_label(r) for r in results], 11.2, 0.75 + 0.24 * n)
    return P.svg(fig, tight=False)


def _roofline_data(r: Result) -> dict | None:
    """The job's roofline dict when it has a floor (see the module docstring), else None."""
    rf = getattr(r, "roofline", None)
    if not isinstance(rf, dict) or not rf.get("floor_ms") or not rf.get("bytes"):
        return None
    return rf


def _ceilings(rfs: list[dict]) -> tuple[float | None, float | None]:
    """(FLOP/s, bytes/s) ceilings recovered from the floors: floor = max(flops / rate, bytes / bandwidth),
    so a memory-bound job's floor gives the bandwidth and a compute-bound job's the FLOP rate."""
    rate = [d["flops"] / (d["floor_ms"] * 1e-3) for d in rfs if d.get("bound") == "compute" and d.get("flops")]
    bw = [d["bytes"] / (d["floor_ms"] * 1e-3) for d in rfs if d.get("bound") == "memory"]
    return (max(rate) if rate else None), (max(bw) if bw else None)


def roofline_chart(P: _Plots, results: list[Result]) -> tuple[str, str]:
    """(svg, caption): a roofline when results carry FLOP/byte counts, else candidate vs reference time."""
    if any(_roofline_data(r) and r.timing.cand_ms for r in results):
        return _true_roofline(P, results) + _sol_chart(P, results), (
            "Roofline: achieved FLOP/s of each candidate (filled) and its reference (hollow) against arithmetic "
            "intensity (FLOP per compulsory byte), under the device's matmul and copy-bandwidth ceilings measured "
            "by <code>kbench calibrate</code>; numbers are the # column of the Jobs table. Jobs without "
            "counted FLOPs (element-wise work counts as free) appear only in the second chart: the share of "
            "the speed of light, floor time / measured time, where 100% is the ceiling.")
    return _time_vs_time(P, results), (
        "Roofline-style view. These results carry no FLOP or byte counts (the device was not calibrated: "
        "<code>kbench calibrate</code>), so each candidate's median time is plotted against its reference's "
        "on log axes: points below the 1× diagonal are faster than eager PyTorch, each dotted line is a "
        "further factor of 2; numbers are the # column of the Jobs table. Results with a "
        "<code>roofline</code> field get a true roofline here instead.")


def _time_vs_time(P: _Plots, results: list[Result]) -> str:
    pts = [(i + 1, r) for i, r in enumerate(results) if r.timing.ref_ms and r.timing.cand_ms]
    with P.mpl.rc_context(P.rc):
        fig, ax = P.figure(7.0, 5.6)
        if not pts:
            ax.text(0.5, 0.5, "no timed jobs", ha="center", va="center", transform=ax.transAxes)
            ax.set_axis_off()
            return P.svg(fig)
        vals = [v for _, r in pts for v in (r.timing.ref_ms, r.timing.cand_ms)]
        lo, hi = min(vals) / 2.5, max(vals) * 2.5
        for k in (-2, -1, 0, 1, 2, 3, 4):       # lines of constant speedup 2^k
            f = 2.0 ** k
            ax.plot([lo, hi], [lo / f, hi / f], color="#263238" if k == 0 else "#b0bec5",
                    lw=0.9 if k == 0 else 0.6, ls="-" if k == 0 else ":", zorder=1)
            x, y = (hi / 1.1, hi / 1.1 / f) if f >= 1 else (hi / 1.1 * f, hi / 1.1)
            if lo < x and lo < y:
                ax.text(x, y, f"{f:g}×", fontsize=6.5, color="#607d8b" if k else "#263238",
                        ha="right", va="bottom" if f >= 1 else "top")
        for group, style in (([p for p in pts if p[1].correct], "ok"), ([p for p in pts if not p[1].correct], "bad")):
            if not group:
                continue
            xs, ys = [r.timing.ref_ms for _, r in group], [r.timing.cand_ms for _, r in group]
            if style == "ok":
                ax.scatter(xs, ys, s=28, zorder=3, c=[_speed_color(r) for _, r in group], edgecolors="white",
                           linewidths=0.5)
            else:
                ax.scatter(xs, ys, s=34, zorder=3, facecolors="none", edgecolors=FAILED, linewidths=1.2)
        if len(pts) <= 60:
            for num, r in pts:
                ax.annotate(str(num), (r.timing.ref_ms, r.timing.cand_ms), xytext=(3, 2),
                            textcoords="offset points", fontsize=6.5, color="#37474f")
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlim(lo, hi)
        ax.set_ylim(lo, hi)
        ax.set_aspect("equal")
        ax.set_xlabel("reference (eager PyTorch) time per call, ms")
        ax.set_ylabel("candidate time per call, ms")
        ax.grid(which="major", color="#eceff1", lw=0.6, zorder=0)
        from matplotlib.lines import Line2D
        ax.legend(handles=[Line2D([], [], marker="o", ls="", color=c, markersize=5, label=f"correct, {w}")
                           for c, w in ((FASTER, "faster"), (SLOWER, "slower"), (UNSURE, "CI includes 1×"))]
                  + [Line2D([], [], marker="o", ls="", markerfacecolor="none", markeredgecolor=FAILED,
                            markersize=5, label="not correct")], loc="upper left", frameon=False, fontsize=7)
    return P.svg(fig)


def _true_roofline(P: _Plots, results: list[Result]) -> str:
    rows = [(i + 1, r, _roofline_data(r)) for i, r in enumerate(results)]
    rows = [(i, r, d) for i, r, d in rows if d and d.get("flops") and r.timing.cand_ms]
    peak_f, peak_b = _ceilings([d for d in map(_roofline_data, results) if d])
    with P.mpl.rc_context(P.rc):
        fig, ax = P.figure(7.0, 4.8)
        if not rows:
            ax.text(0.5, 0.5, "no job has counted FLOPs (all element-wise): see the speed-of-light chart",
                    ha="center", va="center", transform=ax.transAxes)
            ax.set_axis_off()
            return P.svg(fig)
        ai = [d["flops"] / d["bytes"] for _, _, d in rows]
        ys = [d["flops"] / (r.timing.cand_ms * 1e-3) for _, r, d in rows]
        ys += [d["flops"] / (r.timing.ref_ms * 1e-3) for _, r, d in rows if r.timing.ref_ms]
        xlo, xhi = min(ai) / 4, max(ai) * 4
        if peak_f and peak_b:
            xlo, xhi = min(xlo, peak_f / peak_b / 8), max(xhi, peak_f / peak_b * 8)
        if peak_b:
            xs = [xlo, min(xhi, peak_f / peak_b) if peak_f else xhi]
            ax.plot(xs, [peak_b * x for x in xs], color="#263238", lw=1.2, zorder=2)
            ax.text(xlo * 1.3, peak_b * xlo * 1.3 * 1.6, f"copy {peak_b / 1e9:,.0f} GB/s", fontsize=7,
                    color="#263238", rotation=0)
        if peak_f:
            ax.plot([peak_f / peak_b if peak_b else xlo, xhi], [peak_f, peak_f], color="#263238", lw=1.2, zorder=2)
            ax.text(xhi / 1.1, peak_f * 1.12, f"matmul {peak_f / 1e12:.3g} TFLOP/s", fontsize=7, ha="right")
            ys.append(peak_f)
        for (num, r, d), x in zip(rows, ai):
            y = d["flops"] / (r.timing.cand_ms * 1e-3)
            if r.timing.ref_ms:
                yr = d["flops"] / (r.timing.ref_ms * 1e-3)
                ax.plot([x, x], [yr, y], color="#cfd8dc", lw=0.8, zorder=2)
                ax.scatter([x], [yr], s=24, facecolors="white", edgecolors="#78909c", linewidths=0.9, zorder=3)
            ax.scatter([x], [y], s=30, color=_speed_color(r), zorder=4, edgecolors="white", linewidths=0.5)
            if len(rows) <= 60:
                ax.annotate(str(num), (x, y), xytext=(4, 2), textcoords="offset points", fontsize=6.5,
                            color="#37474f")
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlim(xlo, xhi)
        ax.set_ylim(min(ys) / 3, max(ys) * 2.5)
        ax.set_xlabel("arithmetic intensity (FLOP / byte)")
        ax.set_ylabel("achieved FLOP/s")
        ax.grid(which="major", color="#eceff1", lw=0.6, zorder=0)
    return P.svg(fig)


def _sol_chart(P: _Plots, results: list[Result]) -> str:
    """Per job: floor / measured time for the candidate (bar) and the reference (tick), linear %."""
    rows = [(r, d) for r, d in ((r, _roofline_data(r)) for r in results) if d and r.timing.cand_ms]
    n = len(rows)
    with P.mpl.rc_context(P.rc):
        fig, ax = P.figure(11.2, 0.75 + 0.24 * n)
        sol = [d["floor_ms"] / r.timing.cand_ms * 100 for r, d in rows]
        ref = [d["floor_ms"] / r.timing.ref_ms * 100 if r.timing.ref_ms else None for r, d in rows]
        ax.barh(range(n), sol, height=0.6, color=[_speed_color(r) for r, _ in rows], alpha=0.85, zorder=2)
        pts = [(i, v) for i, v in enumerate(ref) if v is not None]
        if pts:
            ax.scatter([v for _, v in pts], [i for i, _ in pts], marker="|", s=90, color="#263238", zorder=3,
                       label="reference")
        for i, ((r, d), v) in enumerate(zip(rows, sol)):
            ax.text(v + 0.8, i, f"{v:.0f}% ({d.get('bound', '?')})", va="center", fontsize=7)
        ax.axvline(100, color="#263238", lw=0.9, ls="--", zorder=1)
        ax.set_xlim(0, max([100, *sol, *(v for _, v in pts)]) * 1.15)
        ax.set_yticks(range(n), [_label(r) for r, _ in rows])
        ax.set_ylim(n - 0.5, -0.5)
        ax.tick_params(axis="y", length=0)
        ax.grid(axis="x", color="#e0e0e0", lw=0.6, zorder=0)
        ax.set_xlabel("share of the speed of light: roofline floor / measured time (%; bar = candidate, "
                      "| = reference)")
        _fit_rows(P, fig, [_label(r) for r, _ in rows], 11.2, 0.75 + 0.24 * n)
    return P.svg(fig, tight=False)


class StripPlot:
    """Per-round medians of the reference and of the candidate, one small panel each with its own scale
    (the spread is what this shows; the ratio is in the numbers): the rounds as dots over a box (quartiles,
    whiskers to the extremes, a tick at the median). One figure whose artists are made once and given each
    job's data: a fresh figure per job costs ~10x more (axes, ticks), and a run may have hundreds of jobs."""

    PANELS = (("ref", "#607d8b"), ("cand", "#1565c0"))

    def __init__(self, P: _Plots):
        from matplotlib.patches import Rectangle
        from matplotlib.ticker import MaxNLocator
        self.P = P
        with P.mpl.rc_context(P.rc):
            self.fig = P.Figure(figsize=(3.8, 0.95))
            self.panels = []
            for k, (name, color) in enumerate(self.PANELS):
                ax = self.fig.add_axes((0.03 + 0.5 * k, 0.36, 0.44, 0.44))
                whisker, = ax.plot([0, 1], [0, 0], color=color, lw=0.8, zorder=1)
                boxp = ax.add_patch(Rectangle((0, -0.22), 1, 0.44, facecolor=color, alpha=0.18, edgecolor=color,
                                              lw=0.8, zorder=2))
                med, = ax.plot([0, 0], [-0.22, 0.22], color=color, lw=1.6, zorder=3)
                dots = ax.scatter([0], [0], s=8, color=color, zorder=4, linewidths=0)
                title = ax.set_title(name, fontsize=7.5, color=color, loc="left", pad=2)
                ax.set_yticks([])
                ax.set_ylim(-0.6, 0.6)
                ax.spines["left"].set_visible(False)
                ax.xaxis.set_major_locator(MaxNLocator(3))
                ax.tick_params(axis="x", labelsize=7, length=2, pad=1)
                ax.grid(axis="x", color="#eceff1", lw=0.6, zorder=0)
                self.panels.append((ax, whisker, boxp, med, dots, title, name))

    def svg(self, t) -> str:
        ref, cand = list(t.ref_rounds_ms or []), list(t.cand_rounds_ms or [])
        scale, unit = (1e3, "µs") if max(ref + cand) < 1 else (1.0, "ms")
        for (ax, whisker, boxp, med, dots, title, name), vals in zip(self.panels, (ref, cand)):
            ax.set_visible(bool(vals))
            if not vals:
                continue
            v = sorted(x * scale for x in vals)
            q1, m, q3 = _quantile(v, 0.25), _quantile(v, 0.5), _quantile(v, 0.75)
            whisker.set_xdata([v[0], v[-1]])
            boxp.set_x(q1)
            boxp.set_width(q3 - q1)
            med.set_xdata([m, m])
            dots.set_offsets([(x * scale, ((k * 0.618) % 1 - 0.5) * 0.5) for k, x in enumerate(vals)])
            pad = (v[-1] - v[0]) * 0.12 or v[-1] * 0.01 or 1e-3
            ax.set_xlim(v[0] - pad, v[-1] + pad)
            spread = (v[-1] - v[0]) / m * 100 if m else 0
            title.set_text(f"{name} ({unit}) · spread {spread:.1f}%")
        return self.P.svg(self.fig, tight=False)


def _quantile(sorted_vals: list[float], q: float) -> float:
    pos = (len(sorted_vals) - 1) * q
    i = int(pos)
    j = min(i + 1, len(sorted_vals) - 1)
    return sorted_vals[i] + (sorted_vals[j] - sorted_vals[i]) * (pos - i)


def compare_chart(P: _Plots, rows: list[dict]) -> str:
    """A dumbbell per job: base speedup (hollow) to new speedup (filled), log scale."""
    n = len(rows)
    if not n:
        return "<p>Neither run recorded a job.</p>"
    with P.mpl.rc_context(P.rc):
        fig, ax = P.figure(11.2, 0.75 + 0.24 * n)
        lo, hi = _log_limits([v for r in rows for v in (r["base_speedup"], r["new_speedup"])])
        for i, r in enumerate(rows):
            b, nw = r["base_speedup"], r["new_speedup"]
            color = CHANGE_COLOR.get(r["change"], UNSURE)
            if b and nw:
                ax.plot([b, nw], [i, i], color=color, lw=1.6, zorder=2)
            if b:
                ax.scatter([b], [i], s=30, facecolors="white", edgecolors="#546e7a", linewidths=1.1, zorder=3)
            if nw:
                ax.scatter([nw], [i], s=30, color=color, zorder=4)
            ax.text(max(v for v in (b, nw, 1.0) if v) * 1.06, i, r["change"], va="center", fontsize=7,
                    color=color)
        ax.axvline(1, color="#263238", lw=0.9, zorder=1)
        ax.set_xscale("log")
        ax.set_xlim(lo, hi * 1.8)
        P.log_axis(ax.xaxis)
        ax.set_yticks(range(n), [r["job"].replace("::", " · ") for r in rows])
        ax.set_ylim(n - 0.5, -0.5)
        ax.tick_params(axis="y", length=0)
        ax.grid(axis="x", color="#e0e0e0", lw=0.6, zorder=0)
        ax.set_xlabel("speedup over the reference (log): hollow = base run, filled = new run")
        _fit_rows(P, fig, [r["job"].replace("::", " · ") for r in rows], 11.2, 0.75 + 0.24 * n)
    return P.svg(fig, tight=False)
