"""The reference process (trusted): one per (problem, device slot), serving every candidate of the problem.

    python -m kernelbench_cli.judge      (fd $KBENCH_FD: the socket to the parent)

First message: {"op": "problem", problem_path, problem_key, device, config, logs, mode, hold}; with hold the
process and its first candidate process import torch, then wait for the first job before touching the
device (the parent starts the next problem's judge while the last job of the current one is timed). mode "serve" then
answers {"op": "job", ...} messages with {"op": "result", "result": {...}} until {"op": "quit"}; "lint" and
"calibrate" answer once. Candidate processes for the next jobs warm up (torch imported, device up) while a
job runs, stopped during its timed phases, so the next job starts warm. Never imports candidate code;
refuses to be traced or read by its children (sandbox.tie_to_parent).
"""
from __future__ import annotations

import faulthandler
import json
import os
import sys
import time
import traceback
from pathlib import Path

from .. import cpus, sandbox, trace


# Candidate processes started ahead of the job they will serve, beyond the current one: [CPU, CUDA]. A start
# (torch import, device bring-up) takes ~4-5 s on the H200 host against ~2-3 s of judging a job, and a spare
# is stopped while a job is timed, so three there; on the CPU one (its import takes the cores the untimed
# phases use).
AHEAD = (1, 3)
LINT_CPU_BUDGET_S = 20.0       # lint's forwards on the CPU, estimated; beyond it the problem is skipped, said so


def too_big_for_cpu(problem_path: str, dtype: str, work: str = "lint",
                    instead: str = "lint it with --device cuda") -> str:
    """Why running this problem's forwards on the CPU for `work` would take too long ("" if it would not): a
    GPU-sized problem ran for minutes in silence before."""
    from ..roofline import cpu_seconds
    est, what = cpu_seconds(problem_path, dtype)
    if est <= LINT_CPU_BUDGET_S:
        return ""
    return f"skipped on the CPU: {what} (~{est:.0f} s of {work} here); {instead}"


def prewarm_compile(device: str) -> None:
    """What a first torch.compile pays once per process, paid ahead: the hashes of torch's and Triton's sources
    in every cache key (Triton's: 0.40 s of a 0.96 s cached compile on the H200, scripts/probe_compile.py), and on
    the CPU the vector-ISA probe (subprocesses, ~1.1 s of a 2 s cached compile on the CI box)."""
    from torch._inductor import codecache, cpu_vec_isa
    try:
        codecache.torch_key()
        codecache.triton_key()
        if device == "cpu":
            cpu_vec_isa.pick_vec_isa()
    except Exception:      # (an internal API: if it moved, the first compile pays these, as before)
        pass


def _result(problem_key: str, device: str, dtype: str, **kw):
    from ..results import Result
    return Result(problem=problem_key, candidate=kw.pop("candidate", ""), candidate_path=kw.pop("candidate_path", ""),
                  device=device, dtype=dtype, **kw)


class Judge:
    def __init__(self, chan, spec: dict):
        from ..config import config_from_dict
        from ..candidate.loading import EXPECTED
        self.chan, self.spec = chan, spec
        if spec.get("problem_sha256"):
            EXPECTED[os.path.realpath(spec["problem_path"])] = spec["problem_sha256"]
        self.cfg = config_from_dict(spec["config"])
        self.device = spec["device"]
        self.logs = Path(spec["logs"])
        self.spares: list = []      # candidate processes for the jobs to come, oldest first
        self.paused: list = []      # spares stopped for a timed phase
        self.n = 0
        # Until the problem is loaded this image holds no secret (no seeds, reference or outputs; an allow-listed
        # environment), so candidate processes may be forks of it: torch imported already (forking.py)
        self.pristine = True

    def failed(self, status: str, message: str, job: dict | None = None, phase: str = "done"):
        job = job or {}
        return _result(self.spec["problem_key"], self.device, self.cfg.dtype, candidate=job.get("candidate_name", ""),
                       candidate_path=job.get("candidate_path", ""), status=status, message=message, phase=phase)

    def start_spare(self, hold: bool = False) -> None:
        from .handle import CandidateProcess
        self.n += 1
        self.spares.append(CandidateProcess(self.device, self.logs / f"candidate-{os.getpid()}-{self.n}.log",
                                            hold=hold, fork=self.pristine))

    def keep_spares(self, left: int) -> None:
        """Candidate processes warming up (torch imported, device up) for the next `left` jobs, up to AHEAD:
        they start and bring the device up during this job's untimed phases, frozen while anything is timed."""
        want = min(left, AHEAD[self.device == "cuda"])
        while len(self.spares) > want:
            self.spares.pop().kill()
        while len(self.spares) < want:
            self.start_spare()
        for s in self.spares:
            s.go()

    def pause_spares(self) -> None:
        """Before a timed phase: every spare still starting is stopped (SIGSTOP: none of its threads runs, it
        touches neither the cores nor the device) until resume_spares. A ready one is frozen already."""
        for s in self.spares:
            if not s.ready and s not in self.paused:
                s.freeze()
                self.paused.append(s)
                trace.mark("judge", f"candidate {s.pid}: paused")

    def resume_spares(self) -> None:
        while self.paused:
            s = self.paused.pop()
            s.thaw()
            trace.mark("judge", f"candidate {s.pid}: resumed")

    def serve(self) -> None:
        hold = bool(self.spec.get("hold"))
        from .. import results as R
        from .handle import CandidateFailed, log_tail
        from .reference import ProblemFailed, Reference
        from .session import Session
        from .flush import Flush
        from .sides import DeviceProbe
        trace.mark("judge", "imported")
        # torch imported, nothing secret here yet: the candidate processes are forks of this image, and bring
        # the device up while the problem loads. A held judge forks them all now too (beside another problem's
        # timed job, held: they touch neither the device nor the cores until released): spawned at its first
        # job instead, its second job waited ~1.5 s for one (the H200 suite, session 16).
        for _ in range(1 + min(int(self.spec.get("jobs", 1)) - 1, AHEAD[self.device == "cuda"])):
            self.start_spare(hold)
        if "compile" in self.cfg.baselines:
            # dynamo and inductor: ~1 s of the torch.compile baseline's compile even from Inductor's cache (CPU box:
            # 2.8-3.7 s -> 1.9-2.4 s), imported while the candidate processes start (a held judge: beside another
            # problem's job), not on the first job's path. No thread, no CUDA context: later forks stay possible
            # (forking.forkable checks each).
            import importlib
            for name in ("torch._dynamo", "torch._inductor.compile_fx"):
                importlib.import_module(name)
            prewarm_compile(self.device)
            trace.mark("judge", "dynamo and inductor imported")
        first = None
        if hold:     # started ahead of its turn (torch imported): the device is another job's until a job comes
            first, _ = self.chan.recv()
            trace.mark("judge", "released")
            if first.get("op") != "job":
                self.kill_spares()
                return
            for s in self.spares:
                s.go()
        from ..backends import interpreted
        from ..roofline import too_big_to_interpret
        ref = error = dead = probe = flush = None
        too_big = too_big_to_interpret(self.spec["problem_path"], self.cfg.dtype) if self.device == "cpu" else ""

        def load():
            nonlocal ref, error, probe, flush
            self.pristine = False       # from here on it holds secrets: no more forks of it
            try:
                ref = Reference(self.spec["problem_path"], self.cfg, self.device)
                trace.mark("judge", "reference built")
                ref.prepare()           # trials, oracle, timing pool: while the candidate process warms up
                if self.device == "cpu":
                    import torch
                    cpus.pin_pool(torch)    # as its candidates' threads are (cpus.py)
                trace.mark("judge", "problem loaded")
                probe, flush = DeviceProbe(self.device), Flush(self.device, self.cfg.timing.l2_flush)
            except ProblemFailed as e:
                error = str(e)
            self.release_cache()
        if not too_big:
            load()                  # else only once a job needs it: the skipped ones do not
        while True:
            msg, first = first or self.chan.recv()[0], None
            if msg.get("op") != "job":
                break
            job = msg["job"]
            trace.mark("judge", f"job {job['tag']}: received")
            if too_big and interpreted(job["backend"], self.device):
                self.chan.send({"op": "result", "result": self.failed(R.SKIPPED, too_big, job).to_dict()})
                continue
            if ref is None and error is None:
                load()
            if error is not None:        # the problem itself failed: every job of it says so
                self.kill_spares()
                self.chan.send({"op": "result", "result": self.failed(R.PROBLEM_ERROR, error, job).to_dict()})
                continue
            started = time.perf_counter()
            if dead is not None:        # the last job's candidate: gone, but its teardown must end first
                dead.reap()
                dead = None
            if not self.spares:
                self.start_spare()
            cand = self.spares.pop(0)
            log = self.logs / f"{job['tag']}.log"
            os.replace(cand.log_path, log)
            cand.log_path = log
            self.keep_spares(int(msg.get("left", 0)))
            try:
                result = Session(job, ref, cand, self.cfg, probe, flush, quiet=self.pause_spares,
                                 resume=self.resume_spares).run()
            except ProblemFailed as e:
                error = str(e)
                result = self.failed(R.PROBLEM_ERROR, error, job)
            except CandidateFailed as e:
                result = self.failed(e.status, e.message, job)
            except Exception as e:       # a harness bug must not take the batch down: report it on this job
                traceback.print_exc()
                result = self.failed(R.CRASH, f"reference process error: {type(e).__name__}: {e}"[:300], job)
            finally:
                cand.kill(wait=False)   # signalled: its log is final; the result need not wait for its teardown
                dead = cand
                trace.mark("judge", "candidate killed")
                self.resume_spares()
                self.release_cache()
            result.phases["job_s"] = round(time.perf_counter() - started, 3)
            result.stderr_tail = log_tail(log)
            if result.status not in (R.OK, R.INCORRECT, R.INTEGRITY):
                result.stderr_tail += f"\n(candidate log: {log})"
            self.chan.send({"op": "result", "result": result.to_dict()})
            trace.mark("judge", f"job {job['tag']}: result sent")
        if dead is not None:
            dead.reap()
        self.kill_spares()

    def release_cache(self) -> None:
        """Give the device memory this process's allocator keeps cached (freed blocks: the fp64 oracle's model
        copy, the last job's lanes) back to the driver, where the candidate process can have it. On an 80 GB
        H100 the judge of L2/56 held 61 GiB after its problem load, most of it cached, and an honest
        candidate's ablation then ran out of memory (session 22); the 141 GB H200 had hidden it."""
        if self.device == "cuda":
            import torch
            before = torch.cuda.memory_reserved()
            torch.cuda.empty_cache()
            trace.mark("judge", f"device cache returned: {before / 2**30:.1f} -> "
                                f"{torch.cuda.memory_reserved() / 2**30:.1f} GiB reserved")

    def kill_spares(self) -> None:
        self.resume_spares()
        while self.spares:
            self.spares.pop().kill()

    def lint(self) -> None:
        """Problem only: would zeros, a constant, or an input-independent answer pass its tolerance?"""
        from .. import results as R
        from ..correctness import degenerate_reason, maybe_flag
        from .generalise import trivial_inputs_reason
        from ..environment import environment
        from .reference import ProblemFailed, Reference
        result = self.failed(R.OK, "")
        result.candidate = "(lint)"
        result.env = environment(self.device)
        too_big = self.device == "cpu" and too_big_for_cpu(self.spec["problem_path"], self.cfg.dtype)
        if too_big:
            result.phase, result.message = "skipped", too_big
            self.chan.send({"op": "result", "result": result.to_dict()})
            return
        try:
            ref = Reference(self.spec["problem_path"], self.cfg, self.device)
            outs = [ref.run(ref.inputs(ref.seeds["trials"] + i)) for i in range(2)]
            result.flags = [f for f in [maybe_flag("degenerate-problem", degenerate_reason(outs, ref.tolerance)),
                                        maybe_flag("trivial-inputs", trivial_inputs_reason(ref))] if f]
            result.message = "; ".join(f.detail for f in result.flags)
        except (ProblemFailed, Exception) as e:
            traceback.print_exc()
            result.status, result.message = R.PROBLEM_ERROR, str(e) if isinstance(e, ProblemFailed) else \
                f"{self.spec['problem_path']}: reference failed: {type(e).__name__}: {e}"
        self.chan.send({"op": "result", "result": result.to_dict()})

    def precompile(self) -> None:
        """The problem's torch.compile baseline compiled once, into Inductor's cache (reference_env), timing
        nothing: `kbench build --baselines compile`, so a later bench finds the baseline built as it finds the
        candidates."""
        from .. import results as R
        from .reference import ProblemFailed, Reference
        result = self.failed(R.OK, "")
        result.candidate = "(torch.compile)"
        too_big = self.device == "cpu" and too_big_for_cpu(self.spec["problem_path"], self.cfg.dtype, "compiling",
                                                            "its bench compiles it instead")
        if too_big:
            result.phase, result.message = "skipped", too_big
            self.chan.send({"op": "result", "result": result.to_dict()})
            return
        start = time.perf_counter()
        try:
            ref = Reference(self.spec["problem_path"], self.cfg, self.device)
            ref.compiled(ref.inputs(ref.seeds["trials"]))
        except (ProblemFailed, Exception) as e:
            traceback.print_exc()
            result.status, result.message = R.PROBLEM_ERROR, str(e) if isinstance(e, ProblemFailed) else \
                f"{self.spec['problem_path']}: torch.compile of the reference failed: {type(e).__name__}: {e}"[:400]
        result.phases["compile_s"] = round(time.perf_counter() - start, 3)
        self.chan.send({"op": "result", "result": result.to_dict()})

    def calibrate(self) -> None:
        """Measure this device's ceilings once and cache them for every later job's roofline."""
        from .. import results as R
        from .. import roofline
        from ..environment import environment
        result = self.failed(R.OK, "")
        result.candidate = "(calibrate)"
        result.env = environment(self.device)
        ceilings = roofline.calibrate(self.device)
        path = roofline.ceilings_path(self.cfg.paths.ceilings, self.device)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(ceilings, indent=2))
        result.roofline, result.message = ceilings, str(path)
        self.chan.send({"op": "result", "result": result.to_dict()})


def main() -> int:
    trace.mark("judge", "python up")
    sandbox.set_name("kbench-judge")
    cpus.take_slot()
    sandbox.tie_to_parent(int(os.environ.get("KBENCH_PARENT_PID", "0")) or None)
    faulthandler.enable()
    from ..channel import Channel, ChannelClosed
    chan = Channel.from_fd(int(os.environ["KBENCH_FD"]))
    try:
        msg, _ = chan.recv()
        judge = Judge(chan, msg)
        getattr(judge, msg.get("mode", "serve"))()
    except ChannelClosed:      # the parent went away: so do we (and, by their parent-death signal, our children)
        return 1
    return 0


def exit_now(code: int) -> None:
    """Leave without the interpreter's teardown (torch's takes ~0.5 s): the children are gone, and the log is
    unbuffered, so nothing is left to flush but the standard streams."""
    trace.mark("judge", "exit")
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


if __name__ == "__main__":
    exit_now(main())
