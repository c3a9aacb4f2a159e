"""Lifecycle: kbench stopped by SIGINT, SIGTERM or SIGKILL mid-job leaves no process behind, and SIGINT says
where the results are and how to resume. Real processes, real signals: the job hangs in a candidate's
forward, so the reference process and the job's candidate process are alive."""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from conftest import FIXTURES, ROOT, TEST_CONFIG

HANG = FIXTURES / "kernels" / "cpu" / "1_Add_ReLU" / "hang.py"


def descendants(pid: int) -> set[int]:
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as f:
                    ppid = int(f.read().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            children.setdefault(ppid, []).append(int(entry))
    found, todo = set(), [pid]
    while todo:
        for c in children.get(todo.pop(), []):
            if c not in found:
                found.add(c)
                todo.append(c)
    return found


def cmdline(pid: int) -> str:
    """Its name (kbench's processes set kbench-judge, kbench-run...: a forked one keeps its parent's command
    line) and its command line."""
    try:
        with open(f"/proc/{pid}/comm") as f:
            name = f.read().strip()
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return name + " " + f.read().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""


def name(pid: int) -> str:
    """/proc/<pid>/comm alone: a command line can hold a kbench name as part of a path (.kbench-runs/...)."""
    try:
        with open(f"/proc/{pid}/comm") as f:
            return f.read().strip()
    except OSError:
        return ""


def alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def wait_for(proc: subprocess.Popen, marker: str, timeout: float, why: str) -> set[int]:
    """kbench's process tree once a live process in it is named `marker`."""
    deadline, tree = time.time() + timeout, set()
    while time.time() < deadline:
        tree |= descendants(proc.pid)
        if any(name(p) == marker for p in tree if alive(p)):
            return tree
        time.sleep(0.1)
    proc.kill()
    pytest.fail(why)


def wait_for_mark(trace: Path, mark: str, timeout: float, why: str) -> None:
    """Until the KBENCH_TRACE timeline has `mark` (candidate processes are forked before the build ends, so
    one alive says nothing of where the job is; a kill mid-build is another test)."""
    deadline = time.time() + timeout
    while time.time() < deadline:
        if trace.exists() and mark in trace.read_text():
            return
        time.sleep(0.1)
    pytest.fail(why)


def assert_gone_within_5_s(tree: set[int]) -> None:
    gone_by = time.time() + 5
    while time.time() < gone_by and any(alive(p) for p in tree):
        time.sleep(0.1)
    assert not [(p, cmdline(p)) for p in tree if alive(p)]


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM, signal.SIGKILL])
def test_a_stopped_kbench_leaves_no_process_behind(sig, build_cache, tmp_path):
    env = dict(os.environ, KBENCH_CACHE_DIR=str(build_cache), PYTHONPATH=str(ROOT),
               KBENCH_TRACE=str(tmp_path / "trace"))
    proc = subprocess.Popen([sys.executable, "-m", "kernelbench_cli", "check", "cpu/1", "--kernel", str(HANG),
                             "--device", "cpu", "--config", str(TEST_CONFIG), "--out", str(tmp_path / "runs"),
                             "--set", "timeouts.run_s=300"], cwd=ROOT, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    tree = wait_for(proc, "kbench-run", 300, "the job's candidate process never started")
    wait_for_mark(tmp_path / "trace", "load done", 300, "the job never loaded its candidate")
    time.sleep(1.0)                    # inside the hanging forward
    tree |= descendants(proc.pid)
    assert any(name(p) == "kbench-judge" for p in tree)
    os.kill(proc.pid, sig)
    out, errs = proc.communicate(timeout=30)
    assert_gone_within_5_s(tree)
    if sig == signal.SIGINT:
        assert proc.returncode == 130
        line = errs.strip().splitlines()[-1]
        assert line.startswith("interrupted:") and "results.jsonl" in line and "--resume" in line
    elif sig == signal.SIGTERM:
        assert proc.returncode == 143


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGKILL])
def test_a_kbench_stopped_mid_build_leaves_no_compiler_behind(sig, tmp_path):
    """ninja runs each compiler in a process group of its own, so killing the build's group left cc1plus
    running; the build's whole session is killed now. A fresh cache: the C++ really compiles."""
    env = dict(os.environ, KBENCH_CACHE_DIR=str(tmp_path / "cache"), PYTHONPATH=str(ROOT))
    proc = subprocess.Popen([sys.executable, "-m", "kernelbench_cli", "check", "cpu/1", "--device", "cpu",
                             "--kernel", str(ROOT / "kernels" / "cpu" / "1_Add_ReLU" / "fused.py"),
                             "--out", str(tmp_path / "runs")], cwd=ROOT, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    tree = wait_for(proc, "cc1plus", 120, "no compiler started")
    time.sleep(0.5)
    tree |= descendants(proc.pid)
    os.kill(proc.pid, sig)
    proc.communicate(timeout=30)
    assert_gone_within_5_s(tree)


ORPHAN = FIXTURES / "lifecycle" / "cpu" / "1_Add_ReLU" / "orphan_helper.py"


def named(comm: str) -> list[int]:
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit() and alive(int(entry)):
            try:
                with open(f"/proc/{entry}/comm") as f:
                    if f.read().strip() == comm:
                        found.append(int(entry))
            except OSError:
                pass
    return found


def test_a_helper_that_leaves_the_builds_session_does_not_outlive_the_build(tmp_path):
    """The build process ran the candidate's import unconfined (it forks compilers): a helper forked there
    that leaves the build's session with setsid was outside what kill_session finds and outlived kbench (red
    team, session 11: such helpers slowed the reference while the candidate was frozen). kbench is a child
    subreaper now, so the helper comes back to it once its parents are gone and is killed after the build
    (what guards a CUDA build, whose import still runs unconfined); a CPU build's import is sandboxed since
    session 20 and its fork is refused. A fresh cache: the build process really runs."""
    for pid in named("kbench_orphan"):         # a failed run's leftovers
        os.kill(pid, signal.SIGKILL)
    env = dict(os.environ, KBENCH_CACHE_DIR=str(tmp_path / "cache"), PYTHONPATH=str(ROOT))
    proc = subprocess.run([sys.executable, "-m", "kernelbench_cli", "check", "cpu/1", "--device", "cpu",
                           "--kernel", str(ORPHAN), "--config", str(TEST_CONFIG), "--out", str(tmp_path / "runs")],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    assert "Traceback" not in proc.stderr, proc.stderr[-2000:]
    gone_by = time.time() + 5
    while time.time() < gone_by and named("kbench_orphan"):
        time.sleep(0.1)
    left = named("kbench_orphan")
    for pid in left:
        os.kill(pid, signal.SIGKILL)
    assert not left, "the build's helper outlived kbench"


FULL_DISK = """
import resource, sys
from kernelbench_cli.errors import InputError
from kernelbench_cli.results import Result, RunStore
store = RunStore(sys.argv[1], "20261202-000000-001")
store.write_config({"k": 1})
resource.setrlimit(resource.RLIMIT_FSIZE, (6000, 6000))    # what a full disk does to the next write
n = 0
try:
    for i in range(100):
        store.append(Result(problem="cpu/1_Add_ReLU", candidate=f"c{i}", candidate_path="c.py", device="cpu",
                            dtype="float32", message="x" * 400))
        n += 1
except InputError as e:
    print(n, e)
"""


def test_a_full_disk_while_results_are_written_is_one_clear_line_and_keeps_every_earlier_record(tmp_path):
    """Fault injection: the results file cannot grow (a file-size limit: the kernel refuses the write, as on a
    full disk) while a run appends its records: one line naming the file, how many records are intact and how
    to resume; the file keeps every complete record and no torn line."""
    proc = subprocess.run([sys.executable, "-c", FULL_DISK, str(tmp_path)], capture_output=True, text=True,
                          cwd=ROOT, env=dict(os.environ, PYTHONPATH=str(ROOT)), timeout=120)
    assert proc.returncode == 0 and proc.stdout.strip(), proc.stderr[-2000:]
    n, message = proc.stdout.strip().split(" ", 1)
    results = tmp_path / "20261202-000000-001" / "results.jsonl"
    assert int(n) >= 1 and f"{results}: cannot write this job's record (File too large)" in message, message
    assert f"the {n} earlier record(s) are intact" in message and "--resume" in message, message
    text = results.read_text()
    assert text.endswith("\n") and len(text.splitlines()) == int(n)
    from kernelbench_cli.results import load_results
    assert [r.candidate for r in load_results(results)] == [f"c{i}" for i in range(int(n))]


def test_the_warm_server_forks_reference_processes_that_die_with_the_kbench_that_asked(build_cache, tmp_path):
    """`kbench serve`: a check's reference process is forked by the server (torch imported already), and
    SIGKILL of that check takes the reference process and its candidates with it while the server lives on;
    a check whose import-time environment differs is refused and starts its own, with a note; a build
    process gets nothing from it; Ctrl-C stops the server and everything of it."""
    env = dict(os.environ, KBENCH_CACHE_DIR=str(build_cache), PYTHONPATH=str(ROOT),
               KBENCH_SERVE_SOCKET=str(tmp_path / "serve" / "kbench.sock"))
    server = subprocess.Popen([sys.executable, "-m", "kernelbench_cli", "serve"], cwd=ROOT, env=env,
                              stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    zygote: list[int] = []

    def check(kernel: Path, trace: Path, **more) -> subprocess.Popen:
        return subprocess.Popen([sys.executable, "-m", "kernelbench_cli", "check", "cpu/1", "--kernel", str(kernel),
                                 "--device", "cpu", "--config", str(TEST_CONFIG), "--out", str(tmp_path / "runs"),
                                 "--set", "timeouts.run_s=300"], cwd=ROOT, env=dict(env, KBENCH_TRACE=str(trace), **more),
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert "ready" in server.stderr.readline()
        zygote = [p for p in descendants(server.pid) if name(p) == "kbench-serve"]
        hung = check(HANG, tmp_path / "hang.trace")
        tree = wait_for(server, "kbench-run", 300, "no candidate process was forked under the server")
        wait_for_mark(tmp_path / "hang.trace", "load done", 300, "the job never loaded its candidate")
        time.sleep(1.0)                                   # inside the hanging forward
        tree = {p for p in descendants(server.pid) if name(p) in ("kbench-judge", "kbench-run")}
        assert "forked by the server" in (tmp_path / "hang.trace").read_text()
        assert {"kbench-judge", "kbench-run"} <= {name(p) for p in tree}
        assert not descendants(hung.pid) & tree
        hung.kill()
        hung.communicate(timeout=30)
        assert_gone_within_5_s(tree)
        assert zygote and all(alive(p) for p in zygote)    # the server serves on

        ok = FIXTURES / "kernels" / "cpu" / "1_Add_ReLU" / "correct.py"
        other = check(ok, tmp_path / "other.trace", OMP_NUM_THREADS="1")   # read at import: not the server's
        _, errs = other.communicate(timeout=600)
        assert other.returncode == 0 and "kbench serve refused" in errs, errs[-2000:]
        assert "forked by the server" not in (tmp_path / "other.trace").read_text()
        served = check(ok, tmp_path / "ok.trace")
        out, errs = served.communicate(timeout=600)
        assert served.returncode == 0 and "forked by the server" in (tmp_path / "ok.trace").read_text(), errs[-2000:]

        # a build process (candidate code at import) asking the server for a reference process of its own
        asks = check(FIXTURES / "lifecycle" / "cpu" / "1_Add_ReLU" / "asks_the_server.py", tmp_path / "asks.trace")
        asks.communicate(timeout=600)
        asked = [line for log in (tmp_path / "runs").glob("*/jobs/*.log") for line in log.read_text().splitlines()
                 if line.startswith("asks_the_server: ")]
        assert asked and not [a for a in asked if a.startswith("asks_the_server: served")], asked
    finally:
        server.send_signal(signal.SIGINT)
        server.communicate(timeout=30)
    assert server.returncode == 0
    assert_gone_within_5_s(set(zygote))


def test_the_warm_server_serves_no_process_that_holds_less_than_it_does():
    """What the server checks of a client (judge/zygote.py _peer_refused): a process under a build's seccomp
    filter (or with fewer capabilities) would get a reference process with more than it has."""
    from kernelbench_cli.judge.zygote import _peer_refused
    assert _peer_refused(os.getpid()) == ""
    confined = subprocess.Popen([sys.executable, "-c", "import sys, time; from kernelbench_cli import sandbox; "
                                 "sandbox.confine_build(); print('ready', flush=True); time.sleep(60)"],
                                cwd=ROOT, env=dict(os.environ, PYTHONPATH=str(ROOT)), stdout=subprocess.PIPE, text=True)
    try:
        assert confined.stdout.readline().strip() == "ready"
        assert "seccomp" in _peer_refused(confined.pid)
    finally:
        confined.kill()
        confined.wait()
