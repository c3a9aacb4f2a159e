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


def test_a_module_map_cannot_make_the_trusted_compiler_write_the_problem_file(kbench, tmp_path):
    """`module_mapper` asks the trusted side for a build whose compiler writes a C++ module over the problem file
    (it did, before -f options were allowed by name and unknown load_inline arguments refused)."""
    problem = tmp_path / "problems" / "cpu" / "1_Add_ReLU.py"
    problem.parent.mkdir(parents=True)
    shutil.copy(ROOT / "problems" / "cpu" / "1_Add_ReLU.py", problem)
    before = problem.read_bytes()
    code, doc = kbench.json("build", str(problem), "--kernel", str(BUILD / "module_mapper.py"))
    assert problem.read_bytes() == before, "the trusted build's compiler wrote the problem file"
    (r,) = doc["results"]
    assert r["status"] == "compile-error" and "no_implicit_headers" in r["message"], r


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


def test_a_source_read_outside_the_candidate_folder_is_recorded_and_a_change_rebuilds(kbench, tmp_path):
    """The build record lists the files the sandboxed import read (session 21's red team: the trusted side read
    them from the wrong field, so every record had none and a changed shared source kept the stale record)."""
    (tmp_path / "shared").mkdir()
    shared = tmp_path / "shared" / "add_relu.cpp"
    text = (ROOT / "kernels" / "cpu" / "1_Add_ReLU" / "fused.py").read_text()
    start, end = text.index('CPP = r"""') + len('CPP = r"""'), text.index('"""\n\next = ')
    shared.write_text(text[start:end])
    cand = tmp_path / "cand" / "shared_source.py"
    cand.parent.mkdir()
    cand.write_text(text[:text.index('CPP = r"""')] + "import pathlib\nCPP = (pathlib.Path(__file__).parent.parent / "
                    "'shared' / 'add_relu.cpp').read_text()" + text[end + 3:])
    code, doc = kbench.json("build", "cpu/1", "--kernel", str(cand))
    (r,) = doc["results"]
    assert r["status"] == "ok" and r["build"]["status"] in ("built", "cached"), r
    assert str(shared.resolve()) in r["build"]["sources"], r["build"]
    code, doc = kbench.json("build", "cpu/1", "--kernel", str(cand))
    assert doc["results"][0]["build"]["status"] == "cached", doc["results"][0]["build"]
    shared.write_text(shared.read_text().replace("NaN stays NaN", "NaN stays NaN (edited)"))
    code, doc = kbench.json("build", "cpu/1", "--kernel", str(cand))
    (r,) = doc["results"]
    assert r["status"] == "ok" and r["build"]["status"] == "built", r["build"]


def test_a_source_claim_naming_a_device_or_a_link_is_not_read():
    """The import's list of sources is a claim: /dev/zero (session 21's red team: the main process read it
    until it ran out of memory), a FIFO, a link or a file over the cap are never hashed."""
    import os
    import tempfile

    from kernelbench_cli import build
    with tempfile.TemporaryDirectory() as d:
        fifo, link, real = os.path.join(d, "fifo"), os.path.join(d, "link"), os.path.join(d, "real.cpp")
        os.mkfifo(fifo)
        with open(real, "w") as f:
            f.write("int f();")
        os.symlink(real, link)
        assert build._digest(real) is not None
        for path in ("/dev/zero", fifo, link, "/proc/self/pagemap"):
            assert build._digest(path) is None, path


GOOD = [dict(extra_cflags=["-O3"]), dict(extra_cflags=["-O3", "-march=native", "-msse2", "-ffast-math", "-fopenmp", "-fno-strict-aliasing",
                                                        "-funroll-loops", "-fPIC", "-fvisibility=hidden", "-g3",
                                                        "-std=c++17", "-DNDEBUG", "-Wno-unused", "-g"]),
        dict(extra_cuda_cflags=["-O3", "-Xptxas=-v", "-gencode=arch=compute_90a,code=sm_90a", "--use_fast_math",
                                "-U__CUDA_NO_HALF_OPERATORS__", "-Xptxas", "-v", "-lineinfo", "-Xcompiler", "-fopenmp",
                                "--maxrregcount=64", "-arch=sm_90a", "--expt-relaxed-constexpr"]),
        dict(extra_ldflags=["-lcublas", "-L/usr/local/cuda/lib64", "-Wl,-rpath,/opt/lib"]),
        dict(extra_include_paths=["/usr/local/include", "../common"]),
        dict(functions={"add_relu": "x + y, clamped"})]
BAD = [dict(extra_cflags=["-O3 -fplugin=x.so"]), dict(extra_cflags=["-Bbin"]), dict(extra_cflags=["-fplugin=x"]),
       dict(extra_cflags=["-specs=x"]), dict(extra_cflags=["-wrapper", "sh"]), dict(extra_cflags=["@flags.txt"]),
       dict(extra_cflags=["-O3\nbuild x: phony"]), dict(extra_cflags=["-D$X"]), dict(extra_cflags=["-o", "x"]),
       dict(extra_cflags=["-Wl,--plugin=x"]), dict(extra_cflags=["-Wp,-MD,x.d"]), dict(extra_cflags=["-fdump-tree-all"]),
       dict(extra_cuda_cflags=["-ccbin=cc"]), dict(extra_cuda_cflags=["--compiler-bindir", "bin"]),
       dict(extra_cuda_cflags=["-Xcompiler", "-fplugin=x"]), dict(extra_cuda_cflags=["-Xcompiler=-Bbin"]),
       dict(extra_cuda_cflags=["-keep"]), dict(extra_ldflags=["-Wl,-plugin,x.so"]), dict(extra_ldflags=["-fuse-ld=gold"]),
       dict(extra_include_paths=["inc/$x"]), dict(extra_include_paths=["a b"]), dict(name="../../escape"),
       dict(name="x", functions=["f); system(\"x\"); (void)(0"]), dict(extra_cflags="-O3"), dict(use_pch="yes"),
       # session 21's red team: -fmodules-ts with a module map in the source wrote a compiled module to any path;
       # -fcompare-debug= reruns the compiler with a flag of its own; no_implicit_headers let that source start
       # with the module line
       dict(extra_cflags=["-fmodules-ts", "-fmodule-mapper=main.cpp"]), dict(extra_cflags=["-fmodules-ts"]),
       dict(extra_cflags=["-fcompare-debug=-fplugin=libcc1plugin"]), dict(extra_cflags=["-fcompare-debug=-fdump-tree-all"]),
       dict(extra_cuda_cflags=["-Xcompiler", "-fmodule-mapper=main.cpp"]), dict(no_implicit_headers=True),
       dict(keep_intermediates=False), dict(with_sycl=True), dict(build_directory="out")]


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
