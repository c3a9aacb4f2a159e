"""Triton candidates on the CPU (issue 18): Triton's interpreter runs them through the same pipeline for
correctness, generalisation and the proofs of custom work; their times are not speeds. Real kbench runs,
real Triton (skipped, with the reason, where the triton wheel is not installed)."""
from __future__ import annotations

import importlib.util
import json

import pytest

from conftest import ROOT, by_candidate

pytestmark = pytest.mark.skipif(importlib.util.find_spec("triton") is None,
                                reason="triton is not installed (pip install triton; the test extra has it where "
                                       "a wheel exists)")
CORPUS = ROOT / "tests" / "adversarial" / "triton"
ROWS = ROOT / "kernels" / "cpu" / "2_Row_Sum_Of_Squares" / "triton_rows.py"

EXPECTED = {    # exploit -> (status, flags that must be raised): caught as their C++ twins are
    # library-heavy too where the interpreted launch is cheaper than torch's ops (its share is below): asserted below
    "torch_does_it": ("integrity", {"no-custom-kernel"}),
    "stale_after_six": ("integrity", {"generalisation"}),
    "half_loads": ("integrity", {"precision", "generalisation"}),
    # what only the interpreter would run: plain Python in a kernel (found statically or by compiling the
    # interpreted launches for sm_90 in the build), Python objects as kernel arguments
    "numpy_in_kernel": ("compile-error", set()),
    "runtime_arange": ("compile-error", set()),
    "python_list": ("compile-error", set()),
    "subclass_pointer": ("runtime-error", set()),
}


def test_triton_exploits_are_caught(kbench):
    code, doc = kbench.json("bench", "cpu/1", "cpu/2", "--set", f"paths.kernels={CORPUS}")
    got = by_candidate(doc)
    assert code == 1 and set(got) == set(EXPECTED) | {"pointer_cache"}
    wrong = {n: (got[n]["status"], [f["name"] for f in got[n]["flags"]], got[n]["message"][:200])
             for n, (status, flags) in EXPECTED.items()
             if got[n]["status"] != status or not flags <= {f["name"] for f in got[n]["flags"]}}
    assert not wrong, wrong
    assert got["torch_does_it"]["correctness"]["ablation"] == "output unchanged"
    # Under the interpreter the launch's share is interpreter time, not a kernel's, so it depends on the host
    # (the 2-core box: below half; the H200 host's CPU, triton 3.6: above): library-heavy must follow the number.
    # On a GPU the share is kernel time and the flag is asserted outright (test_gpu.py).
    does_it = got["torch_does_it"]
    assert does_it["custom_share"] is not None
    assert ("library-heavy" in {f["name"] for f in does_it["flags"]}) == (does_it["custom_share"] < 0.5), does_it
    assert got["half_loads"]["correctness"]["precision_class"] == "fp16"
    assert got["pointer_cache"]["status"] in ("incorrect", "integrity"), got["pointer_cache"]["message"]
    assert "tensor subclass" in got["subclass_pointer"]["message"], got["subclass_pointer"]["message"]
    for name in ("numpy_in_kernel", "runtime_arange", "python_list"):     # the interpreter ran them; a GPU cannot
        assert "does not compile for sm_90" in got[name]["message"], (name, got[name]["message"])
    assert all(r["timing"]["note"] == "interpreted — not a speed" for r in got.values())


def test_an_interpreted_candidate_is_judged_but_has_no_speed_and_the_gate_leaves_it_out(kbench, tmp_path):
    code, doc = kbench.json("check", "cpu/2", "--kernel", ROWS)
    r = doc["results"][0]
    assert code == 0 and r["status"] == "ok" and r["flags"] == [], (r["message"], r["flags"])
    assert r["timing"]["note"] == "interpreted — not a speed" and r["timing"]["speedup"] is None
    assert r["correctness"]["ablation"] == "output changed" and r["custom_share"] > 0.5   # its launches did the work
    assert r["correctness"]["precision_class"] == "fp32"
    assert all(v["passed"] == v["trials"] > 0 for v in r["correctness"]["variants"].values())
    kernel = [x for x in r["build"]["extensions"] if x["backend"] == "triton"]
    assert [x["name"] for x in kernel] == ["row_sumsq_kernel"] and r["build"]["status"] == "interpreted"
    assert "BLOCK_R: 64" in kernel[0]["config"] and "interpreted" in kernel[0]["config"]   # autotune: its first config
    assert kernel[0]["gpu_check"].startswith("compiled for sm_90: 1 of 1"), kernel[0]    # and it builds for a GPU
    assert doc["summary"]["interpreted"] == 1 and doc["summary"]["geomean_speedup"] is None
    run = kbench.runs / doc["run_id"]
    proc = kbench("compare", run, run, "--json")
    assert proc.returncode == 0, proc.stderr
    job = json.loads(proc.stdout)["jobs"][0]
    assert job["verdict"] == "unchanged" and "interpreted" in job["reason"]


WARM = """
import os, sys
from collections import Counter
os.environ["TRITON_INTERPRET"] = "1"
from kernelbench_cli.backends import triton as backend
from kernelbench_cli.candidate.loading import import_file
class Record:
    extensions, calls, ablation = [], Counter(), {"on": False}
backend.install(Record, "cpu", sys.argv[3])
module = import_file(sys.argv[1], "kbench_candidate")
backend.warm_specialisations(module, {"problem_path": sys.argv[2], "dtype": "float32"}, "cpu")
print(sum(Record.calls.values()))
"""


def test_the_gpu_warm_up_runs_every_specialisation_the_job_will_launch(tmp_path):
    """On a GPU the build process compiles Triton kernels by running the candidate (the sandbox cannot); run
    here under the interpreter, it must launch at the problem's sizes, both shapes variants' and every layout
    view (transposed, strided, sliced, offset, odd pitch, expanded): 9 forwards for cpu/2's one 2-D input."""
    import subprocess
    import sys
    proc = subprocess.run([sys.executable, "-c", WARM, str(ROWS), str(ROOT / "problems" / "cpu" / "2_Row_Sum_Of_Squares.py"),
                           str(tmp_path)], capture_output=True, text=True, cwd=ROOT, env={"PYTHONPATH": str(ROOT),
                                                                                          "PATH": "/usr/bin:/bin"})
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout.split()[-1] == "9", proc.stdout


def test_an_interpreted_candidate_of_a_gpu_sized_problem_is_skipped_on_the_cpu_with_the_reason(kbench):
    """GPU problems ship Triton candidates; on the CPU their interpreter would run for many minutes (a 69 GFLOP
    GEMM), so the job is skipped with one line saying why and where to run it, the reference is not prepared
    for it, and the run still exits 0."""
    code, doc = kbench.json("check", "level2/1_Gemm_Bias_ReLU", "--device", "cpu", "--kernel",
                            ROOT / "kernels" / "level2" / "1_Gemm_Bias_ReLU" / "triton_3xtf32_relu.py")
    r = doc["results"][0]
    assert code == 0 and r["status"] == "skipped", (r["status"], r["message"])
    assert "69 GFLOP" in r["message"] and "--device cuda" in r["message"], r["message"]
    assert doc["summary"]["skipped"] == 1 and doc["summary"]["jobs"] == 0
