"""What the reference process holds for one problem, computed once and shared by every candidate of it:
the problem module, the reference model and its weights, secret seeds, the trial inputs with their
reference outputs and float64 oracles, the timing input pool, and the torch.compile baseline."""
from __future__ import annotations

import json
import random
import secrets
import time

import torch

from .. import stats, trace
from ..candidate.loading import import_file
from ..channel import SharedTensors
from ..correctness import (CLASS_RANK, DTYPES, AtLevel, construct, make_inputs, oracle_outputs,
                           reduced_precision_errors, rel_l2, tensors, tf32_off)
from ..results import Timing
from ..timing import measure
from .flush import Flush
from .sides import InputFeed, LocalSide


def wipe(t: torch.Tensor) -> None:
    """Every byte of `t`'s storage set to 0xff (NaN in every float type, -1 in integers)."""
    raw = torch.empty(0, dtype=torch.uint8, device=t.device)
    raw.set_(t.untyped_storage())
    raw.fill_(0xFF)


class ProblemFailed(Exception):
    """The reference itself could not be loaded or run: every job of the problem is a problem-error."""


def problem_tolerance(problem, cfg) -> float:
    """A problem's TOLERANCE (a number, or a dict by dtype name) beats the config's per-dtype default."""
    tol = getattr(problem, "TOLERANCE", None)
    if isinstance(tol, dict):
        tol = tol.get(cfg.dtype)
    return float(tol) if tol is not None else float(cfg.tolerances.get(cfg.dtype, 1e-4))


def draw_seeds(cfg) -> dict:
    """Secret per-run seeds, unless the config names one (replay): recorded in every result."""
    if cfg.seed is not None:
        base = int(cfg.seed)
        return {"source": "config", "init": base, "trials": base + 1, "timing": base + 1000, "variants": base + 2000}
    return {"source": "secret", "init": secrets.randbits(31), "trials": secrets.randbits(31),
            "timing": secrets.randbits(31), "variants": secrets.randbits(31)}


class Trial:
    def __init__(self, inputs, ref_out, oracle, levels=None, level_outs=None):
        self.inputs, self.ref_out, self.oracle = inputs, ref_out, oracle
        self.levels: dict = levels or {}      # the reference's own error at reduced precisions (float32 runs)
        self.level_outs: dict = level_outs or {}    # its outputs at the levels that cost about what fp32 does


class Reference:
    def __init__(self, problem_path: str, cfg, device: str):
        self.cfg, self.device, self.path = cfg, device, problem_path
        self.dtype = DTYPES[cfg.dtype]
        self.seeds = draw_seeds(cfg)
        self.phases: dict = {}
        try:
            self.problem = import_file(problem_path, "kbench_problem")
            self.init_args = list(self.problem.get_init_inputs())
            json.dumps(self.init_args)
        except TypeError as e:
            raise ProblemFailed(f"{problem_path}: get_init_inputs() must return plain numbers/strings/lists "
                                f"(they are sent to the candidate process): {e}") from None
        except Exception as e:
            raise ProblemFailed(f"{problem_path}: reference failed to build: {type(e).__name__}: {e}") from None
        try:
            self.model = construct(self.problem.Model, self.init_args, device, self.dtype, self.seeds["init"])
        except Exception as e:
            raise ProblemFailed(f"{problem_path}: reference failed to build: {type(e).__name__}: {e}") from None
        self.tolerance = problem_tolerance(self.problem, cfg)
        self.precision_allowed = str(getattr(self.problem, "PRECISION_ALLOWED", cfg.precision_allowed))
        self.custom_share = getattr(self.problem, "CUSTOM_SHARE", cfg.custom_share)
        if self.precision_allowed not in CLASS_RANK or self.precision_allowed in ("", "below-bf16"):
            raise ProblemFailed(f"{problem_path}: PRECISION_ALLOWED = {self.precision_allowed!r}; use one of "
                                "fp32, tf32, fp16, bf16")
        if not isinstance(self.custom_share, (int, float)) or not 0 <= self.custom_share <= 1:
            raise ProblemFailed(f"{problem_path}: CUSTOM_SHARE = {self.custom_share!r}; use a number from 0 to 1")
        self._trials: list[Trial] | None = None
        self._pool = None
        self._variants_made: list | None = None
        self._variants: dict[str, dict] = {}
        self._compiled = None
        self._low_copies: dict = {}      # half copies of the model: the fingerprint's and the variants'
        self._shared: dict = {}          # CUDA: the buffers candidate processes map, one set per problem (slots)

    def slots(self, key, templates: list, room: int = 1) -> SharedTensors:
        """Buffers a candidate process maps (channel.SharedTensors), shaped like `templates`. CUDA: one set per
        problem and key, shared by every job of it, its whole storage wiped (all bits set: NaN in floats) before
        each later job. Torch's CUDA IPC keeps memory it shared until every process that mapped it lets go,
        which a killed candidate process never does, so buffers made per job were never freed: the judge of
        L2/56 on the 80 GB H100 grew by 9.2 GiB a job and an honest candidate ran out of memory at its fourth
        (session 22). The last job's candidate process is dead before the next one maps them, and the wipe
        leaves nothing it wrote. CPU: new ones per job (memfds, freed with it)."""
        if self.device != "cuda":
            return SharedTensors(templates, self.device, room)
        sig = (key, room, tuple((tuple(t.shape), tuple(t.stride()), t.dtype) for t in templates))
        held = self._shared.get(sig)
        if held is None:
            held = self._shared[sig] = SharedTensors(templates, self.device, room)
        else:
            for t in held.tensors:
                wipe(t)
        return held

    def inputs(self, seed: int) -> list:
        return make_inputs(self.problem, seed, self.device, self.dtype)

    def run(self, inputs):
        with torch.no_grad(), tf32_off():
            out = self.model(*inputs)
        if self.device == "cuda":
            torch.cuda.synchronize()
        return out

    def trials(self) -> list[Trial]:
        """Inputs, reference output and float64 oracle of every trial: once per problem and seed."""
        if self._trials is None:
            start = time.perf_counter()
            trials, spent = [], {"inputs": 0.0, "reference": 0.0, "oracle": 0.0, "reduced": 0.0}

            def step(name, fn, *args):
                t0 = time.perf_counter()
                value = fn(*args)
                spent[name] += time.perf_counter() - t0
                return value
            for i in range(self.cfg.trials):
                try:
                    inputs = step("inputs", self.inputs, self.seeds["trials"] + i)
                    out = step("reference", self.run, inputs)
                    oracle = step("oracle", oracle_outputs, self.model, inputs, out)
                    near: dict = {}
                    levels = step("reduced", reduced_precision_errors, self.model, inputs, oracle, self.device,
                                  self._low_copies, near, rel_l2(out, oracle)) \
                        if oracle is not None and self.dtype == torch.float32 else {}
                except Exception as e:
                    raise ProblemFailed(f"{self.path}: reference forward failed: {type(e).__name__}: {e}") from None
                trials.append(Trial(inputs, out, oracle, levels, near))
            self._trials = trials
            oracle_s = spent["oracle"] + spent["reduced"]
            self.phases = {"reference_s": round(time.perf_counter() - start - oracle_s, 3),
                           "oracle_s": round(oracle_s, 3)}
            trace.mark("judge", f"{len(trials)} trials: " + ", ".join(f"{k} {v:.3f} s" for k, v in spent.items()))
        return self._trials

    def variants(self) -> list:
        """The generalisation trials' inputs and reference outputs (judge/generalise.py): once per problem."""
        if self._variants_made is None:
            from .generalise import make_variants
            t0 = time.perf_counter()
            self._variants_made = make_variants(self, self.seeds["variants"])
            self.phases["variants_s"] = round(time.perf_counter() - t0, 3)
            trace.mark("judge", f"{len(self._variants_made)} variants ready")
        return self._variants_made

    def output_templates(self) -> list:
        return tensors(self.trials()[0].ref_out)

    def prepare(self) -> None:
        """Everything of the problem that no candidate changes, before the first job asks: trial inputs,
        reference outputs, oracles, the timing pool."""
        self.trials()
        self.variants()
        self.feed(random.Random(0))
        trace.mark("judge", "timing pool ready")

    def feed(self, rng: random.Random) -> InputFeed:
        if self._pool is None:
            self._pool = [self.inputs(self.seeds["timing"] + i) for i in range(max(1, self.cfg.timing.input_sets))]
        return InputFeed(self._pool, rng)

    def variant(self, name: str, flush: Flush, throttled) -> dict:
        """The reference against a variant of itself, timed once per problem: "compile" (torch.compile) or a
        reduced precision ("tf32", "fp16", "bf16": correctness.AtLevel). Per job, the speedup over the variant
        is the job's speedup over eager divided by this eager/variant ratio (CI: stats.bootstrap_ratio_ci)."""
        if name not in self._variants:
            start = time.perf_counter()
            template = self.trials()[0].inputs
            if name == "compile":
                fn = self.compiled(template)
            else:
                fn = AtLevel(self.model, name, self._low_copies)
                self.call_once(fn, template)
            with torch.no_grad(), tf32_off():
                ready_s = time.perf_counter() - start
                rng = random.Random(self.seeds["timing"] ^ 0x5EED)
                eager = LocalSide(self.model, self.feed(rng), template, self.device, flush)
                other = LocalSide(fn, self.feed(rng), template, self.device, flush)
                t: Timing = measure(eager, other, self.cfg.timing, throttled)
            self._variants[name] = {"ready_s": round(ready_s, 2), "ref_ms": t.cand_ms, "eager_ms": t.ref_ms,
                                    "ratios": [a / b for a, b in zip(t.ref_rounds_ms, t.cand_rounds_ms)],
                                    "seconds": round(time.perf_counter() - start, 2)}
        return self._variants[name]

    def call_once(self, fn, inputs) -> None:
        with torch.no_grad(), tf32_off():
            fn(*inputs)
        if self.device == "cuda":
            torch.cuda.synchronize()

    def compiled(self, template):
        """torch.compile of the reference, compiled and called once on inputs shaped like the trials' (what
        Inductor's cache is keyed on, with the model, grad mode and TF32 flags): by the "compile" variant, and
        by `kbench build --baselines compile` into the cache beside kbench's builds, so that a bench of cached
        builds does not compile the baseline from scratch either."""
        if self._compiled is None:
            fn = torch.compile(self.model)
            self.call_once(fn, template)
            self._compiled = fn
        return self._compiled

    def versus(self, name: str, timing: Timing, flush: Flush, throttled) -> dict:
        base = self.variant(name, flush, throttled)
        ratios = [a / b for a, b in zip(timing.ref_rounds_ms, timing.cand_rounds_ms)]
        lo, hi = stats.bootstrap_ratio_ci(ratios, base["ratios"], self.cfg.timing.bootstrap)
        out = {"ref_ms": base["ref_ms"], "cand_ms": timing.cand_ms, "speedup": timing.speedup / stats.geomean(base["ratios"]),
               "ci_low": lo, "ci_high": hi, "rounds": len(base["ratios"])}
        if name == "compile":
            out["compile_s"] = base["ready_s"]
            out["loop_s"] = round(base["seconds"] - base["ready_s"], 2)    # its timing rounds: timing, not harness
        else:
            out["precision"] = name
        return out
