"""What a job's speedup is made of, decided in the reference process after the timed phases:
- the ablation: custom work proved causally (the compiled functions' results replaced by noise);
- the attribution: the share of a call's time in the candidate's own code (measured in the candidate
  process by candidate/attribution.py and, for compiled code on the CPU, sampled from here by
  judge/sampler.py, the lower of the two; judged against the problem's or the config's minimum);
- the speedup against the reference run at the candidate's detected precision (a TF32 candidate against
  eager with TF32 on), beside the speedup against the fp32 reference;
- the clock canary (CUDA): kbench's own fixed work timed on the candidate process's clock, before its
  import and after every timed batch.
"""
from __future__ import annotations

import contextlib
import math
import time

import torch

from .. import backends, cpus, integrity
from ..correctness import check_inputs_unchanged, judge, levels_here, synchronize, tensors
from .handle import CandidateFailed
from .sampler import Perf, SamplingFailed


# The canary (candidate/clocks.py) timed after the candidate's import at less than this share of its time
# before, at the same size (the median over the batches): the process's clock reads short.
CANARY_FAST = 0.5


def canary_base(before: list) -> dict:
    """The canary's time per size index on the stand-in's clock, before any candidate code (the median)."""
    by_size: dict = {}
    for k, ms in before:
        by_size.setdefault(k, []).append(ms)
    return {k: sorted(v)[len(v) // 2] for k, v in by_size.items()}


def check_canary(before: list, after: list, device: str):
    """(size index, ms) per batch, before the import and after it. A clock rewritten below Python reads kbench's
    own work short too, however short the candidate's calls (which the witness cannot resolve), and at a size
    it cannot foresee: timer-tampered when after/before at the same size has a median far below 1. CUDA only
    (clocks.py says why)."""
    if device != "cuda" or not after:
        return None
    base = canary_base(before)
    if not base or min(base.values()) <= 0 or min(ms for _, ms in after) <= 0:
        return integrity.flag("timer-tampered", "the candidate process did not time kbench's clock canary")
    ratios = sorted(ms / base[k] for k, ms in after if k in base)
    if not ratios or ratios[len(ratios) // 2] >= CANARY_FAST:
        return None
    r = ratios[len(ratios) // 2]
    return integrity.flag("timer-tampered", f"kbench's own fixed work, timed on the candidate process's clock, read "
                                            f"{r:.2f}x as long after the candidate's import as before it (median "
                                            f"over {len(ratios)} batches at secret sizes): that clock reads "
                                            f"{1 / r:.1f}x short")


# The spin inside a call (candidate/clocks.py, "inside"): per batch, one secret call holds kbench's spin of s ms
# (its size's time before the import) between its start event and the forward, and another follows the same spin
# outside its interval. Their difference e is 0 for an honest clock, give or take the calls' own spread (sd of a
# batch's calls, a single call each side: sqrt(2) of it) and a share of the call (launch gaps: Triton's honest
# kernels, H200 session 33, reached e = 1.9 x t in single batches). A clock that reads short on intervals holding
# the candidate's launches hides the spin too: e = -s(1 - 1/L) for a lie of L; one that spares the interval holding
# kbench's spin reads that call true and the other short: e = t(L - 1), t the other's claimed time. A batch is off
# when e < -(INSIDE_HIDDEN x (s + t)) or e > INSIDE_SPARED x t, beyond INSIDE_NOISE spreads and INSIDE_FLOOR_MS;
# more off batches than a tenth (at least one) is a pattern. Honest jobs of that run came to at most 0.96 of
# a threshold in any batch (results/H200/README.md, session 33).
INSIDE_HIDDEN, INSIDE_SPARED, INSIDE_NOISE, INSIDE_FLOOR_MS = 0.25, 1.0, 4.0 * math.sqrt(2), 0.001


def check_inside(batches: list) -> integrity.Flag | None:
    """[inside, after, s, spread] (ms) per batch: the call holding kbench's spin (the spin left in), the call
    after the same spin, the spin's time before the import, the sd of the batch's other calls."""
    def e(b):       # the difference, beyond the noise (INSIDE_NOISE spreads and the floor)
        return b[0] - b[2] - b[1], INSIDE_NOISE * b[3] + INSIDE_FLOOR_MS

    hidden = [b for b in batches if e(b)[0] < -INSIDE_HIDDEN * (b[2] + b[1]) - e(b)[1]]
    spared = [b for b in batches if e(b)[0] > INSIDE_SPARED * b[1] + e(b)[1]]
    outliers = max(1, len(batches) // 10)
    for off, what in ((hidden, "read it shorter than kbench's own spin inside it"),
                      (spared, "read it longer than the call after the same spin outside its interval")):
        if len(off) > outliers:
            b = sorted(off, key=lambda b: b[0])[len(off) // 2]
            return integrity.flag("timer-tampered", f"a call holding kbench's spin of {b[2]:.4f} ms read "
                                                    f"{b[0]:.4f} ms on the candidate process's clock, the call after "
                                                    f"the same spin {b[1]:.4f} ms: that clock {what} ({len(off)} of "
                                                    f"{len(batches)} batches)")
    return None


def prove(s) -> bool:
    """The proofs of custom work: the ablation, then the attribution profile. False if the candidate process
    broke under the ablation (nothing more to ask it)."""
    if not ablation(s):
        return False
    if s.cfg.timing.profile:
        t = time.perf_counter()
        attribution(s)
        s.phase("profile_s", t)
    return True


def roofline(s) -> None:
    """The problem's roofline floor against the candidate's time (when ceilings were calibrated)."""
    from .. import roofline as rl
    ceilings = rl.load_ceilings(s.cfg.paths.ceilings, s.device)
    if ceilings:
        trial = s.ref.trials()[0]
        work = rl.count(s.ref.model, trial.inputs, trial.ref_out)
        s.result.roofline = rl.floor(work, ceilings, s.cfg.dtype)
        s.result.roofline["sol"] = s.result.roofline["floor_ms"] / s.result.timing.cand_ms


def ablation(s) -> bool:
    """One call with every compiled function's result replaced by noise (candidate/loading.py). If the output
    is still right, the compiled code did not compute it: no-custom-kernel, however many calls it made.
    False if the candidate process did not survive it."""
    c = s.result.correctness
    if s.job.get("aa_calibration"):
        return True
    trial = s.ref.trials()[0]
    for slot, x in zip(s.in_slots.tensors, tensors(trial.inputs)):
        slot.copy_(x)
    synchronize(s.device)
    try:
        reply, _ = s.cand.call({"op": "ablate"}, s.call_timeout(), "ablation")
    except CandidateFailed as e:
        # Not a proof: a forward can test what its compiled call returned against torch and raise or exit on
        # noise (exit_on_noise: torch did the work, and an exit also skipped the attribution). Honest code
        # survives noise: floats stay floats, integer results are shuffled, not out of range (noise_like).
        c.ablation = f"failed ({e.status}) with its compiled results replaced by noise"
        s.flags.add(integrity.flag("no-custom-kernel", f"the forward failed ({e.status}: {e.message[:160]}) when "
                                   "every compiled function's result was replaced by noise, so nothing shows "
                                   "that the compiled code computes the output; a forward must compute with "
                                   "what its kernels return, not check them"))
        return e.status not in ("timeout", "crash") and s.cand.alive()
    if reply.build.get("extensions"):
        s.result.build.extensions = reply.build["extensions"]     # (what it says it ran: e.g. Triton configs)
    if not reply.each:
        c.ablation = "not run: no compiled function"
        return True
    out = s.fetch(reply)
    if isinstance(out, str):
        c.ablation = "output changed"
        return True
    out = out[0] if isinstance(trial.ref_out, torch.Tensor) else out
    if judge(s.ref.model, trial.inputs, trial.ref_out, out, s.ref.tolerance, trial.oracle)["reason"] is None:
        c.ablation = "output unchanged"
        s.flags.add(integrity.flag("no-custom-kernel", "with every compiled function's result replaced by noise "
                                                       "the output was still correct: the compiled code does not "
                                                       "compute it"))
    else:
        c.ablation = "output changed"
    return True


def attribution(s) -> None:
    """One profiled call (lane 0 holds the ablation's inputs, restored by it); below the minimum share:
    library-heavy."""
    if s.job.get("aa_calibration"):
        return
    prof, witness_ms = s.cand.call({"op": "profile"}, s.call_timeout(), "profiling", expect="profiled")
    share, top = (prof.custom_share if prof.custom_share >= 0 else None), prof.top
    if sampled_here(s):
        seen, where = s.outside or sampled_share(s, witness_ms)
        if seen is not None and (share is None or seen < share):
            share, top = seen, where
        else:
            top = f"{top}; {where}" if top else where
    s.result.custom_share_top = top
    if share is not None:
        s.result.custom_share = share
        s.flags.add(integrity.check_custom_share(share, s.ref.custom_share, s.device, top))
    elif s.ref.custom_share > 0:
        s.flags.add(integrity.flag("unattributed", top or "the candidate process measured no share"))


def sampled_here(s) -> bool:
    """Compiled code on the CPU (CUDA: the kernels' names; interpreted Triton: numpy is its arithmetic)."""
    return s.device == "cpu" and not backends.interpreted(s.job.get("backend", "torch"), s.device)


@contextlib.contextmanager
def sampled(s):
    """The kernel samples the candidate's threads through the timed phase (judge/sampler.py Perf): its timed
    calls themselves, which nothing in the candidate can tell from the others. Yields the Perf (or None);
    s.outside = (share, where)."""
    if not sampled_here(s):
        yield None
        return
    try:
        perf = Perf(s.cand.pid, s.job["cache_dir"], s.cand.code0)
    except SamplingFailed as e:
        s.unsampled = f"timed calls not sampled ({e})"
        yield None
        return
    try:
        perf.enable()
        yield perf
        perf.enable(False)
        share, where = perf.share()
        s.outside = (share, f"sampled in its timed calls: {where}")
        s.flags.add(off_slot(perf.cpus))
    finally:
        perf.close()


def off_slot(samples_per_cpu):
    """The slot's cores are the judge's (cpus.py: KBENCH_CPUS); a candidate may re-pin its own threads, and one
    that moved onto another slot's cores while timed would run beside that slot's timed job."""
    slot = cpus.slot()
    off = {c: n for c, n in sorted(samples_per_cpu.items()) if c not in slot}
    if not slot or not off:
        return None
    return integrity.flag("off-slot-cores", f"{sum(off.values())} of {sum(samples_per_cpu.values())} samples of its "
                          f"timed calls ran on CPU(s) {', '.join(map(str, off))}, outside its slot's "
                          f"cores {','.join(map(str, slot))}")


def sample_more(perf, batch) -> None:
    """Too few samples in the timed calls (short calls, few rounds): more batches like them, for up to
    SAMPLED_S x 4 (a call of another kind would tell the candidate it is the one sampled)."""
    start = time.perf_counter()
    while perf is not None and perf.share()[0] is None and time.perf_counter() - start < 4 * SAMPLED_S:
        batch()


SAMPLED_S = 0.3        # of forward calls, sampled (judge/sampler.py: one sample per running thread per ms)


def sampled_share(s, call_ms: float) -> tuple[float | None, str]:
    """Where the kernel refused perf events: the candidate's running threads sampled with ptrace while
    it repeats its forward on lane 0 for about SAMPLED_S (from the profiled call's witness time). A candidate
    can tell these calls apart (TracerPid): docs/integrity.md, known gaps."""
    calls = max(3, min(10_000, round(SAMPLED_S * 1e3 / max(call_ms, 1e-3))))
    why = f"{s.unsampled}; " if s.unsampled else ""
    try:
        _, sampler = s.cand.call_sampled({"op": "repeat", "calls": calls}, s.call_timeout(), "profiling",
                                         s.job["cache_dir"])
    except SamplingFailed as e:
        return None, f"{why}no sampling ({e})"
    share, where = sampler.share()
    return share, f"{why}sampled with ptrace in calls of its own: {where}"


def versus_precision(s, timing, throttled) -> None:
    """A candidate classed below fp32: its speedup against the reference at that precision too, timed like
    the compile baseline (once per problem and precision). below-bf16 is compared with the lowest level."""
    cls = s.result.correctness.precision_class
    here = [lv for lv in levels_here(s.device) if lv in s.result.correctness.precision_levels]
    level = cls if cls in here else (here[-1] if cls == "below-bf16" and here else None)
    if level is None or not timing.speedup:
        return
    t = time.perf_counter()
    try:
        s.result.baselines["precision"] = s.ref.versus(level, timing, s.flush, throttled)
    except Exception as e:        # the reference has no kernel at that precision: said, not fatal
        s.result.baselines["precision"] = {"precision": level, "error": f"{type(e).__name__}: {e}"[:200]}
    s.phase("precision_s", t)


def verify_timed(s, reply, pos: int, pristine: list) -> None:
    """A timed call chosen in secret: its output must match the reference on the same inputs."""
    out = s.fetch(reply, pos, pos)
    bad = out if isinstance(out, str) else check_inputs_unchanged(pristine, s.lanes[pos][0].tensors)
    if not bad:
        ref_out = s.ref.run(pristine)
        out = out[0] if isinstance(ref_out, torch.Tensor) else out
        bad = judge(s.ref.model, pristine, ref_out, out, s.ref.tolerance)["reason"]
    if bad:
        s.flags.add(integrity.flag("cached-result", f"a timed call's output was wrong (checked in secret): {bad}"))
