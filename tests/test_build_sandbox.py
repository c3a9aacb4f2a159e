"""The build's import of a candidate runs in the sandbox and load_inline's arguments are compiled by the
trusted build process (kernelbench_cli/compiler.py): real builds, real exploit candidates whose import
acts on the machine, and the flag allow-list."""
from __future__ import annotations

import shutil
import stat

import pytest

from conftest import FIXTURES, ROOT

from kernelbench_cli.compiler import check_args

BUILD = FIXTURES / "build"


def test_a_build_time_import_cannot_rewrite_the_problem_it_is_judged_against(kbench, tmp_path):
    """`rewrites_problem` appends a 4x slow-down of the reference to the problem file (its path found by a gc
    walk of the build process): refused in the sandbox, the file stays as it was and the verdict is honest."""
    problem = tmp_path / "problems" / "cpu" / "1_Add_ReLU.py"
    problem.parent.mkdir(parents=True)
    shutil.copy(ROOT / "problems" / "cpu" / "1_Add_ReLU.py", problem)
    before = problem.read_bytes()
    code, doc = kbench.json("check", str(problem), "--kernel", str(BUILD / "rewrites_problem.py"))
    assert problem.read_bytes() == before, "the candidate's import rewrote the problem file"
    (r,) = doc["results"]
    assert code == 0 and r["status"] == "ok" and r["build"]["status"] in ("built", "cached"), r


def test_the_compiler_runs_with_kbenchs_environment_not_the_candidates(kbench, tmp_path):
    """`compiler_from_env` sets CXX to a program beside it at import; torch runs $CXX for C++ builds. The
    program (here a shell script that leaves a mark and runs the real compiler) must never run."""
    cand = tmp_path / "compiler_from_env.py"
    shutil.copy(BUILD / "compiler_from_env.py", cand)
    mark = tmp_path / "ran"
    fake = tmp_path / "fake_cxx.sh"
    fake.write_text(f"#!/bin/sh\ntouch {mark}\nexec c++ \"$@\"\n")
    fake.chmod(fake.stat().st_mode | stat.S_IXUSR)
    code, doc = kbench.json("build", "cpu/1", "--kernel", str(cand))
    (r,) = doc["results"]
    assert not mark.exists(), "the candidate's compiler ran in the build"
    assert r["status"] == "ok" and r["build"]["status"] == "built", r


def test_a_flag_that_could_run_a_program_is_refused_with_its_name(kbench, tmp_path):
    cand = tmp_path / "plugin_flag.py"
    text = (ROOT / "kernels" / "cpu" / "1_Add_ReLU" / "fused.py").read_text()
    cand.write_text(text.replace('extra_cflags=["-O3", "-march=native"]', 'extra_cflags=["-O3", "-fplugin=./x.so"]'))
    code, doc = kbench.json("build", "cpu/1", "--kernel", str(cand))
    (r,) = doc["results"]
    assert r["status"] == "compile-error" and "'-fplugin=./x.so' is not a flag kbench compiles with" in r["message"], r


GOOD = [dict(extra_cflags=["-O3"]), dict(extra_cflags=["-O3", "-march=native", "-msse2", "-ffast-math", "-fopenmp",
                                                        "-std=c++17", "-DNDEBUG", "-Wno-unused", "-g"]),
        dict(extra_cuda_cflags=["-O3", "-Xptxas=-v", "-gencode=arch=compute_90a,code=sm_90a", "--use_fast_math",
                                "-U__CUDA_NO_HALF_OPERATORS__", "-Xptxas", "-v", "-lineinfo", "-Xcompiler", "-fopenmp",
                                "--maxrregcount=64", "-arch=sm_90a", "--expt-relaxed-constexpr"]),
        dict(extra_ldflags=["-lcublas", "-L/usr/local/cuda/lib64", "-Wl,-rpath,/opt/lib"]),
        dict(extra_include_paths=["/usr/local/include", "../common"]),
        dict(functions={"add_relu": "x + y, clamped"})]
BAD = [dict(extra_cflags=["-O3 -fplugin=x.so"]), dict(extra_cflags=["-B/tmp/bin"]), dict(extra_cflags=["-fplugin=x"]),
       dict(extra_cflags=["-specs=x"]), dict(extra_cflags=["-wrapper", "sh"]), dict(extra_cflags=["@flags.txt"]),
       dict(extra_cflags=["-O3\nbuild x: phony"]), dict(extra_cflags=["-D$X"]), dict(extra_cflags=["-o", "x"]),
       dict(extra_cflags=["-Wl,--plugin=x"]), dict(extra_cflags=["-Wp,-MD,/tmp/x"]), dict(extra_cflags=["-fdump-tree-all"]),
       dict(extra_cuda_cflags=["-ccbin=/tmp/cc"]), dict(extra_cuda_cflags=["--compiler-bindir", "/tmp"]),
       dict(extra_cuda_cflags=["-Xcompiler", "-fplugin=x"]), dict(extra_cuda_cflags=["-Xcompiler=-B/tmp"]),
       dict(extra_cuda_cflags=["-keep"]), dict(extra_ldflags=["-Wl,-plugin,x.so"]), dict(extra_ldflags=["-fuse-ld=gold"]),
       dict(extra_include_paths=["/tmp/$x"]), dict(extra_include_paths=["a b"]), dict(name="../../escape"),
       dict(name="x", functions=["f); system(\"x\"); (void)(0"]), dict(extra_cflags="-O3"), dict(use_pch="yes")]


@pytest.mark.parametrize("args", GOOD, ids=lambda a: ",".join(a))
def test_flags_honest_kernels_use_are_built(args):
    assert check_args({"name": "ext", "cpp_sources": ["int f();"], **args}) is None


@pytest.mark.parametrize("args", BAD, ids=repr)
def test_flags_that_name_a_program_a_plugin_or_a_file_are_refused(args):
    assert check_args({"name": "ext", "cpp_sources": ["int f();"], **args}) is not None


def test_a_problem_file_rewritten_after_planning_is_never_executed_by_its_reference_process(tmp_path):
    """A CUDA build's import still runs with write access, so the reference process executes a problem only if
    it reads as it did when kbench planned the run (catalog.problem_digest): a rewrite in between is a
    problem-error naming the file, and the rewritten code never runs in the trusted process. Real process."""
    from kernelbench_cli import results as R
    from kernelbench_cli.build import build_env
    from kernelbench_cli.catalog import problem_digest
    from kernelbench_cli.config import load_config
    from kernelbench_cli.orchestrate.judges import JudgeClient
    problem = tmp_path / "1_Add_ReLU.py"
    shutil.copy(ROOT / "problems" / "cpu" / "1_Add_ReLU.py", problem)
    problem_digest(problem)                                        # planned
    mark = tmp_path / "executed"
    with open(problem, "a") as f:                                  # then rewritten, as a build could
        f.write(f"\nopen({str(mark)!r}, 'w').close()\n")
    cfg = load_config(None)
    judge = JudgeClient("cpu/1_Add_ReLU", str(problem), cfg, "cpu", build_env(cfg, "cpu", 1), tmp_path / "logs",
                        mode="lint")
    try:
        result = judge.result(300)
    finally:
        judge.close()
    assert not mark.exists(), "the reference process executed the rewritten problem"
    assert result.status == R.PROBLEM_ERROR and "changed after kbench planned this run" in result.message, result
