"""The reference process's hold on a candidate process: start it warm, freeze it between calls, call it
with a witness clock, see its threads and whether it left work on the device.

Freezing is SIGSTOP confirmed by waitpid(WUNTRACED): the kernel reports the stop only once every thread of
the candidate has stopped, Python or native, so nothing of it runs while the reference is timed, while
its outputs are compared, or after it said a call was done. The witness is this process's own clock
around a call: from handing over (thaw + message) to receiving the reply, then the freeze.
"""
from __future__ import annotations

import os
import secrets
import select
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from .. import sandbox, trace
from ..channel import MAX_UNTRUSTED_MESSAGE, Channel, ChannelClosed, Reply, from_message
from ..forking import fork_main, forkable
from .places import code_maps
from .sampler import Sampler, SamplingFailed

PACKAGE_PARENT = str(Path(__file__).resolve().parents[2])
# What a candidate process may see of the environment: enough to find compilers, libraries and the GPU;
# no tokens, credentials or kbench paths.
ENV_ALLOW = ("PATH", "LANG", "LC_ALL", "LC_CTYPE", "CUDA_HOME", "CUDA_PATH", "LD_LIBRARY_PATH", "LIBRARY_PATH",
             "CUDA_VISIBLE_DEVICES", "TORCH_CUDA_ARCH_LIST", "MAX_JOBS", "CC", "CXX", "OMP_NUM_THREADS",
             "MKL_NUM_THREADS", "MALLOC_ARENA_MAX", "MALLOC_MMAP_THRESHOLD_", "MALLOC_TRIM_THRESHOLD_",
             "NVIDIA_VISIBLE_DEVICES", "CUDA_MODULE_LOADING", "OMP_WAIT_POLICY", "OPENBLAS_NUM_THREADS",
             "KBENCH_CPUS")


def cpu_ns(pid: int) -> tuple[int, dict, int] | None:
    """The kernel's count of a process's CPU time, in ns: all its threads' together, dead ones included (its
    process CPU clock, which Linux lets any process read), and each live thread's (/proc/.../schedstat); and the
    last pid given out in this pid namespace (a thread takes one too), -1 where it cannot be read."""
    try:
        each = {}
        for tid in os.listdir(f"/proc/{pid}/task"):
            with open(f"/proc/{pid}/task/{tid}/schedstat") as f:
                each[tid] = int(f.read().split()[0])
        total = time.clock_gettime_ns((~pid << 3) | 2)        # CPUCLOCK_SCHED of the process
    except (OSError, ValueError, IndexError):
        return None
    try:
        with open("/proc/sys/kernel/ns_last_pid") as f:
            last = int(f.read())
    except (OSError, ValueError):
        last = -1
    return total, each, last


def busy_ms(before, after, cpus: int | None = None) -> float | None:
    """The least wall time the CPU work between two cpu_ns() readings can have taken: no thread runs faster
    than the clock, and no more threads than CPUs run at once. Threads that ended in between (their time is in
    the total only) ran at most as many at once as there were of them: those alive before and gone after, plus
    the pids given out meanwhile, each new thread's among them. Descheduling, which stretches the wall, adds
    nothing here, so this witness stays exact on a loaded host (docs/architecture.md, "The CPU-time witness")."""
    if before is None or after is None:
        return None
    cpus = cpus or os.cpu_count() or 1
    live = {tid: ns - before[1].get(tid, 0) for tid, ns in after[1].items()}
    total = after[0] - before[0]
    ended = total - sum(live.values())
    new = after[2] - before[2] if min(before[2], after[2]) >= 0 else cpus      # (-1: unread; < 0: wrapped)
    at_once = min(cpus, max(1, len(set(before[1]) - set(after[1])) + (new if new >= 0 else cpus)))
    return max(max(live.values(), default=0), total / cpus, ended / at_once) / 1e6


# What a candidate process can say went wrong (candidate/process.py): whatever else an error reply says is
# candidate code writing to the judge's channel (a forged "ok" once ended a job ok, its flags dropped).
FAILURES = ("runtime-error", "cuda-error")
LOAD_FAILURES = FAILURES + ("compile-error", "import-error", "missing-modelnew", "bad-constructor")


class CandidateFailed(Exception):
    """The candidate process reported an error, died, or ran out of time; `status` is the Result status."""

    def __init__(self, status: str, message: str, reply: Reply | None = None, phase: str = ""):
        super().__init__(message)
        self.status, self.message, self.reply, self.phase = status, message, reply, phase


def log_tail(path, lines: int = 25) -> str:
    """The last lines of a process's log (kept in a failed Result)."""
    try:
        return "\n".join(Path(path).read_text(errors="replace").rstrip().splitlines()[-lines:])
    except OSError:
        return ""


def describe_exit(code) -> str:
    """How a process ended, from a Popen-style return code (-signal or exit code)."""
    if code is not None and code < 0:
        try:
            return f"killed by {signal.Signals(-code).name}"
        except ValueError:
            return f"killed by signal {-code}"
    return f"exited with code {code}"


def candidate_env(device: str, workdir: str, fd: int, extra: dict | None = None, hold: bool = False) -> dict:
    env = {k: v for k, v in os.environ.items() if k in ENV_ALLOW}
    env.update({k: str(v) for k, v in (extra or {}).items() if k in ENV_ALLOW and v is not None})
    env.update(PYTHONPATH=PACKAGE_PARENT, PYTHONUNBUFFERED="1", PYTHONDONTWRITEBYTECODE="1", HOME=workdir,
               TMPDIR=workdir, KBENCH_DEVICE=device, KBENCH_FD=str(fd), KBENCH_PARENT_PID=str(os.getpid()),
               KBENCH_WORKDIR=workdir)
    if hold:
        env["KBENCH_HOLD"] = "1"
    if device == "cpu" and not sandbox.has_capability(sandbox.CAP_SYS_PTRACE):
        env["KBENCH_READABLE"] = "1"     # this judge reads its outputs without the capability (sandbox.py)
    return env


class CandidateProcess:
    def __init__(self, device: str, log_path: Path, mode: str = "run", extra_env: dict | None = None,
                 new_group: bool = False, hold: bool = False, fork: bool = False):
        """new_group: a build process started by the parent gets a process group of its own; a candidate
        process started by the reference process stays in the reference process's group. hold: it imports
        torch and waits for go() before it touches the device. fork: start it as a fork of this process (torch
        imported already: forking.py) where that is safe; only a caller holding no secret yet may ask."""
        self.device, self.log_path = device, Path(log_path)
        self.workdir = tempfile.mkdtemp(prefix="kbench-cand-")
        self.chan, theirs = Channel.pair()
        self.chan.limit = MAX_UNTRUSTED_MESSAGE
        self.log = open(self.log_path, "w")
        env = candidate_env(device, self.workdir, theirs.fileno(), extra_env, hold)
        self.held = hold
        why = forkable() if fork else ""
        self.forked = fork and not why
        if self.forked:
            from ..candidate.entry import main
            self.pid = fork_main(main, [mode], env, self.workdir, self.log.fileno(), theirs.fileno(), new_group)
        else:
            self.pid = subprocess.Popen([sys.executable, "-m", "kernelbench_cli.candidate", mode], cwd=self.workdir,
                                        stdin=subprocess.DEVNULL, stdout=self.log, stderr=subprocess.STDOUT, env=env,
                                        pass_fds=(theirs.fileno(),), start_new_session=new_group).pid
        theirs.close()
        trace.mark("judge" if mode == "run" else "parent",
                   f"candidate {self.pid} {mode}: {'forked' if self.forked else 'started'}{f' (not forked: {why})' if why else ''}")
        self.exit_status: int | None = None     # as Popen.returncode: -signal or the exit code
        self.freeze_ms = 0.0                    # the last call's reply to all-stopped (sides.RETIME_MS)
        self.busy_ms: float | None = None       # the last call's CPU work as wall time, CPU only (busy_ms)
        self.ready = False
        self.threads0: set[str] = set()
        self.code0: list = []

    # --- lifecycle ---
    def go(self) -> None:
        """A held process may now bring the device up."""
        if self.held:
            self.held = False
            try:
                self.chan.send({"op": "go"})
            except OSError:
                pass          # it died: wait_ready reports how

    def wait_ready(self, timeout: float) -> None:
        """The process is warm (torch imported, device up): take the thread baseline and freeze it."""
        if self.ready:
            return
        self.go()
        self.recv(timeout, expect="ready")
        trace.mark("judge", f"candidate {self.pid}: ready")
        self.ready = True
        self.freeze()
        self.threads0 = self.threads()
        self.code0 = code_maps(self.pid)        # torch's code, before any candidate code (judge/sampler.py)

    def _reap(self, options: int) -> bool:
        """waitpid; True if the process has stopped (records the exit status if it ended instead)."""
        if self.exit_status is not None:
            return False
        try:
            pid, status = os.waitpid(self.pid, options)
        except ChildProcessError:
            self.exit_status = self.exit_status if self.exit_status is not None else -signal.SIGKILL
            return False
        if pid == 0:
            return False
        if os.WIFSTOPPED(status):
            return True
        self.exit_status = -os.WTERMSIG(status) if os.WIFSIGNALED(status) else os.WEXITSTATUS(status)
        return False

    def freeze(self) -> None:
        if self.exit_status is not None:
            return
        try:
            os.kill(self.pid, signal.SIGSTOP)
        except ProcessLookupError:
            pass
        self._reap(os.WUNTRACED)

    def thaw(self) -> None:
        if self.exit_status is None:
            try:
                os.kill(self.pid, signal.SIGCONT)
            except ProcessLookupError:
                pass

    def kill(self, wait: bool = True) -> None:
        """SIGKILL: nothing of it runs after this returns. Its teardown (the driver freeing a CUDA context,
        ~0.4 s on the H200) is waited for here unless wait=False; then reap() must follow."""
        if self.exit_status is None:
            try:
                os.kill(self.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        self.chan.close()
        self.log.close()
        if wait:
            self.reap()

    def reap(self) -> None:
        while self.exit_status is None:
            self._reap(0)
        shutil.rmtree(self.workdir, ignore_errors=True)

    def alive(self) -> bool:
        self._reap(os.WNOHANG)
        return self.exit_status is None

    def threads(self) -> set[str]:
        try:
            return set(os.listdir(f"/proc/{self.pid}/task"))
        except OSError:
            return set()

    def thread_names(self, tids) -> list[str]:
        """What the threads call themselves (/proc/.../comm: set by the candidate, so only said, never used)."""
        names = []
        for tid in tids:
            try:
                with open(f"/proc/{self.pid}/task/{tid}/comm") as f:
                    names.append(f.read().strip()[:16])
            except OSError:
                pass
        return names

    # --- messages ---
    def died(self, phase: str) -> CandidateFailed:
        deadline = time.time() + 5
        while self.exit_status is None and time.time() < deadline:
            self._reap(os.WNOHANG)
            time.sleep(0.01)
        return CandidateFailed("crash", f"candidate process {describe_exit(self.exit_status)} during {phase}",
                               phase=phase)

    def recv(self, timeout: float, expect: str | None = None, phase: str = "start", nonce: int = 0) -> Reply:
        """The reply to the request that carried `nonce` (0: none, the "ready" at start). The channel is the
        candidate's too: a reply its code wrote ahead, before the request existed, cannot know the nonce."""
        try:
            msg, fds = self.chan.recv(timeout)
            for fd in fds:      # a candidate sends none: kept, enough of them would leave the judge none to open
                os.close(fd)    # (cpu_ns, the CPU-time witness, reads /proc: session 34's red team)
        except TimeoutError:
            raise CandidateFailed("timeout", f"no answer within {timeout:g} s during {phase}", phase=phase) from None
        except ChannelClosed:
            raise self.died(phase) from None
        except ValueError as e:
            raise CandidateFailed("integrity", f"malformed message from the candidate process: {e}", phase=phase) from None
        try:
            reply = from_message(Reply, msg)
        except (TypeError, ValueError) as e:
            raise CandidateFailed("integrity", f"malformed message from the candidate process: {e}", phase=phase) from None
        if reply.nonce != nonce:
            raise CandidateFailed("integrity", "a reply that answers no request of the judge's: candidate code "
                                  "wrote to the judge's channel", phase=phase)
        if not reply.ok:
            status = reply.status or "runtime-error"
            if status not in (LOAD_FAILURES if expect == "loaded" else FAILURES):
                raise CandidateFailed("integrity", f"the candidate process answered status '{status}'"[:120] +
                                      ", which only the judge gives: candidate code wrote to its channel", phase=phase)
            raise CandidateFailed(status, reply.message, reply, phase)
        if expect and reply.op != expect:
            raise CandidateFailed("crash", f"expected '{expect}' from the candidate process, got '{reply.op}'")
        return reply

    def call(self, msg: dict, timeout: float, phase: str, expect: str = "done", fds=()) -> tuple[Reply, float]:
        """Thaw, hand over, wait, freeze. Returns the reply and the witness time in ms, which ends once every
        thread has stopped: a thread still in a syscall that SIGSTOP cannot interrupt (a long read into an
        output buffer) is stopped only on its way out, and that time is the candidate's too. On the CPU it also
        counts the process's CPU time from frozen to frozen (busy_ms): a second witness that noise cannot blur."""
        before = cpu_ns(self.pid) if self.device == "cpu" else None
        msg = dict(msg, nonce=secrets.randbits(62) + 1)
        self.thaw()
        t0 = time.perf_counter_ns()
        try:
            self.chan.send(msg, fds)
        except OSError:
            raise self.died(phase) from None
        try:
            reply = self.recv(timeout, expect, phase, msg["nonce"])
        finally:
            t_reply = time.perf_counter_ns()
            self.freeze()
            t1 = time.perf_counter_ns()
            self.freeze_ms = (t1 - t_reply) / 1e6       # (batch_diag; a late judge: sides.RETIME_MS)
            self.busy_ms = busy_ms(before, cpu_ns(self.pid)) if before else None
        self.nothing_more(phase)
        return reply, (t1 - t0) / 1e6

    def nothing_more(self, phase: str) -> None:
        """Frozen, the process can add nothing to its channel: bytes there beyond the reply were written by
        candidate code (a reply queued for the next request would end that request's witness at once)."""
        if self.exit_status is None and select.select([self.chan.sock], [], [], 0)[0]:
            try:
                extra = self.chan.sock.recv(1, socket.MSG_PEEK | socket.MSG_DONTWAIT)
            except OSError:
                return
            if extra:
                raise CandidateFailed("integrity", "more on the judge's channel than the reply: candidate code "
                                      "wrote to it", phase=phase)

    def call_sampled(self, msg: dict, timeout: float, phase: str, own_root: str) -> tuple[Reply, Sampler]:
        """call(), with this process sampling where the candidate's threads run meanwhile (judge/sampler.py);
        SamplingFailed if it cannot attach (nothing was sent then)."""
        msg = dict(msg, nonce=secrets.randbits(62) + 1)
        self.thaw()
        deadline = time.perf_counter() + timeout
        try:
            with Sampler(self.pid, own_root, self.code0) as sampler:
                try:
                    self.chan.send(msg)
                except OSError:
                    raise self.died(phase) from None
                sampler.sample_until(self.chan.sock.fileno(), deadline)
        except SamplingFailed:
            self.freeze()
            raise
        if sampler.exit_status is not None:      # (reaped while attached)
            self.exit_status = sampler.exit_status
        try:
            reply = self.recv(max(0.0, deadline - time.perf_counter()) + 1.0, "done", phase, msg["nonce"])
        finally:
            self.freeze()
        self.nothing_more(phase)
        return reply, sampler
