"""Scale: KernelBench folders and candidate patterns, parallel CPU workers, the Ray executor, the Python API,
compile-only CUDA builds. CPU backend only; builds come from the session cache (conftest.build_cache)."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from conftest import FIXTURES, ROOT, TEST_CONFIG, Kbench, by_candidate
from kernelbench_cli.build import build_env, cuda_runtime_lib_dirs
from kernelbench_cli.config import load_config
from kernelbench_cli.errors import InputError
from kernelbench_cli.orchestrate.local import make_slots, parse_gpus
from kernelbench_cli.kernelbench_compat import FolderCatalog, match_candidates
from kernelbench_cli.reports.terminal import summary
from kernelbench_cli.results import Result, Timing

FIXTURE_OPS = FIXTURES / "fixture_ops.py"
PROBLEM = "cpu/1_Add_ReLU"

# Tiny candidates for tests/fixtures' extension, loaded by absolute path so they work from any folder.
CANDIDATE = '''"""test candidate"""
import runpy

import torch.nn as nn

BACKEND = "cpu"
ops = runpy.run_path({ops!r})["ops"]


class ModelNew(nn.Module):
    def forward(self, x, y):
        return ops.{fn}(x, y)
'''

KILLED = '''"""Kills the process running it after a first successful trial; tries to kill its parent's Ray worker too."""
import os
import runpy
import signal
from pathlib import Path

import torch.nn as nn

BACKEND = "cpu"
ops = runpy.run_path({ops!r})["ops"]
calls = 0


def ray_worker():
    """The Ray worker above this process, if any (the reference process's parent)."""
    pid = os.getppid()
    for _ in range(3):
        try:
            if Path(f"/proc/{{pid}}/cmdline").read_bytes().startswith(b"ray::"):
                return pid
            pid = int(Path(f"/proc/{{pid}}/stat").read_text().rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            return None
    return None


class ModelNew(nn.Module):
    def forward(self, x, y):
        global calls
        calls += 1
        if calls > 1:
            if ray_worker():
                try:
                    os.kill(ray_worker(), signal.SIGKILL)
                except OSError:
                    pass
            os.kill(os.getpid(), signal.SIGKILL)
        return ops.add_relu(x, y)
'''


def candidate_source(fn: str = "add_relu") -> str:
    return CANDIDATE.format(ops=str(FIXTURE_OPS), fn=fn)


EXPECTED = {"correct": "ok", "wrong": "incorrect", "killed": "crash"}


@pytest.fixture(scope="module")
def batch_kernels(tmp_path_factory) -> Path:
    """kernels/cpu/1_Add_ReLU/{correct,wrong,killed}.py: a small batch without the slow hang fixture."""
    root = tmp_path_factory.mktemp("kernels")
    folder = root / "cpu" / "1_Add_ReLU"
    folder.mkdir(parents=True)
    (folder / "correct.py").write_text(candidate_source())
    (folder / "wrong.py").write_text(candidate_source("add_relu_wrong"))
    (folder / "killed.py").write_text(KILLED.format(ops=str(FIXTURE_OPS)))
    return root


@pytest.fixture(scope="module")
def one_worker_run(build_cache, batch_kernels, tmp_path_factory) -> dict:
    kb = Kbench(build_cache, tmp_path_factory.mktemp("runs"))
    code, doc = kb.json("bench", PROBLEM, "--set", f"paths.kernels={batch_kernels}", "--workers", "1")
    return {"code": code, "doc": doc, "runs": kb.runs}


# --- KernelBench folders and candidate patterns (no builds) ---------------------------------------------

def _problem_file(path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("import torch\nclass Model(torch.nn.Module):\n    pass\n"
                    "def get_inputs():\n    return []\ndef get_init_inputs():\n    return []\n")
    return path


def _candidate_file(path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("import torch\nclass ModelNew(torch.nn.Module):\n    pass\n")
    return path


def test_candidate_pattern_maps_generated_files_to_problems(tmp_path):
    root = tmp_path / "KernelBench"
    for rel in ("level1/1_Square_matmul.py", "level1/19_ReLU.py", "level2/1_Conv2D_ReLU_BiasAdd.py"):
        _problem_file(root / rel)
    gens = tmp_path / "gens"
    for name in ("level_1_problem_1_sample_0_kernel.py", "level_1_problem_1_sample_1_kernel.py",
                 "level_1_problem_19_sample_a-b_kernel.py", "level_2_problem_1_sample_0_kernel.py",
                 "level_3_problem_1_sample_0_kernel.py",          # no such problem: ignored
                 "level_1_problem_1_sample_0_kernel.txt", "notes.py"):
        _candidate_file(gens / name)
    catalog = FolderCatalog(root, tmp_path / "none", str(gens / "level_{level}_problem_{id}_sample_{sample}_kernel.py"))
    problems = catalog.problems()
    assert [p.key for p in problems] == ["level1/1_Square_matmul", "level1/19_ReLU", "level2/1_Conv2D_ReLU_BiasAdd"]
    got = {p.key: sorted(c.name for c in catalog.candidates(p)) for p in problems}
    assert got == {"level1/1_Square_matmul": ["0", "1"], "level1/19_ReLU": ["a-b"],
                   "level2/1_Conv2D_ReLU_BiasAdd": ["0"]}
    cand = catalog.candidates(problems[1])[0]
    assert cand.path == gens / "level_1_problem_19_sample_a-b_kernel.py" and not cand.file_error

    # without {level} an id shared by two levels is ambiguous; with one level it is fine
    with pytest.raises(InputError, match=r"add \{level\}"):
        match_candidates(str(gens / "level_1_problem_{id}_sample_0_kernel.py"), problems)
    only = match_candidates(str(gens / "level_1_problem_{id}_sample_{sample}_kernel.py"), problems[1:2])
    assert [c.name for c in only["level1/19_ReLU"]] == ["a-b"]
    with pytest.raises(InputError, match="needs {id}"):
        match_candidates(str(gens / "level_{level}_{sample}.py"), problems)


def test_flat_problem_folder_is_one_level_named_after_it(tmp_path):
    flat = tmp_path / "level3"
    for name in ("2_Attention.py", "10_MLP.py", "_helpers.py"):
        _problem_file(flat / name)
    _candidate_file(tmp_path / "gens" / "l3_p10_s7.py")
    catalog = FolderCatalog(flat, tmp_path / "none", str(tmp_path / "gens" / "l{level}_p{id}_s{sample}.py"))
    problems = catalog.problems()
    assert [p.key for p in problems] == ["level3/2_Attention", "level3/10_MLP"]
    assert [c.name for c in catalog.candidates(problems[1])] == ["7"]
    assert catalog.resolve("10").key == "level3/10_MLP"


def test_summary_reports_fast_p_and_geomean_over_correct():
    def res(status, speedup):
        return Result(problem="p", candidate=str(speedup), candidate_path="", device="cpu", dtype="float32",
                      status=status, timing=Timing(speedup=speedup))
    s = summary([res("ok", 0.8), res("ok", 1.2), res("ok", 3.0), res("incorrect", 5.0)])
    assert s["fast_p"] == {"0": 0.75, "0.5": 0.75, "1": 0.5, "1.5": 0.25, "2": 0.25}
    assert s["fast_1"] == 0.5 and s["geomean_speedup"] == pytest.approx((0.8 * 1.2 * 3.0) ** (1 / 3))


# --- slots and build flags (no builds) -------------------------------------------------------------------

def test_gpu_slots_parse_all_counts_and_indices():
    visible = ["0", "1", "2", "3"]
    assert parse_gpus("all", visible) == visible
    assert parse_gpus("2", visible) == ["0", "1"]
    assert parse_gpus("0,2", visible) == ["0", "2"]
    assert parse_gpus("3,", ["4", "5", "6", "7"]) == ["7"]       # indices into CUDA_VISIBLE_DEVICES
    for bad in ("5", "0,9", "two", "0"):
        with pytest.raises(InputError):
            parse_gpus(bad, visible)
    slots = make_slots(load_config(None, sets=["executor.workers=2"]), "cpu")
    assert [s.name for s in slots] == ["cpu0", "cpu1"]


def test_arch_flag_reaches_the_build_env_and_cudart_is_found(tmp_path, monkeypatch):
    cfg = load_config(None, overrides={"build.arch": "9.0"})
    assert build_env(cfg, "cuda", 4)["TORCH_CUDA_ARCH_LIST"] == "9.0"
    assert "TORCH_CUDA_ARCH_LIST" not in build_env(load_config(None), "cpu", 4)
    # a CUDA 12 style wheel folder with only libcudart.so.12: the link step gets a libcudart.so next to it
    site = tmp_path / "site"
    lib = site / "nvidia" / "cuda_runtime" / "lib"
    lib.mkdir(parents=True)
    (lib / "libcudart.so.12").write_bytes(b"")
    monkeypatch.syspath_prepend(str(site))
    for mod in [m for m in sys.modules if m == "nvidia" or m.startswith("nvidia.")]:
        monkeypatch.delitem(sys.modules, mod)
    dirs = cuda_runtime_lib_dirs(tmp_path / "link")
    assert dirs[0] == str(lib) and (tmp_path / "link" / "libcudart.so").resolve() == (lib / "libcudart.so.12")
    monkeypatch.setenv("KBENCH_CACHE_DIR", str(tmp_path / "cache"))
    assert build_env(cfg, "cuda", 4)["LIBRARY_PATH"].split(os.pathsep)[:2] == [str(lib), str(tmp_path / "cache" /
                                                                                            "cudart-link")]


TOOLCHAIN_MISSING = ("nvcc: not found", "nvcc: No such file", "cuda_cmake_macros.h", "CUDA_HOME", "cuda_runtime.h",
                     "No CUDA runtime", "cannot find -lcudart")


def test_build_for_cuda_without_a_gpu_needs_only_an_arch(kbench):
    kernel_dir, hide = FIXTURES / "cuda_kernels", {"CUDA_VISIBLE_DEVICES": ""}    # the no-GPU path on any machine
    proc = kbench("build", PROBLEM, "--device", "cuda", "--set", f"paths.kernels={kernel_dir}", env=hide)
    assert proc.returncode == 2 and "--arch 9.0" in proc.stderr
    proc = kbench("build", PROBLEM, "--device", "cuda", "--arch", "9.0", "--set", f"paths.kernels={kernel_dir}",
                  "--json", env=hide)
    doc = json.loads(proc.stdout)
    assert doc["device"] == "cuda"
    # every fixture builds, unless this machine cannot build CUDA at all (no nvcc, or a CPU-only torch without
    # the CUDA headers): then the log must say so; a compile error in a fixture fails the test
    for r in doc["results"]:
        assert r["status"] == "ok" or (r["status"] == "compile-error" and any(
            m in r["build"]["log"] for m in TOOLCHAIN_MISSING)), (r["candidate"], r["status"], r["build"]["log"][-800:])
    assert proc.returncode == (0 if all(r["status"] == "ok" for r in doc["results"]) else 1)
    assert "compile logs, one per candidate:" in proc.stderr
    config = json.loads((kbench.runs / doc["run_id"] / "config.json").read_text())
    assert config["build"]["arch"] == "9.0"
    exts = [x for r in doc["results"] for x in r["build"]["extensions"]]
    assert exts and all(x["arch"] == "9.0" for x in exts)      # the build process compiled for 9.0 only


def test_executor_ray_without_ray_exits_2_with_the_install_hint(tmp_path):
    code = ("import sys; sys.modules['ray'] = None; sys.argv = ['kbench'] + sys.argv[1:]; "
            "from kernelbench_cli.cli import main; main()")
    proc = subprocess.run([sys.executable, "-c", code, "check", PROBLEM, "--device", "cpu", "--executor", "ray",
                           "--out", str(tmp_path)], cwd=ROOT, capture_output=True, text=True, timeout=300,
                          env=dict(os.environ, PYTHONPATH=str(ROOT)))
    assert proc.returncode == 2
    assert proc.stderr.strip().splitlines() == ["error: --executor ray needs Ray, which is not installed: "
                                                "pip install 'kbench[ray]'"]


def test_gpu_slots_queue_and_overlap_with_fake_processes(tmp_path, monkeypatch):
    """The local executor's scheduling on "GPUs" without GPUs: builds and reference processes are replaced by
    fakes that only sleep. Each job sees one GPU (CUDA_VISIBLE_DEVICES), both GPUs are used, a slot keeps one
    judge per problem, results come back in job order, and with overlap the first job starts before the slow
    build ends (on CPU: only after)."""
    import threading
    import time

    from kernelbench_cli.catalog import Candidate, Problem
    from kernelbench_cli.orchestrate import Job, local
    from kernelbench_cli.results import BuildInfo, RunStore
    from rich.console import Console

    events, lock, judges = [], threading.Lock(), []

    def fake_build(job, cfg, device, env, logs, tag):
        with lock:
            events.append(("start", tag, time.perf_counter()))
        time.sleep(1.0 if job.candidate.name == "slow" else 0.2)
        with lock:
            events.append(("end", tag, time.perf_counter()))
        return job.result(cfg, device, status="ok", phase="done", build=BuildInfo(status="cached"))

    class FakeJudge:
        def __init__(self, problem_key, problem_path, cfg, device, env, logs, mode="serve", hold=False, jobs=1):
            self.problem_key, self.env, self.cfg, self.device, self.alive = problem_key, env, cfg, device, True
            judges.append(problem_key)

        def run(self, job, spec, left=0):
            with lock:
                events.append(("start", spec.tag.split("-")[0] + "-" + str(int(spec.tag.split("-")[1])), time.perf_counter()))
            time.sleep(0.2)
            return job.result(self.cfg, self.device, status="ok", phase="done",
                              env={"gpu_seen": self.env.get("CUDA_VISIBLE_DEVICES")})

        def close(self):
            self.alive = False

    monkeypatch.setattr(local, "build", fake_build)
    monkeypatch.setattr(local, "JudgeClient", FakeJudge)
    monkeypatch.setattr(local, "visible_gpus", lambda: ["0", "1"])
    monkeypatch.setenv("KBENCH_CACHE_DIR", str(tmp_path / "cache"))
    problem = Problem(tmp_path / "p.py", "level1", "1_P")
    names = ["fast", "slow", "fast2", "fast3"]
    jobs = [Job(problem, Candidate(tmp_path / f"{n}.py", n, "cuda")) for n in names]
    cfg = load_config(None, overrides={"executor.gpus": "all", "build.jobs": 2})
    for device, overlap in (("cuda", None), ("cpu", False)):
        events.clear()
        judges.clear()
        store = RunStore(tmp_path / "runs" / device)
        results = local.execute_local(jobs, cfg, device, store, Console(quiet=True), overlap=overlap)
        assert [r.candidate for r in results] == names and all(r.status == "ok" for r in results)
        t = {(kind, tag): at for kind, tag, at in events}
        slow_built = t[("end", "build-001-1_P-slow")]
        first_job = min(at for (kind, tag), at in t.items() if kind == "start" and tag.startswith("job"))
        assert len(judges) <= len(local.make_slots(cfg, device))      # one judge per slot for the one problem
        if device == "cuda":
            assert first_job < slow_built                      # GPU work began while "slow" compiled
            assert {r.env["gpu_seen"] for r in results} == {"0", "1"}
            assert all(r.env["slot"] == f"gpu{r.env['gpu_seen']}" for r in results)
        else:
            assert first_job > slow_built
            assert all(r.env["gpu_seen"] == "" for r in results)     # a CPU job's processes see no GPU
        assert len(store.load()) == len(names)


# --- real jobs (CPU backend) -----------------------------------------------------------------------------

def test_workers_2_gives_the_same_verdicts_and_a_killed_worker_fails_only_its_job(one_worker_run, build_cache,
                                                                                   batch_kernels, tmp_path):
    one = one_worker_run["doc"]
    assert {n: r["status"] for n, r in by_candidate(one).items()} == EXPECTED
    killed = by_candidate(one)["killed"]
    assert "SIGKILL" in killed["message"] and killed["phase"] == "correctness"
    assert {r["env"]["slot"] for r in one["results"] if r["env"]} == {"cpu0"}

    kb = Kbench(build_cache, tmp_path / "runs")
    code, two = kb.json("bench", PROBLEM, "--set", f"paths.kernels={batch_kernels}", "--workers", "2")
    assert {n: r["status"] for n, r in by_candidate(two).items()} == EXPECTED
    assert code == one_worker_run["code"] == 1
    assert {r["env"]["slot"] for r in two["results"]} <= {"cpu0", "cpu1"}
    assert set(two["results"][0]) == set(one["results"][0])                  # same Result schema
    assert by_candidate(two)["correct"]["correctness"]["passed"] == 3
    lines = (kb.runs / two["run_id"] / "results.jsonl").read_text().splitlines()
    assert sorted(json.loads(x)["candidate"] for x in lines) == sorted(EXPECTED)


def test_api_matches_the_cli(kbench, build_cache, tmp_path, monkeypatch):
    from kernelbench_cli import evaluate
    kernel = FIXTURES / "kernels" / "cpu" / "1_Add_ReLU" / "correct.py"
    code, doc = kbench.json("check", PROBLEM, "--kernel", kernel)
    cli = doc["results"][0]
    monkeypatch.setenv("KBENCH_CACHE_DIR", str(build_cache))
    cfg = load_config(TEST_CONFIG, sets=[f"paths.runs={tmp_path / 'api-runs'}", f"paths.problems={ROOT / 'problems'}"])
    for source in (kernel, candidate_source()):         # a path, and source text (written into the run dir)
        r = evaluate(PROBLEM, source, config=cfg, device="cpu")
        assert isinstance(r, Result)
        assert (r.problem, r.status, r.correctness.passed) == (cli["problem"], cli["status"],
                                                               cli["correctness"]["passed"]) == (PROBLEM, "ok", 3)
        assert [f.name for f in r.flags] == [f["name"] for f in cli["flags"]]
        assert r.timing.speedup and r.env["slot"] == "cpu0"
    written = list((tmp_path / "api-runs").glob("*/candidates/candidate_0.py"))
    assert len(written) == 1 and written[0].read_text() == candidate_source()


def test_ray_executor_gives_the_local_verdicts_and_a_killed_candidate_fails_only_its_job(one_worker_run, build_cache,
                                                                           batch_kernels, tmp_path, monkeypatch):
    ray = pytest.importorskip("ray", reason="Ray is an optional extra: pip install 'kbench[ray]'")
    from kernelbench_cli import evaluate_many
    monkeypatch.setenv("KBENCH_CACHE_DIR", str(build_cache))
    cfg = load_config(TEST_CONFIG, sets=[f"paths.runs={tmp_path}", f"paths.problems={ROOT / 'problems'}"])
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False,
             runtime_env={"env_vars": {"PYTHONPATH": str(ROOT), "KBENCH_CACHE_DIR": str(build_cache)}})
    try:
        names = sorted(EXPECTED)
        files = [batch_kernels / "cpu" / "1_Add_ReLU" / f"{n}.py" for n in names]
        results = evaluate_many([(PROBLEM, f) for f in files], config=cfg, executor="ray", device="cpu")
    finally:
        ray.shutdown()
    got = dict(zip(names, results))
    assert {n: r.status for n, r in got.items()} == EXPECTED
    local = by_candidate(one_worker_run["doc"])
    for n in ("correct", "wrong"):
        assert got[n].correctness.passed == local[n]["correctness"]["passed"]
        assert got[n].env["slot"].startswith("ray:")
    # it also tries to SIGKILL its Ray worker: refused (the sandbox allows signals to itself only), so only
    # its own candidate process dies and the job is a crash like any other
    assert "candidate process killed by SIGKILL" in got["killed"].message
    stored = [json.loads(x) for x in next(tmp_path.glob("*/results.jsonl")).read_text().splitlines()]
    assert sorted(r["candidate"] for r in stored) == names


def test_a_slot_starts_the_next_problems_judge_held_during_the_last_job_of_the_current_one(tmp_path, monkeypatch):
    """CUDA, one GPU: judges are told whether more jobs of their problem follow (so they warm a candidate
    process only then), and the next problem's judge is started in hold mode while the current problem's
    last job runs, then serves that problem: two judges for two problems, none started after a job waited."""
    import threading
    import time

    from kernelbench_cli.catalog import Candidate, Problem
    from kernelbench_cli.orchestrate import Job, local
    from kernelbench_cli.results import BuildInfo, RunStore
    from rich.console import Console

    made, runs, lock = [], [], threading.Lock()

    def fake_build(job, cfg, device, env, logs, tag):
        return job.result(cfg, device, status="ok", phase="done", build=BuildInfo(status="cached"))

    class FakeJudge:
        def __init__(self, problem_key, problem_path, cfg, device, env, logs, mode="serve", hold=False, jobs=1):
            self.problem_key, self.cfg, self.device, self.alive = problem_key, cfg, device, True
            with lock:
                made.append((problem_key, hold, jobs, time.perf_counter()))

        def run(self, job, spec, left=0):
            start = time.perf_counter()
            time.sleep(0.2)
            with lock:
                runs.append((job.problem.key, job.candidate.name, left, start, time.perf_counter(), id(self)))
            return job.result(self.cfg, self.device, status="ok", phase="done")

        def close(self):
            self.alive = False

    monkeypatch.setattr(local, "build", fake_build)
    monkeypatch.setattr(local, "JudgeClient", FakeJudge)
    monkeypatch.setenv("KBENCH_CACHE_DIR", str(tmp_path / "cache"))
    p1, p2 = Problem(tmp_path / "a.py", "level1", "1_A"), Problem(tmp_path / "b.py", "level1", "2_B")
    jobs = [Job(p1, Candidate(tmp_path / "x.py", "x", "cuda")), Job(p1, Candidate(tmp_path / "y.py", "y", "cuda")),
            Job(p2, Candidate(tmp_path / "z.py", "z", "cuda"))]
    cfg = load_config(None)
    results = local.execute_local(jobs, cfg, "cuda", RunStore(tmp_path / "runs"), Console(quiet=True))
    assert all(r.status == "ok" for r in results)
    assert [(k, h, n) for k, h, n, _ in made] == [("level1/1_A", False, 2), ("level1/2_B", True, 1)]
    left = {name: n for _, name, n, *_ in runs}
    assert left == {"x": 1, "y": 0, "z": 0}
    last_a = next(r for r in runs if r[1] == "y")
    assert made[1][3] < last_a[4]           # held judge started before the last job of 1_A ended
    assert len({r[5] for r in runs}) == 2   # the held judge served 2_B


def test_a_held_judge_touches_nothing_until_its_first_job_and_then_judges_it(build_cache, tmp_path, monkeypatch):
    """Real processes on the CPU: a judge started with hold=True answers its first job like any other, and
    one closed before any job exits with its candidate process."""
    from kernelbench_cli.catalog import Catalog
    from kernelbench_cli.orchestrate import judges, plan
    from kernelbench_cli.orchestrate.plan import tag

    monkeypatch.setenv("KBENCH_CACHE_DIR", str(build_cache))
    cfg = load_config(TEST_CONFIG, overrides={"device": "cpu"})
    catalog = Catalog(ROOT / "problems", FIXTURES / "kernels")
    jobs, _ = plan(catalog, [catalog.resolve("cpu/1_Add_ReLU")],
                   [FIXTURES / "kernels" / "cpu" / "1_Add_ReLU" / "correct.py"], "cpu")
    job, logs = jobs[0], tmp_path / "jobs"
    built = judges.build(job, cfg, "cpu", {}, logs, tag("build", 0, job))
    assert built.status == "ok", built.message
    idle = judges.JudgeClient(job.problem.key, str(job.problem.path), cfg, "cpu", {}, logs, hold=True)
    time.sleep(1)
    idle.close()
    assert not idle.alive
    held = judges.JudgeClient(job.problem.key, str(job.problem.path), cfg, "cpu", {}, logs, hold=True)
    try:
        result = held.run(job, job.spec(cfg, tag("job", 0, job)), left=0)
    finally:
        held.close()
    assert result.status == "ok", result.message
    assert result.correctness.passed == result.correctness.trials > 0
