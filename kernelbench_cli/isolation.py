"""Parent side of a job: spawn a fresh worker process, enforce its wall-clock limit, read its Result.

The parent never imports candidate code. The worker runs in its own session (process group), so a
timeout kills it together with anything it started (compilers, threads, stray children).
"""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from . import results as R
from .results import Result

STDERR_TAIL_LINES = 25
PACKAGE_PARENT = str(Path(__file__).resolve().parent.parent)
_RUNNING: set = set()     # live workers, so an interrupted parallel run can kill them (kill_running)


def worker_env(extra: dict) -> dict:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (PACKAGE_PARENT, env.get("PYTHONPATH")) if p)
    env["PYTHONUNBUFFERED"] = "1"
    env.update({k: str(v) for k, v in extra.items() if v is not None})
    return env


def tail(path: Path, lines: int = STDERR_TAIL_LINES) -> str:
    try:
        text = path.read_text(errors="replace")
    except OSError:
        return ""
    return "\n".join(text.rstrip().splitlines()[-lines:])


def run_isolated(spec: dict, work_dir: Path, tag: str, timeout_s: float, env: dict) -> Result:
    """Run one job spec in a worker process; always returns a Result, whatever the worker did."""
    work_dir.mkdir(parents=True, exist_ok=True)
    spec_path, out_path, log_path = (work_dir / f"{tag}.{ext}" for ext in ("spec.json", "result.json", "log"))
    spec_path.write_text(json.dumps(spec))
    out_path.unlink(missing_ok=True)
    start = time.perf_counter()
    with open(log_path, "w") as log:
        proc = subprocess.Popen([sys.executable, "-m", "kernelbench_cli.worker", str(spec_path), str(out_path)],
                                stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                env=worker_env(env), start_new_session=True)
        _RUNNING.add(proc)
        timed_out = False
        try:
            proc.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            timed_out = True
        finally:
            _kill_group(proc)
            _RUNNING.discard(proc)
    wall = time.perf_counter() - start
    result = _read_result(out_path, spec)
    result.stderr_tail = tail(log_path)
    result.wall_s = round(wall, 3)
    if timed_out:
        result.status = R.TIMEOUT
        result.message = f"killed after {timeout_s:g} s (wall-clock limit) during {result.phase}"
    elif proc.returncode != 0 or result.phase != "done":
        result.status = R.CRASH
        result.message = f"worker {_describe_exit(proc.returncode)} during {result.phase}"
    result.finished_at = time.time()
    return result


def kill_running() -> None:
    """Kill every worker still running (their own sessions do not get the terminal's Ctrl-C)."""
    for proc in list(_RUNNING):
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass


def _kill_group(proc: subprocess.Popen) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    proc.wait()


def _read_result(out_path: Path, spec: dict) -> Result:
    try:
        return Result.from_dict(json.loads(out_path.read_text()))
    except (OSError, ValueError, TypeError):
        return Result(problem=spec["problem_key"], candidate=spec["candidate_name"],
                      candidate_path=spec["candidate_path"], device=spec["device"], dtype=spec["config"]["dtype"])


def _describe_exit(code: int) -> str:
    if code is not None and code < 0:
        try:
            return f"killed by {signal.Signals(-code).name}"
        except ValueError:
            return f"killed by signal {-code}"
    return f"exited with code {code} before finishing"
