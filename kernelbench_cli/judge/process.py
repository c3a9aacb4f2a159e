"""The reference process (trusted): one per (problem, device slot), serving every candidate of the problem.

    python -m kernelbench_cli.judge      (fd $KBENCH_FD: the socket to the parent)

First message: {"op": "problem", problem_path, problem_key, device, config, logs, mode}. mode "serve" then
answers {"op": "job", ...} messages with {"op": "result", "result": {...}} until {"op": "quit"}; "lint" and
"calibrate" answer once. A spare candidate process is always warming up (torch imported, device up) while
a job runs, so the next job starts warm. Never imports candidate code; refuses to be traced or read by
its children (sandbox.tie_to_parent).
"""
from __future__ import annotations

import faulthandler
import json
import os
import sys
import time
import traceback
from pathlib import Path

from .. import sandbox


def _result(problem_key: str, device: str, dtype: str, **kw):
    from ..results import Result
    return Result(problem=problem_key, candidate=kw.pop("candidate", ""), candidate_path=kw.pop("candidate_path", ""),
                  device=device, dtype=dtype, **kw)


class Judge:
    def __init__(self, chan, spec: dict):
        from ..config import config_from_dict
        self.chan, self.spec = chan, spec
        self.cfg = config_from_dict(spec["config"])
        self.device = spec["device"]
        self.logs = Path(spec["logs"])
        self.spare = None
        self.n = 0

    def failed(self, status: str, message: str, job: dict | None = None, phase: str = "done"):
        job = job or {}
        return _result(self.spec["problem_key"], self.device, self.cfg.dtype, candidate=job.get("candidate_name", ""),
                       candidate_path=job.get("candidate_path", ""), status=status, message=message, phase=phase)

    def quiet_spare(self) -> None:
        """Before a timed phase: the spare has finished warming up and is frozen, so its start-up (torch
        import, device init) never competes with what is being timed."""
        if self.spare is not None:
            try:
                self.spare.wait_ready(self.cfg.timeouts.run_s)
            except Exception:            # a spare that failed to start is replaced at the next job
                self.spare.kill()
                self.spare = None

    def start_spare(self):
        from .handle import CandidateProcess
        self.n += 1
        self.spare = CandidateProcess(self.device, self.logs / f"candidate-{os.getpid()}-{self.n}.log")

    def serve(self) -> None:
        from .. import results as R
        from .handle import CandidateFailed, log_tail
        from .reference import ProblemFailed, Reference
        from .session import Session
        from .sides import DeviceProbe, Flush
        self.start_spare()          # warms up while the reference loads
        ref = error = None
        try:
            ref = Reference(self.spec["problem_path"], self.cfg, self.device)
            probe, flush = DeviceProbe(self.device), Flush(self.device, self.cfg.timing.l2_flush)
        except ProblemFailed as e:
            error = str(e)
        while True:
            msg, _ = self.chan.recv()
            if msg.get("op") != "job":
                break
            job = msg["job"]
            started = time.perf_counter()
            if self.spare is None and error is None:
                self.start_spare()
            cand, self.spare = self.spare, None
            log = self.logs / f"{job['tag']}.log"
            os.replace(cand.log_path, log)
            cand.log_path = log
            if error is None:
                self.start_spare()
            try:
                if error is not None:
                    result = self.failed(R.PROBLEM_ERROR, error, job)
                else:
                    result = Session(job, ref, cand, self.cfg, probe, flush, quiet=self.quiet_spare).run()
            except ProblemFailed as e:
                error = str(e)
                result = self.failed(R.PROBLEM_ERROR, error, job)
            except CandidateFailed as e:
                result = self.failed(e.status, e.message, job)
            except Exception as e:       # a harness bug must not take the batch down: report it on this job
                traceback.print_exc()
                result = self.failed(R.CRASH, f"reference process error: {type(e).__name__}: {e}"[:300], job)
            finally:
                cand.kill()
            result.phases["job_s"] = round(time.perf_counter() - started, 3)
            result.stderr_tail = log_tail(log)
            if result.status not in (R.OK, R.INCORRECT, R.INTEGRITY):
                result.stderr_tail += f"\n(candidate log: {log})"
            self.chan.send({"op": "result", "result": result.to_dict()})
        if self.spare is not None:
            self.spare.kill()

    def lint(self) -> None:
        """Problem only: would zeros, a constant, or an input-independent answer pass its tolerance?"""
        from .. import results as R
        from ..correctness import degenerate_reason, maybe_flag
        from ..environment import environment
        from .reference import ProblemFailed, Reference
        result = self.failed(R.OK, "")
        result.candidate = "(lint)"
        result.env = environment(self.device)
        try:
            ref = Reference(self.spec["problem_path"], self.cfg, self.device)
            outs = [ref.run(ref.inputs(ref.seeds["trials"] + i)) for i in range(2)]
            result.flags = [f for f in [maybe_flag("degenerate-problem", degenerate_reason(outs, ref.tolerance))] if f]
            result.message = "; ".join(f.detail for f in result.flags)
        except (ProblemFailed, Exception) as e:
            traceback.print_exc()
            result.status, result.message = R.PROBLEM_ERROR, str(e) if isinstance(e, ProblemFailed) else \
                f"{self.spec['problem_path']}: reference failed: {type(e).__name__}: {e}"
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


if __name__ == "__main__":
    sys.exit(main())
