"""The parent's side of the processes it starts: reference processes (one per problem and slot, serving
job after job) and build processes (one per candidate file). The parent never imports either's code; it
sends typed specs and reads Results as JSON."""
from __future__ import annotations

import dataclasses
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from .. import results as R
from ..build import cache_dir, record_build, record_key, recorded_build
from ..catalog import problem_digest
from ..channel import Channel, ChannelClosed, Reply, from_message
from ..judge.handle import ENV_ALLOW, LOAD_FAILURES, PACKAGE_PARENT, CandidateProcess, describe_exit, log_tail
from ..results import BuildInfo, Result
from .. import trace
from . import lifecycle, warm
from .plan import Job, JobSpec

JUDGE_SETUP_S = 120      # beyond run_s: loading the problem, reference outputs and the fp64 oracle (first job)
# What a reference process sees of the parent's environment: what torch, CUDA, Triton, compilers, caches and
# kbench read, never the rest (tokens, credentials). Its first candidate processes are forks of it (forking.py),
# and a fork's /proc/self/environ and memory are its parent's.
JUDGE_ENV_NAMES = ENV_ALLOW + ("HOME", "USER", "LOGNAME", "TMPDIR", "CPATH", "PYTHONPATH", "PYTHONHASHSEED",
                               "VIRTUAL_ENV", "CONDA_PREFIX", "KBENCH_TRACE", "KBENCH_CACHE_DIR")
JUDGE_ENV_PREFIXES = ("TORCH", "PYTORCH_", "TRITON_", "CUDA", "NVIDIA_", "CUBLAS", "CUDNN", "NCCL_", "OMP_", "KMP_",
                      "GOMP_", "MKL_", "OPENBLAS_", "MALLOC_", "LC_", "XDG_")


def reference_env(cfg, device: str, extra: dict | None = None) -> dict:
    """The environment of a reference process (exec'd, or forked by `kbench serve`, which starts with this)."""
    env = {k: v for k, v in os.environ.items() if (k in JUDGE_ENV_NAMES or k.startswith(JUDGE_ENV_PREFIXES))
           and not any(w in k for w in ("TOKEN", "SECRET", "PASSWORD", "CREDENTIAL", "_KEY"))}
    env.update({k: str(v) for k, v in (extra or {}).items() if v is not None})
    # kbench pins the intra-op threads itself (cpus.py): libgomp's own binding would kill a confined candidate
    # that starts a larger team (its creator sets the new thread's affinity, which seccomp refuses)
    for name in ("OMP_PROC_BIND", "OMP_PLACES", "GOMP_CPU_AFFINITY"):
        env.pop(name, None)
    # numpy's BLAS would start a thread pool at import: a reference process must stay one thread to fork
    # (neither process times numpy's BLAS)
    env.setdefault("OPENBLAS_NUM_THREADS", "1")
    # OpenMP workers that spin after a parallel region would steal the cores the other process is being
    # timed on (the judge and its candidate take turns on the same CPU): both sleep at once instead.
    env.setdefault("OMP_WAIT_POLICY", "PASSIVE")
    # glibc returns large freed blocks to the OS and takes them back on the next call, so a CPU timing
    # swung with whether a call's buffers were page-faulted in again (2-6 ms for the same eager call on
    # the CI box). Keeping freed memory in the heap, for both processes, makes every call see a warm
    # allocator, as a long-running program would.
    env.setdefault("MALLOC_MMAP_THRESHOLD_", str(32 << 20))
    env.setdefault("MALLOC_TRIM_THRESHOLD_", str(1 << 40))
    # torch.compile's baseline compiles the reference (inductor: ~10 s per problem on the H200, the largest
    # share of a suite's harness time): its cache beside kbench's builds lasts as long as they do (a CI
    # cache of KBENCH_CACHE_DIR), where its default under /tmp goes with the machine.
    env.setdefault("TORCHINDUCTOR_CACHE_DIR", str(Path(cache_dir(cfg)) / "inductor"))
    if device == "cpu" and cfg.timing.cpu_threads:
        # equal, pinned thread counts for the reference and (inherited) its candidates: on a shared 2-core
        # box a one-thread speedup moved ~4x less between runs than a two-thread one (README, CI gate)
        env.update(OMP_NUM_THREADS=str(cfg.timing.cpu_threads), MKL_NUM_THREADS=str(cfg.timing.cpu_threads))
    env.update(PYTHONPATH=os.pathsep.join(p for p in (PACKAGE_PARENT, os.environ.get("PYTHONPATH")) if p),
               PYTHONUNBUFFERED="1", KBENCH_PARENT_PID=str(os.getpid()))
    return env


class JudgeClient:
    """One reference process for one problem on one slot: forked by the warm server (`kbench serve`) if one
    is up and matches, else a fresh python."""

    def __init__(self, problem_key: str, problem_path: str, cfg, device: str, env: dict, logs: Path,
                 mode: str = "serve", hold: bool = False, jobs: int = 1):
        """jobs: how many jobs of this problem the parent expects to send (the judge starts candidate processes
        that many ahead, up to its depth)."""
        self.problem_key, self.cfg, self.device = problem_key, cfg, device
        logs.mkdir(parents=True, exist_ok=True)
        self.chan, theirs = Channel.pair()
        name = problem_key.replace("/", "_")
        self.log_path = logs / f"judge-{name}-{int(time.time() * 1000) % 10**8}.log"
        full_env = reference_env(cfg, device, env)
        with open(self.log_path, "w") as log, lifecycle.spawning:    # registered before a sweep can see it
            self.proc = warm.spawn(full_env, log, theirs)
            if self.proc is None:
                self.proc = subprocess.Popen([sys.executable, "-m", "kernelbench_cli.judge"], stdin=subprocess.DEVNULL,
                                             stdout=log, stderr=subprocess.STDOUT, pass_fds=(theirs.fileno(),),
                                             env=dict(full_env, KBENCH_FD=str(theirs.fileno())), start_new_session=True)
            lifecycle.register(self.proc.pid)
        theirs.close()
        trace.mark("parent", f"judge {self.proc.pid} {problem_key}: {'forked by the server' if warm.served(self.proc) else 'started'}")
        self.chan.send({"op": "problem", "problem_path": str(Path(problem_path).resolve()) if problem_path else "",
                        "problem_sha256": problem_digest(problem_path) if problem_path else "",
                        "problem_key": problem_key, "device": device,
                        "config": cfg.to_dict(), "logs": str(logs), "mode": mode, "hold": hold,
                        "jobs": jobs})

    def _dead(self, job: Job | None, spec: JobSpec | None, why: str) -> Result:
        self.close()
        tail = log_tail(self.log_path)
        kw = dict(status=R.CRASH, phase="done", message=why, stderr_tail=tail + f"\n(reference process log: {self.log_path})")
        if job is None:
            return Result(problem=self.problem_key, candidate="", candidate_path="", device=self.device,
                          dtype=self.cfg.dtype, **kw)
        return job.result(self.cfg, self.device, **kw)

    def result(self, timeout: float, job: Job | None = None, spec: JobSpec | None = None) -> Result:
        try:
            msg, _ = self.chan.recv(timeout)
        except TimeoutError:
            r = self._dead(job, spec, f"killed after {timeout:g} s (wall-clock limit)")
            r.status = R.TIMEOUT
            return r
        except (ChannelClosed, OSError, ValueError):
            code = self.proc.wait()
            return self._dead(job, spec, f"reference process {describe_exit(code)}")
        return Result.from_dict(msg["result"])

    def run(self, job: Job, spec: JobSpec, left: int = 0) -> Result:
        """left: how many more jobs of this problem may follow (the judge keeps candidate processes warming
        up for them)."""
        start = time.perf_counter()
        try:
            self.chan.send({"op": "job", "job": dataclasses.asdict(spec), "left": left})
        except OSError:
            return self._dead(job, spec, "reference process is gone")
        trace.mark("parent", f"job {spec.tag}: sent")
        result = self.result(self.cfg.timeouts.run_s + JUDGE_SETUP_S, job, spec)
        trace.mark("parent", f"job {spec.tag}: {result.status}")
        result.wall_s = round(time.perf_counter() - start, 3)
        result.finished_at = time.time()
        return result

    @property
    def alive(self) -> bool:
        return self.proc.poll() is None

    def close(self) -> None:
        if self.proc.poll() is None:
            try:
                self.chan.send({"op": "quit"})
                self.proc.wait(timeout=10)
            except (OSError, subprocess.TimeoutExpired):
                pass
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)    # anything of it still alive (a stuck candidate)
        except OSError:
            pass
        self.proc.wait()
        lifecycle.release(self.proc.pid)
        self.chan.close()


def recorded(job: Job, cfg, device: str, env: dict, tag: str, key: str | None = None) -> Result | None:
    """The build Result of a candidate built before (unchanged, its extensions still in the cache), with no
    build process started; None if it must be built. `key`: its record key, if the caller has it."""
    start = time.perf_counter()
    info = recorded_build(cache_dir(cfg), key or record_key(job.candidate.path, device, env))
    if info is None:
        return None
    trace.mark("parent", f"build {tag}: recorded")
    return job.result(cfg, device, phase="done", status=R.OK, build=BuildInfo(**info),
                      wall_s=round(time.perf_counter() - start, 3), finished_at=time.time())


def build(job: Job, cfg, device: str, env: dict, logs: Path, tag: str) -> Result:
    """Import the candidate once with load_inline compiling into the cache, in an untrusted build process
    (scrubbed environment, own working directory, no capabilities, its own process group)."""
    key = record_key(job.candidate.path, device, env)
    hit = recorded(job, cfg, device, env, tag, key)
    if hit is not None:
        return hit
    logs.mkdir(parents=True, exist_ok=True)
    start = time.perf_counter()
    with lifecycle.spawning:                  # registered before a sweep can see it
        proc = CandidateProcess(device, logs / f"{tag}.log", mode="build", extra_env=env, new_group=True)
        lifecycle.register(proc.pid)
    result = job.result(cfg, device, phase="build")
    try:
        spec = job.spec(cfg, tag)
        proc.chan.send({"op": "build", "candidate_path": spec.candidate_path, "cache_dir": spec.cache_dir,
                        "verbose": cfg.build.verbose, "backends": list(spec.backends),
                        "problem_path": spec.problem_path, "dtype": cfg.dtype})   # (for a warm-up: triton)
        msg, _ = proc.chan.recv(cfg.timeouts.build_s)
        reply = from_message(Reply, msg)
        result.build = from_message(BuildInfo, reply.build)     # (the build process may have run candidate code)
        result.status = R.OK if reply.ok else reply.status if reply.status in LOAD_FAILURES else R.IMPORT_ERROR
        result.message = reply.message
        result.phase = "done"
    except TimeoutError:
        result.status, result.message = R.TIMEOUT, f"build killed after {cfg.timeouts.build_s:g} s (wall-clock limit)"
    except (ChannelClosed, OSError, ValueError):
        proc.kill()
        result.status, result.message = R.CRASH, f"build process {describe_exit(proc.exit_status)} during import"
    finally:
        lifecycle.kill_session(proc.pid)      # compilers it left running, if any (ninja regroups them)
        proc.kill()
        lifecycle.release(proc.pid)
        lifecycle.sweep_orphans()             # and what left its session: ours once the build is gone
    trace.mark("parent", f"build {tag}: {result.status}")
    if result.status == R.OK:
        record_build(cache_dir(cfg), key, dataclasses.asdict(result.build))
    result.stderr_tail = log_tail(proc.log_path)
    if result.status != R.OK:
        result.stderr_tail += f"\n(build log: {proc.log_path})"
    result.build.seconds = result.build.seconds or round(time.perf_counter() - start, 3)
    result.wall_s = round(time.perf_counter() - start, 3)
    result.finished_at = time.time()
    return result
