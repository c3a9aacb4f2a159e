"""The HTML report and `kbench report`, from synthetic saved runs (no builds, no GPU)."""
from __future__ import annotations

import json
import re
import shutil
import struct
import subprocess
import sys
import zlib
from html.parser import HTMLParser
from pathlib import Path

import pytest

from conftest import ROOT
from kernelbench_cli import results as R
from kernelbench_cli.reports.html import render_compare_html, render_html, roofline_chart, _Plots
from kernelbench_cli.results import BuildInfo, Correctness, Flag, Result, Timing

COMPILER_LOG = ("[1/2] c++ -MMD -c fixture_ops.cpp -o fixture_ops.o\n"
                "fixture_ops.cpp:7:12: error: no match for 'operator<' (operand types are 'at::Tensor' and "
                "'std::vector<int>')\n    7 |   if (x < not_a_tensor) {\n      |       ~~^~~~~~~~~~~~~\n"
                "<script>alert('log')</script>\nninja: build stopped: subcommand failed.\n")


def _ok(problem: str, cand: str, speedup: float, ref_ms: float = 0.5, flags=(), status=R.OK) -> Result:
    rounds = 6
    ref = [ref_ms * (1 + 0.01 * ((k * 7) % 5 - 2)) for k in range(rounds)]
    return Result(problem=problem, candidate=cand, candidate_path=f"kernels/{problem}/{cand}.py", device="cuda",
                  dtype="float32", status=status, phase="done", run_id="20261201-000000-001",
                  message="" if status == R.OK else "integrity check failed: precision",
                  build=BuildInfo(status="cached", seconds=0.02, extensions=[{"name": f"kb_{cand}"}]),
                  correctness=Correctness(trials=5, passed=5, atol=1e-4, rtol=1e-4, max_abs_err=3e-6,
                                          max_rel_err=2e-5, weights="state_dict", oracle_err_ref=1e-6,
                                          oracle_err_cand=(9e-6 if flags else 1.1e-6)),
                  timing=Timing(clock="cuda-events", ref_ms=ref_ms, cand_ms=ref_ms / speedup, speedup=speedup,
                                ci_low=speedup * 0.98, ci_high=speedup * 1.02, rounds=rounds, samples=60,
                                ref_rounds_ms=ref, cand_rounds_ms=[x / speedup for x in ref],
                                stop_reason="ci-target"),
                  flags=list(flags), env={"gpu": "NVIDIA H200", "torch": "2.11.0", "cuda": "13.0"},
                  wall_s=7.5, finished_at=1796015716.0)


def synthetic_run(n_extra: int = 0) -> list[Result]:
    """Several problems: fast, slow, flagged, incorrect, compile error (log with '<'), crash."""
    res = [
        _ok("level1/1_Matmul_FP32", "simt128", 0.87, ref_ms=2.7),
        _ok("level1/3_Softmax", "row_cached", 1.29, ref_ms=0.05),
        _ok("level2/56_Matmul_Sigmoid_Sum", "fast", 1.49),
        _ok("level2/56_Matmul_Sigmoid_Sum", "fast_3xtf32", 1.28, status=R.INTEGRITY,
            flags=[Flag("precision", "error", "fp64 error 8.2x the reference's")]),
        Result(problem="level2/56_Matmul_Sigmoid_Sum", candidate="wrong", candidate_path="kernels/x/wrong.py",
               device="cuda", dtype="float32", status=R.INCORRECT, phase="correctness", run_id="20261201-000000-001",
               message="trial 0: 4096 elements outside atol=rtol=1e-4 (max abs err 5.0e-01)",
               correctness=Correctness(trials=5, passed=0, atol=1e-4, rtol=1e-4, max_abs_err=0.5, max_rel_err=1.0,
                                       mismatches=20480, weights="state_dict", detail="trial 0 mismatch")),
        Result(problem="level3/1_MLP_Block", candidate="compile_error", candidate_path="kernels/y/compile_error.py",
               device="cuda", dtype="float32", status=R.COMPILE_ERROR, phase="build", run_id="20261201-000000-001",
               message="kb_mlp failed to build (see the compiler log)",
               build=BuildInfo(status="failed", seconds=3.2, log=COMPILER_LOG)),
        Result(problem="level3/1_MLP_Block", candidate="segfault", candidate_path="kernels/y/segfault.py",
               device="cuda", dtype="float32", status=R.CRASH, phase="correctness", run_id="20261201-000000-001",
               message="worker killed by SIGSEGV", stderr_tail="Fatal Python error: Segmentation fault\n"),
    ]
    res += [_ok(f"level1/{100 + k}_Extra", f"cand{k}", 0.6 + 0.05 * k, ref_ms=0.01 * (k + 1)) for k in range(n_extra)]
    return res


def write_run(root: Path, results: list[Result], run_id: str = "20261201-000000-001") -> Path:
    run = root / run_id
    run.mkdir(parents=True)
    for r in results:
        r.run_id = run_id
    (run / "results.jsonl").write_text("".join(r.to_json() + "\n" for r in results))
    return run


class _Refs(HTMLParser):
    """Every attribute value of every tag, and the tags seen."""

    def __init__(self):
        super().__init__()
        self.attrs, self.tags = [], set()

    def handle_starttag(self, tag, attrs):
        self.tags.add(tag)
        self.attrs += [(tag, k, v or "") for k, v in attrs]


def assert_self_contained(page: str) -> None:
    p = _Refs()
    p.feed(page)
    external = [(t, k, v) for t, k, v in p.attrs if re.match(r"\s*(https?:)?//", v)]
    assert not external, external[:5]
    assert not {"script", "link", "iframe", "img"} & p.tags
    assert not re.search(r"https?://", page), re.search(r".{60}https?://.{60}", page)
    assert "@import" not in page and not re.search(r"url\(\s*['\"]?(https?:)?//", page)


def test_html_holds_every_job_escapes_the_log_and_embeds_svg(tmp_path):
    results = R.load_results(write_run(tmp_path, synthetic_run()))
    page = render_html(results, source="runs/x/results.jsonl")
    for r in results:
        assert f"{r.problem} · <b>{r.candidate}</b>" in page, r.job_id
        assert '<span class="badge' in page and r.status in page
    assert "<b>3 / 7</b>" in page                               # correct / total (the flagged one is not correct)
    assert "integrity check failed: precision" in page and "precision</b> (error)" in page
    assert "fp64 error 8.2x the reference&#x27;s" in page
    assert "5.00e-01" in page and "20,480" in page               # error numbers of the incorrect job
    # the compiler log is there, escaped: no raw '<' from it reaches the markup
    assert "&#x27;operator&lt;&#x27;" in page and "std::vector&lt;int&gt;" in page
    assert "&lt;script&gt;alert(&#x27;log&#x27;)&lt;/script&gt;" in page and "<script" not in page
    assert page.count("<svg") == 2 + 4                            # speedup + time charts, 4 jobs with rounds
    assert "p=1.5" in page and "p=2" in page                      # fast_p table
    assert "carry no FLOP or byte counts" in page                 # the roofline note
    assert_self_contained(page)


def test_roofline_replaces_the_time_chart_when_results_carry_flops():
    """Result.roofline as roofline.floor() writes it: flops, bytes, floor_ms, bound, sol."""
    results = synthetic_run()[:3]
    rate, bw = 50e12, 4e12                       # ceilings the floors below were computed with
    for r, flops, nbytes in zip(results, (2e9, 0, 8e9), (4e7, 8e6, 1e6)):
        floor_s = max(flops / rate, nbytes / bw)
        r.roofline = {"flops": flops, "bytes": nbytes, "floor_ms": floor_s * 1e3,
                      "bound": "compute" if flops / rate > nbytes / bw else "memory"}
    svg, caption = roofline_chart(_Plots(), results)
    assert caption.startswith("Roofline:") and "arithmetic intensity" in svg
    assert "50 TFLOP/s" in svg and "4,000 GB/s" in svg           # ceilings recovered from the floors
    assert svg.count("<svg") == 2 and "speed of light" in svg    # roofline + share of the speed of light
    page = render_html(results)
    assert "roofline floor" in page and "memory-bound" in page and "no FLOP or byte counts" not in page


def test_comparison_html(tmp_path):
    base = synthetic_run()
    new = synthetic_run()
    new[0] = _ok("level1/1_Matmul_FP32", "simt128", 1.74, ref_ms=2.7)          # 2x faster than base
    new[2] = _ok("level2/56_Matmul_Sigmoid_Sum", "fast", 1.49, flags=[], status=R.INCORRECT)
    new.append(_ok("level1/9_Conv2d", "igemm", 0.81))
    page = render_compare_html(base, new, "runs/a/results.jsonl", "runs/b/results.jsonl")
    rows = dict(re.findall(r"<tr><td>([^<]+)</td>.*?class=\"badge [^\"]+\">([^<]+)</span></td></tr>", page))
    assert rows["level1/1_Matmul_FP32::simt128"] == "faster"
    assert rows["level2/56_Matmul_Sigmoid_Sum::fast"] == "broke"
    assert rows["level1/3_Softmax::row_cached"] == "same"
    assert rows["level1/9_Conv2d::igemm"] == "added"
    assert rows["level3/1_MLP_Block::compile_error"] == "still failing"
    assert "2.000×" in page                                       # new/base ratio of the faster job
    assert page.count("<svg") == 1
    assert_self_contained(page)


def test_report_command_rerenders_the_tables_of_a_saved_run(tmp_path):
    """The real CLI in a subprocess: `python -m kernelbench_cli report <run-dir> --html FILE`."""
    import os
    run = write_run(tmp_path / "runs", synthetic_run())
    out = tmp_path / "sub" / "report.html"
    env = dict(os.environ, PYTHONPATH=str(ROOT), COLUMNS="200")
    proc = subprocess.run([sys.executable, "-m", "kernelbench_cli", "report", str(run), "--html", str(out)],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 1, proc.stderr      # the run has failed jobs: report exits 1, as bench did
    for r in synthetic_run():
        assert r.candidate in proc.stdout and r.problem.split("/")[1][:12] in proc.stdout
    assert "3/7 correct" in proc.stdout and "failed to build" in proc.stdout
    assert out.is_file() and out.read_text().count("<svg") == 6 and f"wrote {out}" in proc.stderr


def _main(monkeypatch, capsys, *args) -> tuple[int, str, str]:
    """cli.main in this process (the subprocess above already covers `python -m`; torch imports once)."""
    from kernelbench_cli import cli
    monkeypatch.setattr(sys, "argv", ["kbench", *map(str, args)])
    monkeypatch.setenv("COLUMNS", "200")
    with pytest.raises(SystemExit) as exit_:
        cli.main()
    out, err = capsys.readouterr()
    return exit_.value.code, out, err


def test_report_compares_two_runs_by_id_and_rejects_an_unknown_one(tmp_path, monkeypatch, capsys):
    runs = tmp_path / "runs"
    base = write_run(runs, synthetic_run())
    new = synthetic_run()
    new[1] = _ok("level1/3_Softmax", "row_cached", 2.6, ref_ms=0.05)
    write_run(runs, new, run_id="20261202-000000-002")
    code, out, err = _main(monkeypatch, capsys, "report", base.name, "20261202-000000-002", "--out", runs,
                           "--html", tmp_path / "cmp.html")
    assert code == 1, err                          # the new run still has failed jobs
    assert "compare 20261201-000000-001 → 20261202-000000-002" in out
    assert "still failing" in out and "faster" in out and "2.02×" in out
    assert (tmp_path / "cmp.html").read_text().count("<svg") == 1
    code, out, err = _main(monkeypatch, capsys, "report", "20261202-000000-002", "--out", runs, "--json")
    doc = json.loads(out)                          # --json: the run as bench --json gives it; tables on stderr
    assert code == 1 and doc["run_id"] == "20261202-000000-002" and len(doc["results"]) == len(new)
    assert doc["summary"]["correct"] == sum(r.status == "ok" for r in new) and "correct" in err
    code, out, err = _main(monkeypatch, capsys, "report", "20261201-000000-00x", "--out", runs)
    assert code == 2 and err.strip().count("\n") == 0
    assert "unknown run '20261201-000000-00x'" in err and "did you mean 20261201-000000-001" in err


def _png_colours(png: Path) -> int:
    """Distinct pixel colours of a PNG (PIL if present; else decode the 8-bit RGB/RGBA PNG with zlib)."""
    try:
        from PIL import Image
        with Image.open(png) as im:
            colours = im.convert("RGB").getcolors(maxcolors=1 << 24)
        return len(colours)
    except ImportError:
        pass
    data = png.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    pos, idat, width, height, bpp = 8, b"", 0, 0, 0
    while pos < len(data):
        length, kind = struct.unpack(">I4s", data[pos:pos + 8])
        chunk = data[pos + 8:pos + 8 + length]
        if kind == b"IHDR":
            width, height, depth, ctype = struct.unpack(">IIBB", chunk[:10])
            assert depth == 8 and ctype in (2, 6), "only 8-bit RGB/RGBA"
            bpp = 3 if ctype == 2 else 4
        elif kind == b"IDAT":
            idat += chunk
        pos += 12 + length
    raw, stride, prev, colours = zlib.decompress(idat), width * bpp, bytearray(width * bpp), set()
    for y in range(height):
        f, line = raw[y * (stride + 1)], bytearray(raw[y * (stride + 1) + 1:(y + 1) * (stride + 1)])
        for i in range(stride):
            a = line[i - bpp] if i >= bpp else 0
            b, c = prev[i], prev[i - bpp] if i >= bpp else 0
            pred = (0, a, b, (a + b) // 2, min((a, b, c), key=lambda v: abs(a + b - c - v)))[f]
            line[i] = (line[i] + pred) & 0xFF
        colours.update(bytes(line[i:i + 3]) for i in range(0, stride, bpp * 7))
        prev = line
    return len(colours)


def test_html_renders_in_headless_chromium(tmp_path):
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    if not chromium:
        pytest.skip("chromium not installed (Debian: apt-get install -y chromium; .ci/run does this)")
    page = tmp_path / "report.html"
    page.write_text(render_html(synthetic_run(), source="synthetic"))
    png = tmp_path / "shot.png"
    flags = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
             "--disable-background-networking", "--disable-component-update", "--disable-sync",
             f"--user-data-dir={tmp_path / 'profile'}", "--enable-logging=stderr", "--v=0",
             "--window-size=1280,2000"]
    proc = subprocess.run([chromium, *flags, f"--screenshot={png}", page.as_uri()],
                          capture_output=True, text=True, timeout=120)
    assert png.is_file() and png.stat().st_size > 5000, proc.stderr[-2000:]
    assert "Uncaught" not in proc.stderr, proc.stderr[-2000:]
    assert _png_colours(png) > 20, "the screenshot is (nearly) one colour: the page did not render"
    dom = subprocess.run([chromium, *flags, "--dump-dom", page.as_uri()], capture_output=True, text=True,
                         timeout=120)
    assert "Uncaught" not in dom.stderr, dom.stderr[-2000:]
    for r in synthetic_run():
        assert f'<b>{r.candidate}</b>' in dom.stdout, r.job_id
    assert dom.stdout.count("<svg") == 6
