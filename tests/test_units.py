"""Pure functions, checked against hand-computed values."""
from __future__ import annotations

from pathlib import Path

import pytest
import torch

from kernelbench_cli import stats
from kernelbench_cli.catalog import Catalog, detect_backend, read_candidate
from kernelbench_cli.config import load_config
from kernelbench_cli.correctness import (check_inputs_unchanged, compare,
                                         level_fingerprint, precision_class, precision_flag,
                                         reduced_precision_errors, rel_l2)
from kernelbench_cli.errors import InputError
from kernelbench_cli.results import Correctness, Result

ROOT = Path(__file__).resolve().parent.parent


def test_geomean_and_median():
    assert stats.geomean([1, 4]) == pytest.approx(2.0)
    assert stats.geomean([2, 8, 4]) == pytest.approx(4.0)
    assert stats.median([3, 1, 2, 10]) == 2.5
    with pytest.raises(ValueError):
        stats.geomean([1, 0])


def test_the_speedup_is_taken_over_the_rounds_near_the_median():
    """stats.central: Transpose tiled64's 39 rounds on a lent H100 (session 32), 12 of them priced while the judge's
    host was late: over all rounds 2.34, over the central ones the 2.47-2.49 of the clean rounds and of the same
    kernel's two other processes. Tight rounds within the 1% floor are all kept; rounds far off on either side
    are dropped (a lie in a few rounds reads high there); where under half would stay, nothing is dropped."""
    late = [2.153, 1.517, 1.969, 1.715, 1.796, 2.121, 1.936, 2.064, 2.425]
    clean = [2.477, 2.479, 2.487, 2.475, 2.462, 2.476, 2.478, 2.459, 2.476, 2.472, 2.489, 2.487, 2.47, 2.481, 2.473,
             2.479, 2.474, 2.478, 2.477, 2.476, 2.476, 2.494, 2.482, 2.476, 2.469, 2.478, 2.47, 2.472, 2.463, 2.464]
    rounds = late + clean
    assert stats.geomean(rounds) < 2.36 and 2.47 < stats.geomean(stats.central(rounds)) < 2.48
    assert sorted(stats.central(rounds)) == sorted(clean + [2.425])       # 2% off the median: inside the band
    aa = [1.003, 0.998, 1.006, 0.994, 1.001, 1.009]                      # within the floor: all kept
    assert stats.central(aa) == aa
    assert sorted(stats.central([1.0, 1.01, 0.99, 1.0, 9.0])) == [0.99, 1.0, 1.0, 1.01]      # a lie's round: out
    assert stats.central([1.0, 2.0, 3.0, 4.0]) == [1.0, 2.0, 3.0, 4.0]   # no centre to speak of: all kept
    assert stats.central([1.0, 5.0]) == [1.0, 5.0]


def test_bootstrap_ci_brackets_the_geomean_and_collapses_for_constant_ratios():
    lo, hi = stats.bootstrap_geomean_ci([2.0] * 8)
    assert lo == pytest.approx(2.0) and hi == pytest.approx(2.0)
    ratios = [1.0, 1.1, 0.9, 1.05, 0.95, 1.02, 0.98, 1.0]
    lo, hi = stats.bootstrap_geomean_ci(ratios)
    assert lo < stats.geomean(ratios) < hi and hi - lo < 0.12


def test_fast_p_counts_all_jobs_in_the_denominator():
    # 4 jobs: two correct and faster than 1x, one correct but slower, one incorrect
    assert stats.fast_p([1.5, 2.5, 0.8, None], 1.0) == 0.5
    assert stats.fast_p([1.5, 2.5, 0.8, None], 2.0) == 0.25
    assert stats.fast_p([1.5, 2.5, 0.8, None], 0.0) == 0.75
    assert stats.fast_p([], 1.0) == 0.0


def test_wipe_sets_every_byte_of_a_views_whole_storage():
    """Reference.slots wipes a reused buffer between jobs: the whole storage, not only the view a lane shows
    (lane 0's inputs are views into twice their size), so nothing the last job's candidate wrote survives."""
    from kernelbench_cli.judge.reference import wipe
    base = torch.arange(64, dtype=torch.float32)
    view = base[8:40:2]
    ints = torch.arange(10, dtype=torch.int64)
    wipe(view)
    wipe(ints)
    assert torch.isnan(base).all()
    assert (ints == -1).all()


def test_compare_counts_mismatches_and_errors():
    r = torch.tensor([1.0, 2.0, 3.0, 4.0])
    c = torch.tensor([1.0, 2.00001, 3.5, 4.0])
    s = compare(r, c, atol=1e-4, rtol=1e-4)
    assert s["mismatches"] == 1 and s["max_abs"] == pytest.approx(0.5)
    assert s["max_rel"] == pytest.approx(0.5 / 3)
    assert compare(r, r.clone(), 1e-4, 1e-4)["reason"] is None


def test_compare_nan_positions_must_match():
    r = torch.tensor([1.0, float("nan")])
    assert compare(r, torch.tensor([1.0, float("nan")]), 1e-4, 1e-4)["reason"] is None
    assert "NaN" in compare(r, torch.tensor([1.0, 2.0]), 1e-4, 1e-4)["reason"]


def test_compare_inf_must_have_the_reference_sign():
    r = torch.tensor([1.0, float("-inf"), float("inf")])
    assert compare(r, r.clone(), 1e-4, 1e-4)["reason"] is None
    s = compare(r, torch.tensor([1.0, float("inf"), float("inf")]), 1e-4, 1e-4)
    assert s["mismatches"] == 1 and "wrong sign" in s["reason"], s


def test_input_mutation_check():
    x = torch.randn(6)
    assert check_inputs_unchanged([x], [x.clone()]) is None
    y = x.clone()
    y[0] += 1
    assert "input 0 was modified" in check_inputs_unchanged([x], [y])


def test_rel_l2_and_precision_flag():
    oracle = torch.tensor([3.0, 4.0], dtype=torch.float64)
    assert rel_l2(torch.tensor([3.0, 4.0]), oracle) == 0.0
    assert rel_l2(torch.tensor([3.0, 4.5]), oracle) == pytest.approx(0.1)
    levels = {"tf32": 2.0e-4, "fp16": 2.6e-4, "bf16": 2.1e-3}
    # another fp32 summation order: 12x the reference's error, orders of magnitude under any reduced precision
    assert precision_class(6.5e-7, 5.2e-8, levels, 4.0) == "fp32"
    # within the factor of the reference: fp32 whatever the levels
    assert precision_class(1.5e-7, 5.2e-8, {"tf32": 1.6e-7}, 4.0) == "fp32"
    # fp16-rounded inputs: past the log-midpoint towards fp16, nearest to fp16's cost
    assert precision_class(1.6e-5, 5.2e-8, {"fp16": 2.6e-4, "bf16": 2.1e-3}, 4.0) == "fp16"
    # a TF32 GEMM whose cost is only a few times fp32's (no ulp floor to hide under)
    assert precision_class(3.1e-7, 6.0e-8, {"tf32": 3.0e-7, "bf16": 4e-3}, 4.0) == "tf32"
    # measured on the H200 (L2/56, cuBLAS TF32 from C++): a row sum of sigmoids averages TF32's error down to
    # 6.5x fp32's, under 4x an ulp-sized floor; the floor is an eighth of an ulp, so this is TF32
    assert precision_class(2.06e-7, 3.16e-8, {"tf32": 2.11e-7, "fp16": 1.4e-4, "bf16": 9.5e-4}, 4.0) == "tf32"
    assert precision_class(5e-1, 5.2e-8, levels, 4.0) == "below-bf16"
    assert precision_class(1.6e-5, 5.2e-8, levels, 0) == "fp32"            # the check switched off
    flagged = precision_flag(Correctness(oracle_err_ref=5.2e-8, oracle_err_cand=1.6e-5, max_abs_err=0.5,
                                         precision_class="fp16", precision_levels=levels), torch.float32, 4.0)
    assert flagged and "fp16-level" in flagged.detail and "norm-wise relative error" in flagged.detail
    assert "max abs err 5.00e-01" in flagged.detail
    assert precision_flag(Correctness(oracle_err_ref=5.2e-8, oracle_err_cand=6.5e-7, precision_class="fp32",
                                      precision_levels=levels), torch.float32, 4.0) is None
    # half runs keep the ratio rule: 50x the reference's error and above 2 ulps of fp16
    assert precision_flag(Correctness(oracle_err_ref=1e-4, oracle_err_cand=5e-3), torch.float16, 4.0)
    assert precision_flag(Correctness(oracle_err_ref=1e-4, oracle_err_cand=2e-4), torch.float16, 4.0) is None


def test_the_level_fingerprint_tells_a_library_switched_to_a_level_from_an_fp32_kernel():
    """A candidate whose output is that of the reference at a level (cuBLAS with TF32 on reproduces it almost
    bit for bit) is at that level even where its error is near fp32's; an fp32 kernel with its own rounding is
    not, whatever its error."""
    g = torch.Generator().manual_seed(0)
    oracle = torch.randn(4096, generator=g, dtype=torch.float64)
    ref = (oracle + 3e-8 * torch.randn(4096, generator=g, dtype=torch.float64)).float()
    at_tf32 = (oracle + 2e-7 * torch.randn(4096, generator=g, dtype=torch.float64)).float()
    switched = at_tf32 + 1e-9 * torch.randn(4096, generator=g)
    honest = (oracle + 1e-7 * torch.randn(4096, generator=g, dtype=torch.float64)).float()
    er = rel_l2(ref, oracle)
    assert level_fingerprint(switched, ref, {"tf32": at_tf32}, rel_l2(switched, oracle), er) == "tf32"
    assert level_fingerprint(honest, ref, {"tf32": at_tf32}, rel_l2(honest, oracle), er) == ""
    assert level_fingerprint(ref.clone(), ref, {"tf32": at_tf32}, er, er) == ""


def test_reduced_precision_errors_of_a_reference_on_the_cpu():
    torch.manual_seed(0)
    model = torch.nn.Linear(256, 64).eval()
    x = torch.randn(32, 256)
    with torch.no_grad():
        out = model(x)
        oracle = model.double()(x.double())
    model.float()
    levels = reduced_precision_errors(model, [x], oracle, "cpu")
    assert "tf32" not in levels                       # no TF32 on a CPU
    fp32 = rel_l2(out, oracle)
    assert levels["bf16"] > levels["fp16"] > 100 * fp32
    assert model.weight.dtype == torch.float32        # the reference itself is untouched


def test_config_layers_and_errors(tmp_path):
    path = tmp_path / "c.yaml"
    path.write_text("trials: 7\ntiming:\n  budget_s: 2\n")
    cfg = load_config(path, overrides={"device": "cpu"}, sets=["timing.budget_s=9", "seed=3"])
    assert (cfg.trials, cfg.timing.budget_s, cfg.seed, cfg.device) == (7, 9.0, 3, "cpu")
    for name in ("default", "ci", "quick"):
        load_config(ROOT / "configs" / f"{name}.yaml")
    with pytest.raises(InputError, match="allowed keys here"):
        load_config(sets=["timing.nope=1"])


def test_catalog_resolution():
    cat = Catalog(ROOT / "problems", ROOT / "kernels")
    assert cat.resolve("cpu/1").key == "cpu/1_Add_ReLU"
    assert cat.resolve("1_Add_ReLU").key == "cpu/1_Add_ReLU"
    assert cat.resolve("level2/56").stem == "56_Matmul_Sigmoid_Sum"
    assert cat.resolve(str(ROOT / "problems/cpu/2_Row_Sum_Of_Squares.py")).level == "cpu"
    with pytest.raises(InputError, match="did you mean"):
        cat.resolve("56_Matmul_Sigmoid_Summ")


def test_backend_detection(tmp_path):
    import ast
    assert detect_backend(ast.parse("load_inline(name='a', cpp_sources=[s], cuda_sources=[c])")) == "cuda"
    assert detect_backend(ast.parse("cpp_extension.load_inline('a', [s])")) == "cpu"
    assert detect_backend(ast.parse("import triton\n")) == "triton"
    assert detect_backend(ast.parse("x = 1\n")) == "torch"
    assert detect_backend(ast.parse("BACKEND = 'cuda'\nload_inline('a', [s])")) == "cuda"
    # the registry: the first backend found names the candidate; every one found installs its hook
    from kernelbench_cli import backends
    assert backends.detect(ast.parse("import triton\nload_inline('a', [s])")) == ("triton", ("triton", "cpu"))
    assert backends.detect(ast.parse("from triton import language\nBACKEND = 'cpu'")) == ("cpu", ("triton",))
    assert backends.interpreted("triton", "cpu") and not backends.interpreted("triton", "cuda")
    assert not backends.interpreted("cpu", "cpu")
    t = tmp_path / "t.py"
    t.write_text("import triton\nclass ModelNew: pass\n")
    assert read_candidate(t).runs_on("cpu") and read_candidate(t).runs_on("cuda")
    f = tmp_path / "c.py"
    f.write_text("def f(:\n")
    assert "syntax error" in read_candidate(f).file_error


def test_result_round_trips_through_json():
    import json
    r = Result(problem="cpu/1_Add_ReLU", candidate="x", candidate_path="x.py", device="cpu", dtype="float32")
    r.correctness.passed = 3
    back = Result.from_dict(json.loads(r.to_json()))
    assert back == r


def test_kernel_names_see_past_attribute_macros():
    from kernelbench_cli.integrity import kernel_names
    src = """
    __global__ void plain(float* y) {}
    template <bool CHECK>
    __global__ void __launch_bounds__(BT * BT) tiled(const float* x, int64_t n) {}
    __global__ void __launch_bounds__(THREADS, 1)
    two_line(const float* __restrict__ x) {}
    __global__ void __cluster_dims__(8, 1, 1) __launch_bounds__(max(64, N)) clustered(float* y) {}
    extern "C" __global__ __launch_bounds__(256) void attrs_first(float* y) {}
    """
    assert kernel_names([src]) == {"plain", "tiled", "two_line", "clustered", "attrs_first"}


def test_a_candidate_closer_to_fp64_than_the_reference_is_not_wrong():
    # Reference (x + 1e4) - 1e4 in fp32 loses ~1e-3; the candidate returns x exactly (the fp64 answer).
    x = torch.rand(1000, dtype=torch.float64)
    ref, oracle = ((x.float() + 1e4) - 1e4), x
    exact, wrong = x.float(), x.float() + 2e-3
    assert compare(ref, exact, 1e-4, 1e-4)["reason"] is not None            # fails against fp32 alone
    ok = compare(ref, exact, 1e-4, 1e-4, oracle)
    assert ok["reason"] is None and ok["oracle_passed"] > 0
    assert compare(ref, wrong, 1e-4, 1e-4, oracle)["reason"] is not None    # further from fp64 than ref: wrong


def test_roofline_floor_uses_the_operands_dtype():
    from kernelbench_cli import roofline
    mm = lambda a, b: a @ b  # noqa: E731
    a, b = torch.randn(64, 32).bfloat16(), torch.randn(32, 16).bfloat16()
    ref = torch.nn.Module()
    ref.forward = mm
    work = roofline.count(ref, [a, b], mm(a, b))
    assert work["dtype"] == "bfloat16" and work["flops"] == 2 * 64 * 32 * 16
    ceilings = {"copy_gbps": 1e12, "matmul_tflops": {"float32": 1.0, "bfloat16": 10.0}}
    assert roofline.floor(work, ceilings, "float32")["floor_ms"] == pytest.approx(work["flops"] / 10e12 * 1e3)


def test_report_notes_say_what_qualifies_a_verdict():
    from kernelbench_cli.reports.terminal import notes
    r = Result(problem="p", candidate="c", candidate_path="c.py", device="cuda", dtype="float32")
    assert notes(r) == []
    r.correctness.oracle_passed = 7
    r.timing.throttled_rounds, r.timing.throttled_kept = 9, True
    r.timing.clock, r.timing.ref_ms, r.timing.cand_ms, r.timing.ref_host_ms, r.timing.cand_host_ms = \
        "cuda-events", 0.2, 0.01, 0.25, 0.03
    text = " | ".join(notes(r))
    assert "7 element(s)" in text and "float64" in text
    assert "host time per call" in text and "throttled" in text and "all were kept" in text


def test_speed_under_the_roofline_floor():
    from kernelbench_cli import integrity
    assert integrity.check_speed(2.0, 1.0, 0.7).name == "impossible-speed"           # CUDA: an error
    assert integrity.REGISTRY["impossible-speed"].severity == "error"
    assert integrity.check_speed(2.0, 1.0, 0.8) is None          # within the margin over torch's own ceilings
    assert integrity.check_speed(14.0, 0.1, 1.0) is None         # a high speedup alone is no flag
    assert integrity.check_speed(2.0, 1.0, 0.9, "cpu").name == "suspicious-speed"     # rough CPU ceilings


KERNEL_WITH_PYTHON = """
import numpy as np
import triton
import triton.language as tl
def helper(v):
    return v
h = helper
@triton.jit
def k(x_ptr, o_ptr, BLOCK: tl.constexpr):
    v = tl.load(x_ptr + tl.arange(0, BLOCK))
    w = np.sin(v.handle.data)
    v = helper(v)
    v = h(v)
    v = getattr(tl, "exp")(v)
    tl.store(o_ptr + tl.arange(0, BLOCK), tl.exp(v).to(tl.float32), mask=None)
k2 = triton.jit(globals()["helper"])
"""


def test_triton_kernels_may_call_only_triton():
    """The interpreter runs any Python in a kernel body; the static rule allows only what Triton compiles."""
    from kernelbench_cli.integrity import rule_triton_python
    import ast
    hits = sorted(rule_triton_python(ast.parse(KERNEL_WITH_PYTHON)))
    said = " | ".join(what for _, what in hits)
    for needle in (".handle", "uses np (numpy)", "uses helper", "calls h,", "calls getattr", "built at run time"):
        assert needle in said, (needle, said)
    assert [line for line, _ in hits if line == 15] == []      # tl.exp, .to, tl.store: Triton
    for f in (ROOT / "kernels").glob("*/*/triton_*.py"):
        assert list(rule_triton_python(ast.parse(f.read_text()))) == [], f


def test_the_table_keeps_times_and_build_at_100_columns_and_no_error_for_an_output_never_compared():
    """Issue 19: at 100 columns the table kept only candidate/correct/speedup/flags; a wrong-shape output (never
    compared) showed max err 0.0; `custom` stayed as a column of dashes."""
    from rich.console import Console

    from kernelbench_cli.reports.terminal import table
    from kernelbench_cli.results import BuildInfo, Timing
    ok = Result(problem="cpu/1_Add_ReLU", candidate="fused", candidate_path="f.py", device="cpu", dtype="float32",
                status="ok", build=BuildInfo(status="cached"), correctness=Correctness(trials=3, passed=3, max_abs_err=1e-7),
                timing=Timing(ref_ms=1.5, cand_ms=0.75, speedup=2.0, ci_low=1.9, ci_high=2.1))
    shape = Result(problem="cpu/1_Add_ReLU", candidate="wrong_shape", candidate_path="w.py", device="cpu",
                   dtype="float32", status="incorrect", build=BuildInfo(status="cached"),
                   correctness=Correctness(trials=3, detail="trial 0: output 0 has shape (3,), expected (4,)"))
    console = Console(width=100, record=True)
    console.print(table([ok, shape], "bench · cpu · run x", 100, caption="results: runs/x/results.jsonl"))
    text = console.export_text()
    header = next(line for line in text.splitlines() if "candidate" in line)
    assert all(col in header for col in ("build", "correct", "ref", "cand", "speedup")), header
    assert "max err" not in header and "custom" not in header and "SOL" not in header, header
    assert "1.500 ms" in text and "cached" in text and "results: runs/x/results.jsonl" in text
    assert "0.0e+00" not in table_text([shape], 200)                 # wide: max err shown, but not for a no-compare
    assert "1.0e-07" in table_text([ok], 200)
    # 80 columns (a CI log, a pipe): the jobs' names stay (they were squeezed out), times and build give way
    other = Result(problem="cpu/2_Row_Sum_Of_Squares", candidate="fused", candidate_path="g.py", device="cpu",
                   dtype="float32", status="ok", build=BuildInfo(status="cached"),
                   correctness=Correctness(trials=3, passed=3), timing=Timing(ref_ms=2.0, cand_ms=1.0, speedup=2.0,
                                                                              ci_low=1.9, ci_high=2.1))
    narrow = table_text([ok, shape, other], 80)
    assert all(len(line) <= 80 for line in narrow.splitlines())
    assert "cpu/1_Add_" in narrow and "wrong_sha" in narrow and "flags" in narrow, narrow
    assert "2.00× [1.90, 2.10]" in narrow and "750.0 µs" in narrow, narrow


def table_text(results, width: int) -> str:
    from rich.console import Console

    from kernelbench_cli.reports.terminal import table
    console = Console(width=width, record=True)
    console.print(table(results, "t", width))
    return console.export_text()


def test_a_compile_error_excerpt_keeps_the_quoted_source_and_finds_it_in_the_candidate(tmp_path):
    """Issue 19: the excerpt dropped gcc's source lines and numbered lines of the generated main.cpp only."""
    from kernelbench_cli.reports.terminal import _compiler_excerpt
    cand = tmp_path / "cand.py"
    cand.write_text('import torch\ncpp = r"""\nat::Tensor f(at::Tensor x) {\n  if (x < not_a_tensor) {\n"""\n')
    log = ("[1/2] c++ -MMD -MF main.o.d -DTORCH_EXTENSION_NAME=x -c /cache/x/main.cpp -o main.o\n"
           "FAILED: main.o\n/cache/x/main.cpp: In function 'at::Tensor f(at::Tensor)':\n"
           "/cache/x/main.cpp:7:12: error: no match for 'operator<' (operand types are 'at::Tensor' and 'int')\n"
           "    7 |   if (x < not_a_tensor) {\n      |       ~~^~~~~~~~~~~~~\nninja: build stopped: subcommand failed.\n")
    out = _compiler_excerpt(log, str(cand)).splitlines()
    assert out[0].startswith("/cache/x/main.cpp:7:12: error: no match") and len(out) == 3, out
    assert out[1].startswith("    7 |   if (x < not_a_tensor)") and out[1].endswith(f"<- {cand}:4"), out
    assert "~~^" in out[2] and not any("ninja" in ln or "FAILED" in ln for ln in out), out


def test_help_reads_in_the_usual_words():
    """Issue 19: typer printed Python types in --help (`--json <bool>`, `<list[str]>`)."""
    import os
    import subprocess
    import sys
    root = Path(__file__).resolve().parents[1]
    for cmd in ("bench", "check", "report", "compare"):
        proc = subprocess.run([sys.executable, "-m", "kernelbench_cli", cmd, "--help"], capture_output=True, text=True,
                              cwd=root, env=dict(os.environ, PYTHONPATH=str(root), COLUMNS="120"), timeout=60)
        assert proc.returncode == 0 and "--json" in proc.stdout + proc.stderr, proc.stderr[-500:]
        text = proc.stdout + proc.stderr
        assert "<bool>" not in text and "<list[" not in text and "<str>" not in text, text[:2000]


def test_a_crash_excerpt_keeps_the_candidate_frame_and_the_log_path():
    """Issue 19: a segfault's tail showed only kbench's frames (the candidate's scrolled out) and no log path."""
    from kernelbench_cli.reports.terminal import _failure_excerpt
    frames = [f'  File "/kb/candidate/process.py", line {i} in serve' for i in range(20)]
    tail = "\n".join(["Fatal Python error: Segmentation fault", "", "Current thread 0x1 (most recent call first):",
                      '  File "/k/cpu/1/segv.py", line 30 in forward'] + frames + ["(candidate log: /runs/x/job.log)"])
    out = _failure_excerpt(tail, "/k/cpu/1/segv.py").splitlines()
    assert out[0] == "Fatal Python error: Segmentation fault" and "segv.py\", line 30" in out[1], out
    assert out[-1] == "(candidate log: /runs/x/job.log)" and len(out) <= 11, out


def test_the_ablation_poisons_fresh_buffers_so_a_kernel_rewriting_a_stale_answer_is_seen():
    """An honest Triton kernel was flagged (cpu/3 triton_affine, special: nan): torch.empty_like handed back a
    block that still held, byte for byte, the answer of an earlier call, the kernel wrote the same bytes, and
    the ablation (writes seen as changed bytes) left the 'no-op' output alone: still right."""
    from kernelbench_cli.candidate.loading import ablated, nan_filled_allocations
    x = torch.randn(4096)
    answer = x * 2

    def kernel(x, out):                # an honest out= kernel
        out.copy_(x * 2)

    stale = answer.clone()             # what a reused block may hold: the blind spot, shown
    ablated(kernel, (x, stale), {})
    assert torch.equal(stale, answer)
    originals = (torch.empty, torch.empty_like, torch.empty_strided, torch.Tensor.new_empty)
    with nan_filled_allocations(torch):
        out = torch.empty_like(x)
        assert torch.isnan(out).all() and torch.isnan(torch.empty(3)).all() and torch.isnan(x.new_empty(2)).all()
        ablated(kernel, (x, out), {})
    assert not torch.allclose(out, answer)            # written, so noised
    assert (torch.empty, torch.empty_like, torch.empty_strided, torch.Tensor.new_empty) == originals   # restored


def test_a_cpu_run_says_its_cis_do_not_cover_run_to_run_noise():
    """Issue 19 item 9: the same CPU candidate measured 1.10x-3.00x over six runs, each with a narrow CI, and
    nothing said so. A timed CPU run now says it once; a GPU run does not."""
    from rich.console import Console

    from kernelbench_cli.reports.terminal import render
    from kernelbench_cli.results import Timing

    def run(device):
        r = Result(problem="cpu/1_Add_ReLU", candidate="fused", candidate_path="f.py", device=device,
                   dtype="float32", status="ok", correctness=Correctness(trials=3, passed=3),
                   timing=Timing(ref_ms=1.0, cand_ms=0.5, speedup=2.0, ci_low=1.9, ci_high=2.1))
        console = Console(width=200, record=True)
        render([r], console, "t")
        return console.export_text()
    assert "each CI covers this run's rounds only" in run("cpu") and "baseline from 3+ runs" in run("cpu")
    assert "each CI covers" not in run("cuda")


def test_the_fast_comparison_agrees_with_the_float64_one(monkeypatch):
    """compare() first checks in the outputs' own precision with a margin; whatever it concludes, the float64
    check must conclude the same, near the bar too (elements placed just inside and just outside it)."""
    import torch

    from kernelbench_cli import correctness as C
    g = torch.Generator().manual_seed(7)
    cases = []
    for scale in (1e-6, 1.0, 1e4):
        r = torch.randn(4096, generator=g) * scale
        bar = 1e-4 + 1e-4 * r.abs()
        for k in (0.5, 0.99999, 1.00001, 2.0):           # |c - r| as a multiple of the bar
            cases.append((r, r + k * bar))
        for dtype in (torch.float16, torch.bfloat16):
            cases.append((r.to(dtype), (r + 0.5 * bar).to(dtype)))
    nan = cases[0][1].clone()
    nan[3] = float("nan")
    cases += [(cases[0][0], nan), (torch.full((8,), float("inf")), torch.full((8,), float("inf")))]
    fast = [C.compare(r, c, 1e-4, 1e-4) for r, c in cases]
    concluded = [C._all_close_fast(r, c, 1e-4, 1e-4) is not None for r, c in cases]
    monkeypatch.setattr(C, "_all_close_fast", lambda *a: None)
    exact = [C.compare(r, c, 1e-4, 1e-4) for r, c in cases]
    for (r, c), a, b in zip(cases, fast, exact):
        assert (a["reason"] is None) == (b["reason"] is None) and a["mismatches"] == b["mismatches"], (a, b)
        assert abs(a["max_abs"] - b["max_abs"]) <= 1e-6 * max(b["max_abs"], 1e-30), (a, b)
    assert 3 <= sum(concluded) < len(cases)     # (the fast path concluded on some, left the others to float64)


def test_a_batch_counts_for_no_less_than_the_witness_accepts():
    """integrity.witnessed_per_call: an honest batch keeps its own figure; a batch the rule forgives as an
    outlier, lying 10x, is priced near the witness (lie_then_honest went through at 2x before, session 11)."""
    from kernelbench_cli.integrity import check_witness, witnessed_per_call
    assert witnessed_per_call(5 * 3.6, 5 * 3.6 + 1.3, 5, 1.3, 0.2, "cpu") == 3.6       # honest: its own time
    lie = witnessed_per_call(5 * 0.36, 5 * 3.6 + 1.3, 5, 1.3, 0.2, "cpu")              # claims 0.36 ms, took 3.6
    assert 3.6 - (0.65 + 0.8) / 5 - 1e-9 <= lie < 3.6, lie       # a lie spread evenly keeps the slack, no more
    # a 1.5x lie in every batch is over the CPU allowance (it passed unpriced at a ratio of 0.6: clock_hook_modest)
    assert check_witness([5 * 2.4] * 10, [5 * 3.6 + 1.3] * 10, [5] * 10, 1.3, 0.2, "cpu") is not None
    # the same lie in one batch of ten is forgiven by the rule as an outlier, but no longer by the price
    rep, wit = [5 * 3.6] * 9 + [5 * 0.36], [5 * 3.6 + 1.3] * 10
    assert check_witness(rep, wit, [5] * 10, 1.3, 0.2, "cpu") is None
    priced = [witnessed_per_call(r, w, 5, 1.3, 0.2, "cpu") for r, w in zip(rep, wit)]
    assert min(priced) > 3.6 / 1.2
    cuda = witnessed_per_call(11 * 0.028, 11 * 0.28 + 1.4, 11, 1.4, 0.05, "cuda")     # 10x event lie, one batch
    assert cuda > 0.028 * 5, cuda
    # a kernel shorter than the flag rule resolves (H200 batches of 32 calls, results/H200/witness-20261203-s14.txt):
    # the honest 0.026 ms kernel keeps its own time, the 10x lie about it (claims 0.0026) loses most of its gain
    assert check_witness([0.084] * 9, [5.80] * 9, [32] * 9, 4.44, 0.37, "cuda") is None   # the flag rule: blind
    assert witnessed_per_call(0.825, 5.32, 32, 4.41, 0.16, "cuda") == 0.825 / 32
    assert witnessed_per_call(0.084, 5.80, 32, 4.44, 0.37, "cuda") > 0.5 * 0.825 / 32
    # the same lie in batches of 48 with the hand-over pinged in rhythm (H100, session 28: priced 1.65x at a 0.5 ms
    # allowance): the allowance left to it is 0.35 ms a batch, 0.0073 ms a call
    assert witnessed_per_call(48 * 0.0026, 48 * 0.0263 + 3.8, 48, 3.8, 0.05, "cuda") > 0.0263 / 1.4
    # and in batches of 64 under a noisy hand-over (H100, session 30: sd 0.31 ms, excess 1.42 ms a batch): priced at
    # 1.73x by an allowance of twice the sd, under 1.4x by one sd
    assert witnessed_per_call(64 * 0.0026, 64 * 0.0026 + 6.38 + 1.42, 64, 6.38, 0.309, "cuda") > 0.026 / 1.4
    # a hand-over made noisy while it was pinged (sd 2 ms) widens the lie's allowance no further than the cap
    assert witnessed_per_call(64 * 0.0026, 64 * 0.0026 + 6.38 + 1.42, 64, 6.38, 2.0, "cuda") > 0.026 / 1.6


def test_late_work_needs_a_pattern_not_two_slow_context_switches():
    """The device probe's rule (judge/sides.DeviceProbe.late): an honest wgmma kernel had 2 of its 3 correctness
    probes slow on an H100 (session 30); a candidate that leaves work behind does so after every call."""
    from kernelbench_cli.judge.sides import DeviceProbe
    probe = DeviceProbe("cpu")
    for busy, probed, late in ((2, 3, False), (3, 3, True), (3, 15, True), (3, 16, False), (4, 16, True)):
        probe.busy_calls, probe.probed = busy, probed
        assert probe.late() is late, (busy, probed)
    # after a busy probe the judge probes until the device is idle, and all of that is the call's witness time
    # (the GPU's latencies stand in here: the loop is the judge's own rule)
    probe.cuda, probe.threshold_ms, probe.busy_calls, probe.probed = True, 0.5, 0, 0
    seen = iter([2.0, 1.5, 0.3, 9.9])
    probe.latency = lambda: next(seen)
    assert probe.after_call() == 2.0 + 1.5 + 0.3 and probe.busy_calls == 1 and probe.probed == 1
    seen = iter([0.3, 9.9])
    assert probe.after_call() == 0.3 and probe.busy_calls == 1


def test_the_witness_rule_sees_a_lie_in_a_minority_of_batches():
    """Three honest batches and two that hide 90% of their time (the red team's median_lie): the median batch is
    honest, the mean over batches is not. Honest noise (one slow batch among many) stays under the rule."""
    from kernelbench_cli.integrity import check_witness
    honest = dict(reported=[5 * 3.6] * 3, witness=[5 * 3.6 + 1.3] * 3)
    lying = dict(reported=[5 * 0.36] * 2, witness=[5 * 3.6 + 1.3] * 2)
    rep, wit = honest["reported"] + lying["reported"], honest["witness"] + lying["witness"]
    flag = check_witness(rep, wit, [5] * 5, 1.3, 0.2, "cpu")
    assert flag is not None and flag.name == "timer-tampered", flag
    assert check_witness(honest["reported"] * 3, honest["witness"] * 3, [5] * 9, 1.3, 0.2, "cpu") is None
    slow = [5 * 3.6 + 1.3] * 19 + [5 * 3.6 + 1.3 + 30.0]         # one batch 30 ms late (a descheduled core)
    assert check_witness([5 * 3.6] * 20, slow, [5] * 20, 1.3, 0.2, "cpu") is None
    # CI, 2026-12-02: an honest 0.43 ms kernel in batches of 8, one batch ~105 ms late among 10 flagged it
    # through the mean (1.31 ms per call unaccounted): the mean leaves the worst tenth of the batches out
    stall = [8 * 0.434 + 0.63 + 0.1] * 9 + [8 * 0.434 + 0.63 + 105.0]
    assert check_witness([8 * 0.434] * 10, stall, [8] * 10, 0.63, 0.05, "cpu") is None
    # ... and a lie in two of those ten batches is still seen
    lie2 = [8 * 0.434 + 0.63 + 0.1] * 8 + [8 * 0.434 + 0.63] * 2
    assert check_witness([8 * 0.434] * 8 + [8 * 0.0434] * 2, lie2, [8] * 10, 0.63, 0.05, "cpu") is not None
    assert check_witness([11 * 0.028] * 30, [11 * 0.028 + 1.4] * 29 + [11 * 0.028 + 6.4], [11] * 30, 1.4, 0.2,
                         "cuda") is None                          # (a GPU batch 5 ms late among 30)


def test_the_clock_canary_catches_a_clock_that_reads_short_and_only_that():
    """evidence.check_canary: kbench's own fixed work, at a size drawn in secret per batch, on the candidate
    process's clock before its import and after each timed batch. A clock read 10x short (the native event
    hook) is timer-tampered whatever the candidate's calls cost; one that reads short only on short intervals
    is caught by the small sizes; an honest spread (GPU clocks, a slow batch) is not; a canary left untimed on
    CUDA is; the CPU has none."""
    from kernelbench_cli.judge.evidence import check_canary
    sizes = {0: 0.002, 1: 0.008, 2: 0.033, 3: 0.13}          # ms per size, H200-like
    before = [(k, sizes[k] * f) for f in (0.98, 1.0, 1.03) for k in sizes]
    honest = [(0, 0.0019), (3, 0.131), (1, 0.0085), (2, 0.029), (3, 0.35), (0, 0.0031)]
    assert check_canary(before, honest, "cuda") is None
    lie = check_canary(before, [(k, sizes[k] * 0.1) for k in (3, 1, 0, 2, 2, 3)], "cuda")
    assert lie is not None and lie.name == "timer-tampered" and "10.0x short" in lie.detail, lie
    # short only below 0.1 ms: the three smaller sizes read short, the largest true
    below = check_canary(before, [(k, sizes[k] * (0.1 if sizes[k] < 0.1 else 1.0)) for k in (0, 1, 2, 3, 1, 0)], "cuda")
    assert below is not None and below.name == "timer-tampered", below
    assert check_canary(before, [(3, 0.13), (1, -1.0)], "cuda").name == "timer-tampered"   # the canary not timed
    assert check_canary([], [], "cpu") is None and check_canary([(0, -1.0)], [(0, -1.0)], "cpu") is None



def test_the_spin_inside_a_call_catches_a_clock_that_hides_it_or_spares_it():
    """evidence.check_inside: per batch [the call holding kbench's spin, the call after the same spin, the spin's
    time before the import, the batch's spread]. Honest, they agree once the spin is off, even noisy; a clock 10x
    short on the candidate's intervals hides the spin (event_hook_tracked); one that reads the interval holding
    kbench's launch true and the rest short makes that call long; a lie in a tenth of the batches is let be,
    in more it is not."""
    import random
    from kernelbench_cli.judge.evidence import check_inside
    rng = random.Random(7)

    def batches(inside, after=lambda k: k, n=30, kernel=0.025, sd=0.001):
        out = []
        for _ in range(n):
            s = rng.choice((0.033, 0.13))
            k1, k2 = (kernel + rng.gauss(0, sd) for _ in range(2))
            out.append([inside(s, k1), after(k2), s * rng.uniform(0.98, 1.02), sd])
        return out

    assert check_inside(batches(lambda s, k: s + k)) is None
    assert check_inside(batches(lambda s, k: s + k, kernel=2.0, sd=0.08)) is None            # a slow, noisy kernel
    hidden = check_inside(batches(lambda s, k: 0.1 * (s + k), lambda k: 0.1 * k))
    assert hidden is not None and hidden.name == "timer-tampered" and "shorter" in hidden.detail, hidden
    spared = check_inside(batches(lambda s, k: s + k, lambda k: 0.1 * k))
    assert spared is not None and "longer" in spared.detail, spared
    assert check_inside(batches(lambda s, k: s + k, lambda k: k / 3, kernel=0.2, sd=0.004)) is not None
    few = batches(lambda s, k: s + k)
    few[:3] = batches(lambda s, k: 0.1 * (s + k), lambda k: 0.1 * k, n=3)
    assert check_inside(few) is None                   # 3 of 30: a tenth
    few[3:5] = batches(lambda s, k: 0.1 * (s + k), lambda k: 0.1 * k, n=2)
    assert check_inside(few) is not None and check_inside([]) is None


def test_the_spin_inside_a_call_is_taken_off_that_call_at_its_time_before_the_import():
    """sides.RemoteSide._spun: the call holding kbench's spin is charged its own time only, less the spin's time
    measured before the import (the stand-in's, not the candidate clock's word, which could read it long to hide
    a call), and both spins come off the judge's wall; the record keeps what the candidate's clock said."""
    from types import SimpleNamespace
    from kernelbench_cli.judge.sides import RemoteSide
    side = object.__new__(RemoteSide)
    side.inside = []
    side.session = SimpleNamespace(canary_before=[(3, 9.0)] + [(3, 0.130), (3, 0.136), (2, 0.034), (3, 0.133)])
    times = [0.02, 0.021, 0.133 + 0.0205, 0.019]
    assert side._spun(times, 3, 2, 0) == 2 * 0.133          # the first ping (9.0, warming up) is not counted
    assert abs(times[2] - 0.0205) < 1e-9 and times[0] == 0.02
    assert side.inside == [[0.1535, 0.02, 0.133, round(0.0014826, 5)]]
    times = [0.01, 0.02]                         # a clock reading short: the call is not charged below 0
    side._spun(times, 2, 0, 1)
    assert times[0] == 0.0 and side.inside[-1] == [0.01, 0.02, 0.034, 0.0]

QUEUED_SIGNALS = r'''
import ctypes, os, platform, sys
from kernelbench_cli import sandbox
if not sandbox.confine():
    print("unsupported"); sys.exit()
nrs = {"x86_64": (129, 297), "aarch64": (138, 240)}[platform.machine()]
libc = ctypes.CDLL(None, use_errno=True)
info = (ctypes.c_int * 32)(0, 0, -1)          # signal 0, si_code SI_QUEUE: as to another process
parent, me = os.getppid(), os.getpid()
print(libc.syscall(nrs[0], parent, 0, info), libc.syscall(nrs[1], parent, parent, 0, info),
      libc.syscall(nrs[0], me, 0, info))
'''


OTHER_PROCESSES = r'''
import ctypes, os, platform, resource, sys
from kernelbench_cli import sandbox
if not getattr(sandbox, sys.argv[2])():
    print("unsupported"); sys.exit()
libc = ctypes.CDLL(None, use_errno=True)
ioprio_set = {"x86_64": 251, "aarch64": 30}[platform.machine()]
unused = 3999999                 # no process group or user has it: allowed, the kernel would say ESRCH
me, parent, sibling = os.getpid(), os.getppid(), int(sys.argv[1])


def errno(fn, *args):
    try:
        fn(*args)
        return 0
    except OSError as e:
        return e.errno


def raw(nr, *args):
    return 0 if libc.syscall(nr, *args) == 0 else ctypes.get_errno()


mask, nice = os.sched_getaffinity(0), os.getpriority(os.PRIO_PROCESS, 0)
param = os.sched_param(0)
others = [errno(os.sched_setaffinity, pid, mask) for pid in (parent, sibling)] + \
    [errno(os.setpriority, os.PRIO_PROCESS, pid, nice) for pid in (parent, sibling)] + \
    [errno(os.setpriority, os.PRIO_PGRP, unused, nice), errno(os.setpriority, os.PRIO_USER, unused, nice),
     errno(os.sched_setscheduler, sibling, os.SCHED_OTHER, param), errno(os.sched_setparam, sibling, param),
     errno(resource.prlimit, sibling, resource.RLIMIT_NOFILE), raw(ioprio_set, 1, sibling, 0),
     raw(ioprio_set, 3, unused, 0)]
own = [errno(os.sched_setaffinity, 0, mask), errno(os.sched_setaffinity, me, mask),
       errno(os.setpriority, os.PRIO_PROCESS, 0, nice), errno(os.setpriority, os.PRIO_PROCESS, me, nice),
       errno(os.sched_setscheduler, 0, os.SCHED_OTHER, param), errno(resource.prlimit, 0, resource.RLIMIT_NOFILE)]
print(" ".join(map(str, others)), "/", " ".join(map(str, own)))
'''


@pytest.mark.parametrize("confine", ["confine", "confine_build"])
def test_the_run_sandbox_refuses_another_processs_affinity_priority_and_limits(confine):
    """Session 23's red team: a confined candidate pinned the judge's waiting candidate processes to one core at
    nice 19 (sched_setaffinity, setpriority); with the same user and no capabilities, the kernel allowed it, and a
    non-root judge has none. Now those calls (and sched_setscheduler/param/attr, prlimit64, ioprio_set,
    migrate/move_pages) reach this process only; in a build process too (a Triton candidate's import runs there
    on the CPU, beside the judge). The child keeps its capabilities, so every EPERM below is the filter's; each
    refused call would have changed nothing (same mask, same nice) or found nobody (ESRCH)."""
    import errno
    import subprocess
    import sys
    sibling = subprocess.Popen(["sleep", "60"])
    try:
        proc = subprocess.run([sys.executable, "-c", OTHER_PROCESSES, str(sibling.pid), confine], text=True,
                              capture_output=True, timeout=120, cwd=ROOT,
                              env={**__import__("os").environ, "PYTHONPATH": str(ROOT)})
    finally:
        sibling.kill()
        sibling.wait()
    if proc.stdout.strip() == "unsupported":
        pytest.skip("no seccomp filter for this machine")
    others, own = proc.stdout.split("/")
    assert others.split() == [str(errno.EPERM)] * 11 and own.split() == ["0"] * 6, (proc.stdout, proc.stderr[-500:])


REALTIME = r"""
import os, resource, sys
from kernelbench_cli import sandbox
try:        # a host whose limits allow real-time and raised priority without capabilities
    resource.setrlimit(resource.RLIMIT_RTPRIO, (10, 10))
    resource.setrlimit(resource.RLIMIT_NICE, (30, 30))
except (OSError, ValueError):
    print("unraised"); sys.exit()
sandbox.drop_capabilities()
def errno(fn, *args):
    try:
        fn(*args)
        return 0
    except OSError as e:
        return e.errno
print(errno(os.sched_setscheduler, 0, os.SCHED_FIFO, os.sched_param(1)),
      errno(os.sched_setscheduler, 0, os.SCHED_RR, os.sched_param(1)),
      errno(os.setpriority, os.PRIO_PROCESS, 0, -1), errno(os.setpriority, os.PRIO_PROCESS, 0, 5))
"""


def test_a_candidate_gets_no_real_time_or_raised_priority():
    """A candidate's threads at SCHED_FIFO, or at a nice below the judge's, could hold the slot's cores from the
    judge's threads (the perf sampler's re-arming among them); with its capabilities gone, the limits that
    would still allow it (RLIMIT_RTPRIO, RLIMIT_NICE, where a host raised them) are 0 too. Lowering its own
    priority stays allowed."""
    import subprocess
    import sys
    proc = subprocess.run([sys.executable, "-c", REALTIME], text=True, capture_output=True, timeout=60, cwd=ROOT,
                          env={**__import__("os").environ, "PYTHONPATH": str(ROOT)})
    if proc.stdout.strip() == "unraised":
        pytest.skip("only root can raise the limits this test needs lowered")
    assert proc.stdout.split() == ["1", "1", "13", "0"], (proc.stdout, proc.stderr[-500:])


def test_the_run_sandbox_refuses_queued_signals_to_other_processes():
    """rt_sigqueueinfo / rt_tgsigqueueinfo reached the parent (the judge) from a confined candidate while kill
    was refused (session 19's red team); now they are checked as kill is: this process only."""
    import subprocess
    import sys
    proc = subprocess.run([sys.executable, "-c", QUEUED_SIGNALS], capture_output=True, text=True, timeout=120,
                          cwd=ROOT, env={**__import__("os").environ, "PYTHONPATH": str(ROOT)})
    if proc.stdout.strip() == "unsupported":
        pytest.skip("no seccomp filter for this machine")
    assert proc.stdout.split() == ["-1", "-1", "0"], (proc.stdout, proc.stderr[-500:])


def test_a_flush_held_back_past_its_time_alone_is_the_calls():
    """judge/flush.Flush.charge: a flush after a call waits for every block still running (l2flush's fence), so
    its time over what a flush takes alone is work the call started ahead or left running: the call's."""
    from kernelbench_cli.judge.flush import Flush
    flush = Flush("cpu", False)
    assert flush.charge([1.0, 1.0], []) == ([1.0, 1.0], [])     # no flush (CPU): nothing to charge
    flush.allow_ms = 0.05
    times, record = flush.charge([1.0, 1.0, 1.0], [0.04, 0.05, 0.2])
    assert times == pytest.approx([1.0, 1.0, 1.15]) and record == pytest.approx([0.05, 0.2, 0.15])
    # the allowance: the flush alone, raised (never lowered) by the hand-over pings' flushes, each with its slack
    flush.run, flush.allow_alone_ms = object(), 0.05
    flush.calibrate_pings([0.06] * 10)
    assert flush.allow_ms == pytest.approx(0.063)            # 0.06 + max(3 us, 5%, 4 sd)
    flush.calibrate_pings([0.04] * 10)
    assert flush.allow_ms == pytest.approx(0.05)


def test_a_batch_priced_by_a_host_hiccup_is_timed_again_once():
    """judge/sides.RemoteSide.sample: a CUDA batch the witness prices by over RETIME_MS, the judge's own freeze of
    it late, is timed again and the second batch counts (an honest batch after a late host: clean); a lie is priced
    in the second as in the first; where the judge was on time, the price stands (no best of two draws)."""
    import random
    from types import SimpleNamespace
    from kernelbench_cli.judge.sides import RemoteSide
    from kernelbench_cli.integrity import price_allowance

    def side_with(excesses: list[float]) -> RemoteSide:
        side = RemoteSide.__new__(RemoteSide)
        side.session = SimpleNamespace(lanes=[None] * 4, handover_ms=2.0, handover_spread=0.1, device="cuda",
                                       ping_freeze_ms=0.15)
        side.cand = SimpleNamespace(freeze_ms=0.9)       # the judge's own freeze of the batch: late
        side.rng, side.reported, side.witness, side.retimed = random.Random(0), [], [], 0
        walls = iter(excesses)

        def batch(n, checks):       # the candidate's clock says 0.1 ms a call; the wall says that plus an excess
            side.reported.append(0.1 * n)
            side.witness.append(2.0 + 0.1 * n + next(walls))
            return [0.1] * n
        side.batch = batch
        return side

    allowance = price_allowance(2.0, 0.1)
    hiccup = side_with([6.0, 0.0])
    assert hiccup.sample(4) == pytest.approx([0.1] * 4) and hiccup.retimed == 1
    lie = side_with([6.0, 6.0])
    assert lie.sample(4) == pytest.approx([0.1 + (6.0 - allowance) / 4] * 4) and lie.retimed == 1
    assert len(lie.witness) == 2                   # both batches stay the witness's evidence
    small = side_with([1.2, 0.0])                  # priced under RETIME_MS: counts as it is
    assert small.sample(4) == pytest.approx([0.1 + (1.2 - allowance) / 4] * 4) and small.retimed == 0
    on_time = side_with([6.0, 0.0])                # priced, but the judge was on time: no second draw
    on_time.cand.freeze_ms = 0.2
    assert on_time.sample(4) == pytest.approx([0.1 + (6.0 - allowance) / 4] * 4) and on_time.retimed == 0


def test_the_cpu_time_witness_reads_a_least_wall_time_from_cpu_counts():
    """judge/handle.busy_ms: readings (all threads' ns, {tid: ns}, last pid) before and after a batch. The busiest
    live thread's time; all threads' over the CPUs; threads that ended in the batch over as many as could have run
    at once (gone since it began plus pids handed out meanwhile, at most the CPUs), so work moved into a thread that
    ends before the judge looks is counted whole on a 16-CPU host (harness_walk_threads), not a sixteenth of it."""
    from kernelbench_cli.judge.handle import busy_ms
    ms = 1_000_000
    assert busy_ms((0, {"1": 0}, 100), (10 * ms, {"1": 10 * ms}, 100), cpus=16) == pytest.approx(10)
    assert busy_ms((0, {"1": 0, "2": 0}, 100), (20 * ms, {"1": 10 * ms, "2": 10 * ms}, 100), cpus=2) == pytest.approx(10)
    # one thread per call, ended: 40 ms in the total only; one pid handed out: it ran alone
    assert busy_ms((0, {"1": 0}, 100), (41 * ms, {"1": ms}, 101), cpus=16) == pytest.approx(40)
    # eight pids handed out meanwhile: eight threads may have shared the 40 ms
    assert busy_ms((0, {"1": 0}, 100), (41 * ms, {"1": ms}, 108), cpus=16) == pytest.approx(5)
    # a thread alive before and gone after counts as one that could have run beside them
    assert busy_ms((0, {"1": 0, "2": 0}, 100), (41 * ms, {"1": ms}, 100), cpus=16) == pytest.approx(40)
    # the last pid unread (-1) or wrapped: as many as the CPUs
    assert busy_ms((0, {"1": 0}, -1), (41 * ms, {"1": ms}, -1), cpus=16) == pytest.approx(41 / 16)
    assert busy_ms((0, {"1": 0}, 400), (41 * ms, {"1": ms}, 3), cpus=16) == pytest.approx(41 / 16)
    assert busy_ms(None, (0, {}, 0)) is None


HOSTILE_PEER = r"""
import json, os, socket, struct, sys
sock = socket.socket(fileno=int(sys.argv[1]))
def msg(d):
    data = json.dumps(d).encode()
    return struct.pack("<I", len(data)) + data
def request():
    size = struct.unpack("<I", sock.recv(4, socket.MSG_WAITALL))[0]
    return json.loads(sock.recv(size, socket.MSG_WAITALL))
while True:
    req = request()
    how, nonce = req["how"], req.get("nonce", 0)
    if how == "honest":
        sock.sendall(msg({"op": "done", "nonce": nonce, "times": [1.0]}))
    elif how == "ahead":       # its reply, and at once one for the next request (which ends that one's witness)
        sock.sendall(msg({"op": "done", "nonce": nonce}) + msg({"op": "done", "nonce": nonce + 1, "times": [0.001]}))
    elif how == "stale":
        sock.sendall(msg({"op": "done", "nonce": 12345, "times": [0.001]}))
    else:                      # its own verdict, as an error reply
        sock.sendall(msg({"op": "error", "ok": False, "status": how, "nonce": nonce}))
"""


def test_the_judge_believes_only_replies_to_its_own_requests_and_no_verdict_a_candidate_writes(tmp_path):
    """The channel is the candidate's too (its code can write to the fd): a reply queued ahead of the request, a
    reply to no request, an error reply claiming a status only the judge gives, are each the protocol's breach;
    a runtime-error stays one. A real child process, frozen and thawed by the judge's own handle."""
    import select
    import socket as socket_
    import subprocess
    import sys
    from kernelbench_cli.channel import Channel
    from kernelbench_cli.judge.handle import CandidateFailed, CandidateProcess
    ours, theirs = socket_.socketpair()
    child = subprocess.Popen([sys.executable, "-c", HOSTILE_PEER, str(theirs.fileno())], pass_fds=(theirs.fileno(),))
    theirs.close()
    proc = object.__new__(CandidateProcess)
    proc.device, proc.pid, proc.chan, proc.exit_status, proc.log_path = "cpu", child.pid, Channel(ours), None, tmp_path
    try:
        reply, wall = proc.call({"op": "call", "how": "honest"}, 10, "timing")
        assert reply.times == [1.0] and wall > 0
        for how, status in (("ahead", "integrity"), ("stale", "integrity"), ("ok", "integrity"),
                            ("incorrect", "integrity"), ("runtime-error", "runtime-error")):
            with pytest.raises(CandidateFailed) as e:
                proc.call({"op": "call", "how": how}, 10, "timing")
            assert e.value.status == status, (how, e.value.status, e.value.message)
            proc.thaw()
            while select.select([proc.chan.sock], [], [], 0.2)[0]:
                proc.chan.sock.recv(1 << 16)         # (what the breach left on the channel)
        with pytest.raises(CandidateFailed) as e:      # a build's failures may be said only at the load
            proc.call({"op": "call", "how": "compile-error"}, 10, "timing")
        assert e.value.status == "integrity"
        with pytest.raises(CandidateFailed) as e:
            proc.call({"op": "load", "how": "compile-error"}, 10, "load", expect="loaded")
        assert e.value.status == "compile-error"
    finally:
        child.kill()
        child.wait()
