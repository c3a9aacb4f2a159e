"""The child process: one job in (a JSON spec file), one Result out (a JSON file), nothing shared.

    python -m kernelbench_cli.worker SPEC.json RESULT.json

Mode "build" imports the candidate (which compiles its extensions) and stops. Mode "run" also loads the
problem, checks correctness and times. The result file is rewritten after every phase, so if the process
dies later (segfault, timeout kill) the parent still has everything measured up to that point.
"""
from __future__ import annotations

import faulthandler
import json
import os
import sys
import time
import traceback
from pathlib import Path

import torch

from . import integrity, roofline
from . import results as R
from .config import config_from_dict
from .environment import Nvml, environment
from .correctness import (DTYPES, Flags, construct, degenerate_reason, make_inputs, maybe_flag, recheck_timed_inputs,
                          run_trials, share_weights, tf32_off)
from .loading import BuildFailed, BuildInterceptor, import_file
from .results import BuildInfo, Result
from .timing import measure

LOG_TAIL = 4000     # characters of compiler output kept in the result


def one_line(e: BaseException) -> str:
    text = str(e).strip().splitlines()
    return f"{type(e).__name__}: {text[0] if text else ''}"[:300]


def failure_status(e: BaseException) -> str:
    return R.CUDA_ERROR if "CUDA error" in str(e) or type(e).__name__ == "AcceleratorError" else R.RUNTIME_ERROR


def problem_tolerance(problem, cfg) -> float:
    """A problem's TOLERANCE (a number, or a dict by dtype name) beats the config's per-dtype default."""
    tol = getattr(problem, "TOLERANCE", None)
    if isinstance(tol, dict):
        tol = tol.get(cfg.dtype)
    return float(tol) if tol is not None else float(cfg.tolerances.get(cfg.dtype, 1e-4))


class Job:
    def __init__(self, spec: dict, out_path: Path):
        self.spec = spec
        self.out_path = out_path
        self.cfg = config_from_dict(spec["config"])
        self.device = spec["device"]
        self.result = Result(problem=spec["problem_key"], candidate=spec["candidate_name"],
                             candidate_path=spec["candidate_path"], device=self.device, dtype=self.cfg.dtype)

    def save(self, phase: str | None = None) -> None:
        if phase:
            self.result.phase = phase
        tmp = self.out_path.with_suffix(".tmp")
        tmp.write_text(self.result.to_json())
        os.replace(tmp, self.out_path)

    def fail(self, status: str, message: str) -> None:
        self.result.status, self.result.message = status, message

    def run(self) -> None:
        if self.spec["mode"] == "lint":
            return self.lint()
        if self.spec["mode"] == "calibrate":
            return self.calibrate()
        self.save("build")
        candidate = self.import_candidate()
        if candidate is None:
            return
        if self.spec["mode"] == "build":
            self.result.status = R.OK
            return
        self.result.env = environment(self.device)
        self.save("load")
        try:
            problem = import_file(self.spec["problem_path"], "kbench_problem")
            dtype = DTYPES[self.cfg.dtype]
            ref = construct(problem.Model, problem.get_init_inputs(), self.device, dtype, self.cfg.seed)
        except Exception as e:
            traceback.print_exc()
            return self.fail(R.PROBLEM_ERROR, f"{self.spec['problem_path']}: reference failed to build: {one_line(e)}")
        try:
            cand = construct(candidate.ModelNew, problem.get_init_inputs(), self.device, dtype, self.cfg.seed)
        except Exception as e:
            traceback.print_exc()
            status = R.BAD_CONSTRUCTOR if isinstance(e, TypeError) else failure_status(e)
            return self.fail(status, f"ModelNew(*get_init_inputs()) raised {one_line(e)}; ModelNew must take "
                                     "the same constructor arguments as Model")
        weights = share_weights(ref, cand)
        self.save("correctness")
        calls = lambda: sum(self.interceptor.calls.values())   # noqa: E731
        tolerance = problem_tolerance(problem, self.cfg)
        flags = Flags(integrity.static_flags(Path(self.spec["candidate_path"]).read_text(), self.spec["candidate_path"]))
        try:
            self.result.correctness, runtime_flags = run_trials(problem, ref, cand, weights, self.cfg, self.device,
                                                                dtype, tolerance, calls)
        except Exception as e:
            traceback.print_exc()
            return self.fail(failure_status(e), f"forward raised {one_line(e)}")
        for f in runtime_flags:
            flags.add(f)
        flags.add(integrity.check_timer_identity(self.timer_snapshot))
        if self.spec.get("aa_calibration"):   # calibrate-noise: the candidate IS the reference, by design
            flags[:] = [f for f in flags if f.name != "no-custom-kernel"]
        self.result.flags = flags
        c = self.result.correctness
        if c.passed < c.trials:   # an output the checks rejected outright is an integrity verdict, not a miss
            if any(f.name == "bad-output" for f in flags):
                return self.set_status_from_flags()
            return self.fail(R.INCORRECT, c.detail)
        self.set_status_from_flags()
        self.save("timing")
        try:
            self.time_and_recheck(problem, ref, cand, dtype, tolerance, flags)
        except Exception as e:
            traceback.print_exc()
            return self.fail(failure_status(e), f"forward raised while timing: {one_line(e)}")
        self.set_status_from_flags()

    def time_and_recheck(self, problem, ref, cand, dtype, tolerance, flags: Flags) -> None:
        cfg, device = self.cfg, self.device
        input_sets = [make_inputs(problem, cfg.seed + 1000 + i, device, dtype) for i in range(cfg.timing.input_sets)]
        ceilings = roofline.load_ceilings(cfg.paths.ceilings, device)
        nvml = Nvml.open() if device == "cuda" else None
        if nvml:
            self.result.env["gpu_before"] = nvml.state()
        with torch.no_grad(), tf32_off():
            if ceilings:
                work = roofline.count(ref, input_sets[0], ref(*input_sets[0]))
                self.result.roofline = roofline.floor(work, ceilings, cfg.dtype)
            t = measure(ref, cand, input_sets, cfg.timing, device, throttled=nvml.throttled if nvml else None)
        self.result.timing = t
        floor_ms = self.result.roofline.get("floor_ms")
        if floor_ms:
            self.result.roofline["sol"] = floor_ms / t.cand_ms
        flags.add(integrity.check_timer_identity(self.timer_snapshot))
        flags.add(maybe_flag("cached-result", recheck_timed_inputs(problem, ref, cand, input_sets, cfg.seed + 2000,
                                                                   device, dtype, tolerance)))
        if device == "cuda":
            flags.add(integrity.check_side_stream(t.cand_host_ms, t.cand_ms, t.ref_host_ms, t.ref_ms))
            names = {k for ext in self.result.build.extensions for k in ext.get("kernels", [])}
            if names:
                with torch.no_grad():
                    share, top = integrity.custom_kernel_share(cand, input_sets[0], names)
                self.result.custom_share = share
                if share is not None and share < integrity.LIBRARY_SHARE_WARN:
                    flags.add(integrity.flag("library-heavy", f"{share:.0%} of GPU time in the candidate's own "
                                                              f"kernels; top: {top}"))
        flags.add(integrity.check_suspicious_speed(t.speedup, floor_ms, t.cand_ms))
        if "compile" in cfg.baselines:    # last: torch.compile patches torch internals the checks above compare
            self.result.baselines["compile"] = self.time_against_compile(ref, cand, input_sets, nvml)
        if nvml:
            self.result.env["gpu_after"] = nvml.state()

    def time_against_compile(self, ref, cand, input_sets, nvml) -> dict:
        """torch.compile of the reference as a second baseline; its compile time is reported, not timed."""
        start = time.perf_counter()
        compiled = torch.compile(ref)
        with torch.no_grad(), tf32_off():
            compiled(*input_sets[0])
            if self.device == "cuda":
                torch.cuda.synchronize()
            compile_s = time.perf_counter() - start
            t = measure(compiled, cand, input_sets, self.cfg.timing, self.device,
                        throttled=nvml.throttled if nvml else None)
        return {"compile_s": round(compile_s, 2), "ref_ms": t.ref_ms, "cand_ms": t.cand_ms, "speedup": t.speedup,
                "ci_low": t.ci_low, "ci_high": t.ci_high, "rounds": t.rounds}

    def set_status_from_flags(self) -> None:
        errors = [f for f in self.result.flags if f.severity == "error"]
        self.result.status = R.INTEGRITY if errors else R.OK
        self.result.message = "; ".join(f"{f.name}: {f.detail}" for f in errors)

    def calibrate(self) -> None:
        """Measure this device's ceilings once and cache them for every later job's roofline."""
        self.result.env = environment(self.device)
        self.save("timing")
        ceilings = roofline.calibrate(self.device)
        path = roofline.ceilings_path(self.cfg.paths.ceilings, self.device)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(ceilings, indent=2))
        self.result.roofline = ceilings
        self.result.message = str(path)
        self.result.status = R.OK

    def lint(self) -> None:
        """Problem only: would zeros, a constant, or an input-independent answer pass its tolerance?"""
        self.result.env = environment(self.device)
        self.save("load")
        try:
            problem = import_file(self.spec["problem_path"], "kbench_problem")
            dtype = DTYPES[self.cfg.dtype]
            ref = construct(problem.Model, problem.get_init_inputs(), self.device, dtype, self.cfg.seed)
            outs = []
            for trial in range(2):
                with torch.no_grad(), tf32_off():
                    outs.append(ref(*make_inputs(problem, self.cfg.seed + 1 + trial, self.device, dtype)))
        except Exception as e:
            traceback.print_exc()
            return self.fail(R.PROBLEM_ERROR, f"{self.spec['problem_path']}: reference failed: {one_line(e)}")
        self.result.flags = [f for f in [maybe_flag("degenerate-problem",
                                                    degenerate_reason(outs, problem_tolerance(problem, self.cfg)))] if f]
        self.result.status = R.OK
        self.result.message = "; ".join(f.detail for f in self.result.flags)

    def import_candidate(self):
        """Import the candidate with load_inline intercepted; None (and a failed result) if it cannot be."""
        self.timer_snapshot = integrity.timing_functions()   # before any candidate code runs
        self.interceptor = BuildInterceptor(self.spec["cache_dir"], self.cfg.build.verbose)
        self.interceptor.install()
        start = time.perf_counter()
        module, error = None, None
        try:
            module = import_file(self.spec["candidate_path"], "kbench_candidate")
        except BuildFailed as e:
            error = e
        except Exception as e:
            traceback.print_exc()
            error = e
        exts = self.interceptor.extensions
        build = BuildInfo(extensions=exts, seconds=round(time.perf_counter() - start, 3))
        build.status = ("failed" if self.interceptor.failure else "none" if not exts
                        else "cached" if all(x["cached"] for x in exts) else "built")
        if self.interceptor.failure:
            build.log = self.interceptor.failure[-LOG_TAIL:]
            print(self.interceptor.failure, file=sys.stderr)
        self.result.build = build
        if self.interceptor.failure:   # even if the candidate caught the exception and fell back
            self.fail(R.COMPILE_ERROR, f"extension '{exts[-1]['name']}' failed to build (compiler output in the log)")
            return None
        if error is not None:
            self.fail(R.IMPORT_ERROR, f"importing the candidate raised {one_line(error)}")
            return None
        if not hasattr(module, "ModelNew"):
            self.fail(R.MISSING_MODELNEW, "the candidate defines no ModelNew; add class ModelNew(nn.Module)")
            return None
        return module


def main(argv: list[str]) -> int:
    faulthandler.enable()          # a segfault prints the Python stack to the log before the process dies
    spec_path, out_path = Path(argv[0]), Path(argv[1])
    job = Job(json.loads(spec_path.read_text()), out_path)
    start = time.perf_counter()
    try:
        job.run()
        if job.result.status != R.CRASH:
            job.result.phase = "done"
    finally:
        job.result.wall_s = round(time.perf_counter() - start, 3)
        job.save()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
