"""One job in the reference process: hand a warm candidate process its buffers, run the correctness
trials, time it against the reference with a witness on every call, decide the verdict.

Everything the verdict rests on is here, in a process that never imports candidate code: the inputs
(secret seeds), the reference outputs and oracle, the comparison, the clock of the reference, the
witness clock of the candidate, the thread and device observations, and the flags.
"""
from __future__ import annotations

import dataclasses
import random
import secrets
import time

import torch

from .. import backends, integrity, trace
from .. import results as R
from ..channel import from_message, read_process_memory
from ..correctness import (CLASS_RANK, Flags, check_inputs_unchanged, clone, judge, level_fingerprint, maybe_flag,
                           precision_class, precision_flag, rel_l2, synchronize, tensors, tf32_off)
from ..environment import Nvml, environment
from ..layouts import ROOM
from ..results import BuildInfo, Correctness, Result
from ..timing import measure
from .handle import CandidateFailed, CandidateProcess
from . import evidence, generalise, handover
from .reference import Reference
from .flush import Flush
from .sides import DeviceProbe, LocalSide, RemoteSide, calls_per_batch


class Session:
    def __init__(self, job: dict, ref: Reference, cand: CandidateProcess, cfg, probe: DeviceProbe, flush: Flush,
                 quiet=lambda: None, resume=lambda: None):
        self.job, self.ref, self.cand, self.cfg, self.probe, self.flush = job, ref, cand, cfg, probe, flush
        self.quiet = quiet          # called before a timed phase: nothing else of ours may run meanwhile ...
        self.resume = resume        # ... until this is called at its end
        self.device = ref.device
        self.result = Result(problem=job["problem_key"], candidate=job["candidate_name"],
                             candidate_path=job["candidate_path"], device=self.device, dtype=cfg.dtype)
        self.result.seeds = dict(ref.seeds)
        if backends.interpreted(job.get("backend", "torch"), self.device):
            self.result.timing.note = R.INTERPRETED
        self.flags = Flags(integrity.static_flags(_read(job["candidate_path"]), job["candidate_path"]))
        self.deadline = time.perf_counter() + cfg.timeouts.run_s
        self.rng = random.Random(secrets.randbits(64))      # which timed calls get checked: never predictable
        self.phases = self.result.phases
        self.outside: tuple | None = None     # (share, where): the timed calls sampled by the kernel (evidence.sampled)
        self.unsampled = ""                    # ... or why they were not

    def call_timeout(self) -> float:
        return max(1.0, self.deadline - time.perf_counter())

    def phase(self, name: str, start: float) -> None:
        self.phases[name] = round(time.perf_counter() - start, 3)
        trace.mark("judge", f"{name[:-2]} done ({self.phases[name]:.3f} s)")

    # --- the job ---
    def run(self) -> Result:
        r = self.result
        r.env = environment(self.device)
        try:
            self.setup()
            self.trials()
            if r.correctness.passed == r.correctness.trials and not any(f.name == "bad-output" for f in self.flags):
                if r.timing.note:      # interpreted: no speed to claim, only the proofs of custom work
                    evidence.prove(self)
                else:
                    self.time()    # flagged or not: runtime checks of the timed phase still report
            self.verdict()
        except CandidateFailed as e:
            if e.reply is not None and e.reply.build:
                r.build = from_message(BuildInfo, e.reply.build)
            r.status, r.message, r.phase = e.status, e.message, e.phase or "start"
            r.flags = list(self.flags)      # what was seen before the failure stays on the record
            if e.status == "timeout":
                r.message = f"killed after {self.cfg.timeouts.run_s:g} s (wall-clock limit) during {r.phase}"
            elif e.status in ("runtime-error", "cuda-error") and r.phase in ("correctness", "timing"):
                r.message = f"forward raised {e.message}" + (" while timing" if r.phase == "timing" else "")
            if e.status == "integrity":
                self.flags.add(integrity.flag("protocol", e.message))
                r.flags = list(self.flags)
            return r
        r.phase = "done"
        return r

    def setup(self) -> None:
        r, ref, cand = self.result, self.ref, self.cand
        t = time.perf_counter()
        cand.wait_ready(self.call_timeout())
        self.phase("start_s", t)
        t = time.perf_counter()
        trials = ref.trials()
        self.phases.update(ref.phases)
        trace.mark("judge", "trials ready")
        ref.phases = {"reference_s": 0.0, "oracle_s": 0.0}        # computed once per problem; later jobs reuse it
        self.batch = calls_per_batch(ref, trials[0], self.shape_variants(), self.cfg, self.device)
        self.lanes = [(ref.slots(("in", k), tensors(trials[0].inputs), ROOM if k == 0 else 1),
                       ref.slots(("out", k), ref.output_templates())) for k in range(self.batch)]
        self.in_slots, self.out_slots = self.lanes[0]
        state = ref.model.state_dict()
        weights = ref.slots("weights", list(state.values()))
        for slot, w in zip(weights.tensors, state.values()):
            slot.copy_(w)
        shapes = self.map_shapes()
        synchronize(self.device)
        fds = [fd for ins, outs in self.lanes for fd in ins.fds + outs.fds] + weights.fds + \
            [fd for lane in self.shape_lanes for part in lane for fd in part.fds]
        flush = self.flush.nbytes
        mapped, _ = cand.call({"op": "map", "lanes": [{"inputs": i.specs, "outputs": o.specs} for i, o in self.lanes],
                               "weights": weights.specs, "problem_path": ref.path, "init_args": ref.init_args,
                               "seed": ref.seeds["init"], "dtype": self.cfg.dtype, "weight_names": list(state.keys()),
                               "flush_bytes": flush, "shapes": shapes}, self.call_timeout(), "start", expect="mapped",
                              fds=fds)
        weights.close()
        for lane in self.shape_lanes:
            lane[2].close()
        trace.mark("judge", f"mapped {self.batch} lane(s)")
        spans = [(int(a), int(b)) for a, b in mapped.addresses]   # said before candidate code existed
        per = len(self.in_slots.tensors)
        self.input_spans = [spans[k * per:(k + 1) * per] for k in range(self.batch)]
        handover.calibrate(self, trials)
        self.phase("handover_s", t)
        self.resume()
        t = time.perf_counter()
        msg = {"op": "load", "candidate_path": self.job["candidate_path"], "cache_dir": self.job["cache_dir"],
               "verbose": self.cfg.build.verbose, "dtype": self.cfg.dtype, "seed": ref.seeds["init"],
               "init_args": ref.init_args, "weight_names": list(state.keys()),
               "backends": list(self.job.get("backends", []))}
        reply, _ = cand.call(msg, self.call_timeout(), "load", expect="loaded")
        self.phase("load_s", t)
        r.build = from_message(BuildInfo, reply.build)
        r.env["sandbox"] = reply.sandbox
        self.weights = reply.weights

    def reuse(self, reply) -> str | None:
        """Two calls of one batch returning the same storage (all of a batch's outputs are alive together in
        the candidate process, so honest allocations never coincide), unless the stand-in reference did too."""
        seen = {}
        for pos, each in enumerate(reply.each):
            for i, entry in enumerate(each[0] if len(each) == 2 else []):
                address, span = entry[4], entry[6] if len(entry) > 6 else 0
                if address and span:
                    if address in seen and seen[address][0] != pos:
                        return f"calls {seen[address][0]} and {pos} of a batch both returned output {i} in the same memory"
                    seen.setdefault(address, (pos, i))
        return None

    def map_shapes(self) -> list[dict]:
        """Buffers for the shapes variants (judge/generalise.py), mapped with the job's: per variant its inputs,
        output slots and the weights of the reference built at its sizes."""
        self.shape_lanes, specs = [], []
        for k, v in enumerate(self.shape_variants()):
            state = v.model.state_dict()
            lane = (self.ref.slots(("shape-in", k), tensors(v.inputs)),
                    self.ref.slots(("shape-out", k), tensors(v.ref_out)),
                    self.ref.slots(("shape-weights", k), list(state.values())))
            for slot, x in zip(lane[0].tensors + lane[2].tensors, tensors(v.inputs) + list(state.values())):
                slot.copy_(x)
            self.shape_lanes.append(lane)
            specs.append({"inputs": lane[0].specs, "outputs": lane[1].specs, "weights": lane[2].specs,
                          "weight_names": list(state.keys()), "init_args": v.init_args})
        return specs

    def shape_variants(self) -> list:
        if not generalise.classes_for(self.ref.problem, self.cfg):
            return []
        return [v for v in self.ref.variants() if v.cls == "shapes"]

    @staticmethod
    def _check_reply(reply, pos: int = 0) -> str | None:
        if pos >= len(reply.each) or len(reply.each[pos]) != 2:
            return "the candidate process described no outputs for this call"
        outputs, mismatch = reply.each[pos]
        for i, entry in enumerate(outputs):
            shape, dtype, plain, alias = entry[:4]
            if not plain:
                return f"output {i} is a {dtype}, not a plain torch.Tensor"
            if alias:
                return f"output {i} shares memory with {alias}"
        return mismatch or None

    def fetch(self, reply, pos: int = 0, lane: int = 0, out_slots=None):
        """The outputs of call `pos` of a batch (run on `lane`) as tensors of this process, taken while the
        candidate is frozen; or why they cannot be. CUDA: the lane's output slots it copied into. CPU: read
        straight from its memory (channel.read_process_memory) at the address it gave, so no copy runs in
        its witnessed time."""
        bad = self._check_reply(reply, pos)
        out_slots = out_slots or self.lanes[lane][1]
        if bad or self.device == "cuda":
            return bad or clone(out_slots.tensors)
        outs = []
        try:
            for i, (entry, tpl) in enumerate(zip(reply.each[pos][0], out_slots.tensors)):
                address, stride, span = int(entry[4]), [int(x) for x in entry[5]], int(entry[6])
                limit = 64 * tpl.numel() * tpl.element_size() + 4096
                if span < 0 or span > limit or len(stride) != tpl.dim() or min(stride, default=0) < 0:
                    return f"output {i}: implausible memory layout (stride {stride}, {span} bytes)"
                for j, (lo, hi) in enumerate(span for lane_spans in self.input_spans for span in lane_spans):
                    if span and address < hi and lo < address + span:
                        return f"output {i} shares memory with input {j}"
                buf = torch.empty(max(span, tpl.element_size()), dtype=torch.uint8)
                if span:
                    read_process_memory(self.cand.pid, address, span, buf.data_ptr())
                flat = buf[: len(buf) // tpl.element_size() * tpl.element_size()].view(tpl.dtype)
                outs.append(flat.as_strided(tpl.shape, stride, 0) if span else torch.empty_like(tpl))
        except (TypeError, ValueError, IndexError, RuntimeError) as e:
            return f"malformed output description: {e}"
        except OSError as e:
            return f"output memory unreadable: {e}"
        return outs

    def trials(self) -> None:
        r, ref, cand = self.result, self.ref, self.cand
        t = time.perf_counter()
        c = r.correctness = Correctness(trials=self.cfg.trials, atol=ref.tolerance, rtol=ref.tolerance)
        c.weights = self.weights
        calls = 0
        worst = None
        for i, trial in enumerate(ref.trials()):
            for slot, x in zip(self.in_slots.tensors, tensors(trial.inputs)):
                slot.copy_(x)
            synchronize(self.device)
            reply, _ = cand.call({"op": "call"}, self.call_timeout(), "correctness")
            self.observe(reply)
            if reply.calls == calls and not self.job.get("aa_calibration"):
                self.flags.add(integrity.flag("no-custom-kernel", "the forward made no call into the candidate's "
                                                                  "compiled extension functions"))
            calls = reply.calls
            out = self.fetch(reply)
            if isinstance(out, str):
                if not (reply.each and reply.each[0][1]):    # a wrong shape is a wrong answer, else a bad output
                    self.flags.add(integrity.flag("bad-output", out))
                c.detail = c.detail or f"trial {i}: {out}"
                break
            self.flags.add(maybe_flag("input-mutated", check_inputs_unchanged(trial.inputs, self.in_slots.tensors)))
            out = out[0] if isinstance(trial.ref_out, torch.Tensor) else out
            stats = judge(ref.model, trial.inputs, trial.ref_out, out, ref.tolerance, trial.oracle)
            c.oracle_passed += stats["oracle_passed"]
            c.max_abs_err, c.max_rel_err = max(c.max_abs_err, stats["max_abs"]), max(c.max_rel_err, stats["max_rel"])
            c.mismatches += stats["mismatches"]
            if stats["reason"] is None:
                c.passed += 1
            else:
                c.detail = c.detail or f"trial {i}: {stats['reason']}"
            if trial.oracle is not None:     # the worst trial's precision class and errors (every trial audited)
                er, ec = rel_l2(trial.ref_out, trial.oracle), rel_l2(out, trial.oracle)
                cls = precision_class(ec, er, trial.levels, self.cfg.precision_factor) if trial.levels else ""
                if cls == "fp32" and self.cfg.precision_factor > 0:
                    cls = level_fingerprint(out, trial.ref_out, trial.level_outs, ec, er) or cls
                key = (CLASS_RANK.get(cls, 0), ec / max(er, 1e-300))
                if worst is None or key > worst[0]:
                    worst = (key, er, ec, cls, trial.levels)
        if worst is not None:
            _, c.oracle_err_ref, c.oracle_err_cand, c.precision_class, c.precision_levels = worst
        if c.passed == c.trials:      # a wrong answer is incorrect; its precision class says nothing more
            self.flags.add(precision_flag(c, ref.dtype, self.cfg.precision_factor, ref.precision_allowed))
        self.flags.add(self.late_work())
        self.phase("correctness_s", t)
        if c.passed == c.trials and not any(f.name == "bad-output" for f in self.flags):
            t = time.perf_counter()
            generalise.run(self)
            self.phase("generalisation_s", t)

    def observe(self, reply) -> None:
        """After every call, with the candidate frozen: threads it left behind, work it left on the device."""
        new = self.cand.threads() - self.cand.threads0
        if new:
            names = ", ".join(sorted(self.cand.thread_names(new)))[:120]
            self.flags.add(integrity.flag("background-thread", f"{len(new)} thread(s) the candidate started are "
                                                               f"still alive after forward returned ({names})"))
        self.probe.after_call()

    def time(self) -> None:
        r, ref, cfg = self.result, self.ref, self.cfg
        self.quiet()
        t = time.perf_counter()
        nvml = Nvml.open() if self.device == "cuda" else None
        if nvml:
            r.env["gpu_before"] = nvml.state()
        elif self.device == "cuda":      # said, not silent: throttled rounds cannot be told apart
            r.env["nvml"] = "unavailable: throttled rounds are not detected (is nvidia-ml-py installed?)"
        throttled = nvml.throttled if nvml else None
        trace.mark("judge", "nvml open")
        timing, tampered = self.timed_rounds(throttled)
        if tampered is not None:
            # Once more before the flag stands: a lie is there every time, a busy host's descheduling (ms around
            # batches) rarely twice. The second timing replaces the first, so lying only at first gains nothing.
            trace.mark("judge", "witness unsatisfied: timing again")
            timing, tampered = self.timed_rounds(throttled)
            timing.witness_retried = True
        r.timing = timing
        self.flags.add(tampered)
        self.flags.add(self.late_work())
        self.phase("timing_s", t)
        evidence.roofline(self)
        if "compile" in cfg.baselines:
            t = time.perf_counter()
            r.baselines["compile"] = ref.versus("compile", timing, self.flush, throttled)
            self.phase("compile_s", t)
        evidence.versus_precision(self, timing, throttled)
        self.resume()
        if not evidence.prove(self):
            return
        if nvml:
            r.env["gpu_after"] = nvml.state()
        self.flags.add(integrity.check_speed(timing.speedup, r.roofline.get("floor_ms"), timing.cand_ms, self.device))

    def timed_rounds(self, throttled):
        """The interleaved rounds (timing.measure), with the witness's verdict on the candidate's batches."""
        ref = self.ref
        template = ref.trials()[0].inputs
        local = LocalSide(ref.model, ref.feed(self.rng), template, self.device, self.flush)
        remote = RemoteSide(self.cand, self, ref.feed(self.rng), self.flush, self.probe, self.rng)
        trace.mark("judge", "timing pools ready")
        per_round = dataclasses.replace(self.cfg.timing, samples_per_round=self.batch)    # a round = one batch
        with torch.no_grad(), tf32_off(), evidence.sampled(self) as perf:
            remote.after_batch = perf.drain if perf else None
            timing = measure(local, remote, per_round, throttled, "cuda-events" if self.device == "cuda" else "perf-counter")
            evidence.sample_more(perf, lambda: remote.sample(self.batch))
        timing.ref_host_ms = sorted(local.host_ms)[len(local.host_ms) // 2] if local.host_ms else None
        per_call = sorted(w / n for w, n in zip(remote.witness, remote.sizes))
        timing.cand_host_ms = per_call[len(per_call) // 2]
        timing.batch = self.batch
        timing.witness_batches = [[round(r, 5), round(w, 5), n] for r, w, n in zip(remote.reported, remote.witness,
                                                                                   remote.sizes)]
        timing.checked_calls = remote.checked
        timing.retimed_batches = remote.retimed
        timing.handover_ms = round(self.handover_ms, 4)
        timing.handover_spread_ms = round(self.handover_spread, 4)
        if self.device == "cuda":
            timing.canary_ms = {"before": [[k, round(x, 5)] for k, x in self.canary_before[1:]],
                                "after": [[k, round(x, 5)] for k, x in remote.canary], "inside": remote.inside}
            timing.first_rest_ms = {"ref": local.first_rest, "cand": remote.first_rest}
            timing.batch_diag_ms = {"ping": self.ping_diag, "cand": remote.diag}
            if self.flush.run is not None:
                timing.flush_ms = {"alone": [round(x, 5) for x in self.flush.alone_ms],
                                   "allow_alone": round(self.flush.allow_alone_ms, 5),
                                   "allow": round(self.flush.allow_ms, 5), "ref": local.flushes, "cand": remote.flushes}
        counted, by_cpu = [(r, b, n) for r, b, n in zip(remote.reported, remote.busy, remote.sizes) if b is not None], None
        if counted and self.cpu_handover_ms is not None:     # (CPU: the CPU-time witness, handle.busy_ms)
            timing.cpu_busy_ms = {"handover": round(self.cpu_handover_ms, 4), "spread": round(self.cpu_spread, 4),
                                  "batches": [round(b, 4) for _, b, _ in counted]}
            by_cpu = integrity.check_witness(*map(list, zip(*counted)), self.cpu_handover_ms, self.cpu_spread, "cpu-time")
        return timing, integrity.check_witness(remote.reported, remote.witness, remote.sizes, self.handover_ms,
                                               self.handover_spread, self.device) or by_cpu or \
            evidence.check_canary(self.canary_before[1:], remote.canary, self.device) or \
            evidence.check_inside(remote.inside)

    def late_work(self):
        p = self.probe
        return integrity.check_late_work(p.busy_calls, p.probed, p.worst, p.idle_ms) if p.late() else None

    def errors(self) -> list:
        return [f for f in self.flags if f.severity == "error"]

    def verdict(self) -> None:
        r = self.result
        r.flags = list(self.flags)
        c = r.correctness
        errors = self.errors()
        if c.passed < c.trials and not any(f.name == "bad-output" for f in errors):
            r.status, r.message = R.INCORRECT, c.detail
            return
        # wrong only on the generalisation trials: incorrect; beside another error, that error's class decides
        r.status = R.INCORRECT if errors and all(f.name == "generalisation" for f in errors) else \
            R.INTEGRITY if errors else R.OK
        r.message = "; ".join(f"{f.name}: {f.detail}" for f in errors)


def _read(path: str) -> str:
    try:
        with open(path) as f:
            return f.read()
    except OSError:
        return ""
