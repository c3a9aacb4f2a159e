"""Correctness, as the reference process judges it: same weights, seeded inputs, strict comparison, the
float64 oracle, the precision flag and the degenerate-problem lint.

Each check is a small function returning None (pass) or a one-line reason; judge/session.py strings them
together over the trials and fills a Correctness record plus integrity flags.
"""
from __future__ import annotations

import contextlib
import math

import torch

from . import integrity
from .results import Correctness, Flag

DTYPES = {"float32": torch.float32, "float16": torch.float16, "bfloat16": torch.bfloat16}


@contextlib.contextmanager
def tf32_off():
    """The reference must compute in true fp32: TF32 would hide a candidate's precision loss."""
    saved = (torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32,
             torch.get_float32_matmul_precision())
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    torch.set_float32_matmul_precision("highest")
    try:
        yield
    finally:
        torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32 = saved[:2]
        torch.set_float32_matmul_precision(saved[2])


def synchronize(device: str) -> None:
    if device == "cuda":
        torch.cuda.synchronize()


def to_device(obj, device: str, dtype: torch.dtype):
    """Move tensors to the device; float32 tensors take the run's dtype, other dtypes are kept."""
    if isinstance(obj, torch.Tensor):
        obj = obj.to(device)
        return obj.to(dtype) if obj.dtype == torch.float32 else obj
    if isinstance(obj, (list, tuple)):
        return type(obj)(to_device(o, device, dtype) for o in obj)
    return obj


def clone(obj):
    if isinstance(obj, torch.Tensor):
        return obj.clone()
    if isinstance(obj, (list, tuple)):
        return type(obj)(clone(o) for o in obj)
    return obj


def tensors(obj) -> list:
    if isinstance(obj, torch.Tensor):
        return [obj]
    if isinstance(obj, (list, tuple)):
        return [t for o in obj for t in tensors(o)]
    return []


def make_inputs(problem, seed: int, device: str, dtype: torch.dtype):
    """The problem's get_inputs() under `seed`, its tensors made on the device itself (a 16M-element torch.rand
    on the H200 host's CPU took ~0.8 s, and every trial and timing set paid it); a tensor it places
    explicitly elsewhere is moved."""
    torch.manual_seed(seed)
    with torch.device(device):
        inputs = list(problem.get_inputs())
    return list(to_device(inputs, device, dtype))


def construct(cls, init_inputs, device: str, dtype: torch.dtype, seed: int):
    """Build a module on the device from the problem's init inputs, with a fixed seed."""
    with torch.device(device):
        torch.manual_seed(seed)
        module = cls(*init_inputs)
    return module.to(device=device, dtype=dtype).eval()


# --- checks on one trial's outputs -------------------------------------------------------------------

def check_inputs_unchanged(pristine, used) -> str | None:
    for i, (a, b) in enumerate(zip(tensors(pristine), tensors(used))):
        if not torch.equal(a.flatten().view(torch.uint8), b.flatten().view(torch.uint8)):
            return f"input {i} was modified by the candidate"
    return None


def compare(ref_out, cand_out, atol: float, rtol: float, oracle=None) -> dict:
    """Element-wise comparison: NaN/Inf positions must match, then |c - r| <= atol + rtol * |r|.
    With `oracle` (the reference run in float64), an element also passes when the candidate is within
    tolerance of float64 widened by the reference's own error there, |c - o| <= atol + rtol * |o| + |r - o|:
    where fp32 rounding makes the reference itself miss by more than the tolerance (long dot products),
    a candidate at least as close to the true value is not wrong. Elsewhere the bar is unchanged."""
    stats = {"max_abs": 0.0, "max_rel": 0.0, "mismatches": 0, "reason": None, "oracle_passed": 0}
    oracles = tensors(oracle) if oracle is not None else []
    for i, (r, c) in enumerate(zip(tensors(ref_out), tensors(cand_out))):
        if not (r.is_floating_point() or r.is_complex()):
            bad = int((r != c).sum())
            stats["mismatches"] += bad
            if bad and not stats["reason"]:
                stats["reason"] = f"output {i}: {bad} of {r.numel()} integer elements differ"
            continue
        quick = _all_close_fast(r, c, atol, rtol)
        if quick is not None:
            stats["max_abs"], stats["max_rel"] = max(stats["max_abs"], quick[0]), max(stats["max_rel"], quick[1])
            continue
        r64, c64 = r.double(), c.double()
        for name, fn in (("NaN", torch.isnan), ("Inf", torch.isinf)):
            bad = int((fn(r64) != fn(c64)).sum())
            if bad:
                stats["mismatches"] += bad
                stats["reason"] = stats["reason"] or f"output {i}: {name} at {bad} positions where the reference has none (or vice versa)"
        flipped = int((torch.isinf(r64) & torch.isinf(c64) & (r64 != c64)).sum())     # +Inf for -Inf (red team, s23)
        if flipped:
            stats["mismatches"] += flipped
            stats["reason"] = stats["reason"] or f"output {i}: Inf of the wrong sign at {flipped} positions"
        finite = torch.isfinite(r64) & torch.isfinite(c64)
        diff = (c64 - r64).abs().where(finite, torch.zeros_like(r64))
        if diff.numel():
            stats["max_abs"] = max(stats["max_abs"], float(diff.max()))
            stats["max_rel"] = max(stats["max_rel"], float((diff / r64.abs().clamp_min(atol)).max()))
        close = diff <= atol + rtol * r64.abs().where(finite, torch.zeros_like(r64))
        if i < len(oracles) and oracles[i].shape == r.shape:
            o = oracles[i].to(r64.device, torch.float64)
            by_oracle = (c64 - o).abs() <= atol + rtol * o.abs() + (r64 - o).abs()
            stats["oracle_passed"] += int((by_oracle & ~close & finite).sum())
            close = close | by_oracle
        bad = int((~close & finite).sum())
        stats["mismatches"] += bad
        if bad and not stats["reason"]:
            stats["reason"] = (f"output {i}: {bad} of {r.numel()} elements outside atol={atol:g}, rtol={rtol:g} "
                               f"(max abs err {float(diff.max()):.3g})")
    return stats


def _all_close_fast(r, c, atol: float, rtol: float) -> tuple[float, float] | None:
    """(max abs, max rel error) when every element of c is finite and within the bar in the outputs' own
    precision with a margin that fp32 rounding cannot cross (then the float64 check agrees); else None, and
    the float64 check decides. ~10x faster than it on a large output, which every trial, variant and
    secretly checked timed call is."""
    if r.shape != c.shape or r.dtype != c.dtype or r.dtype not in (torch.float32, torch.float16, torch.bfloat16):
        return None
    if r.dtype != torch.float32:
        r, c = r.float(), c.float()          # (exact: every half value is a float)
    if not bool(torch.isfinite(r).all()):    # (then a finite bar and diff <= bar make c finite too)
        return None
    diff = (c - r).abs_()
    ar = r.abs()
    if not bool((diff <= ar.mul(rtol).add_(atol).mul_(1 - 1e-5)).all()):
        return None
    return (float(diff.max()), float(diff.div_(ar.clamp_min_(atol)).max())) if diff.numel() else (0.0, 0.0)


def rel_l2(out, oracle) -> float:
    num = sum(float((a.double() - b).pow(2).sum()) for a, b in zip(tensors(out), tensors(oracle)))
    den = sum(float(b.pow(2).sum()) for b in tensors(oracle))
    return math.sqrt(num / den) if den > 0 else math.sqrt(num)


def oracle_outputs(ref, inputs, ref_out):
    """Run the reference in float64 (in place, then back: fp32 -> fp64 -> fp32 is exact) on the same inputs."""
    # Module.double() converts floating parameters and buffers only (masks, indices stay); the way back is
    # exact when they all share one floating dtype.
    dtypes = {t.dtype for t in [*ref.parameters(), *ref.buffers()] if t.is_floating_point()}
    if len(dtypes) > 1 or not any(t.is_floating_point() for t in tensors(ref_out)):
        return None
    original = next(iter(dtypes), None)
    try:
        ref.double()
        inputs64 = [t.double() if isinstance(t, torch.Tensor) and t.is_floating_point() else t for t in inputs]
        with torch.no_grad(), tf32_off():
            oracle = ref(*inputs64)
    except (RuntimeError, TypeError, NotImplementedError):
        return None   # an op without float64 support: no oracle for this problem
    finally:
        if original is not None:
            ref.to(original)
    return oracle


def judge(ref, inputs, ref_out, cand_out, tol: float, oracle=None) -> dict:
    """compare() against the reference; on a miss, again with the float64 oracle (see compare), computed
    here unless the caller already has it."""
    stats = compare(ref_out, cand_out, tol, tol)
    if stats["reason"] is not None:
        oracle = oracle if oracle is not None else oracle_outputs(ref, inputs, ref_out)
        if oracle is not None:
            stats = compare(ref_out, cand_out, tol, tol, oracle)
    return stats


# --- the trial loop ----------------------------------------------------------------------------------

class Flags(list):
    """The job's flags, at most one per name (the first occurrence says the most)."""

    def add(self, f: Flag | None) -> None:
        if f is not None and all(x.name != f.name for x in self):
            self.append(f)


def maybe_flag(name: str, detail: str | None) -> Flag | None:
    return integrity.flag(name, detail) if detail else None


def degenerate_reason(ref_outs: list, tol: float) -> str | None:
    """Would all-zeros, the output's mean, or last trial's output pass as this trial's answer?"""
    if not ref_outs or not all(t.is_floating_point() for t in tensors(ref_outs[0])):
        return None
    first = ref_outs[0]
    zeros = [torch.zeros_like(t) for t in tensors(first)]
    if compare(first, zeros, tol, tol)["reason"] is None:
        return f"an all-zeros output passes atol=rtol={tol:g}"
    consts = [torch.full_like(t, float(t.double().mean())) for t in tensors(first)]
    if compare(first, consts, tol, tol)["reason"] is None:
        return f"a constant output (the mean) passes atol=rtol={tol:g}"
    if len(ref_outs) > 1 and compare(ref_outs[1], first, tol, tol)["reason"] is None:
        return "the output does not depend on the inputs (two trials with different inputs agree)"
    return None


# --- precision fingerprint ---------------------------------------------------------------------------
# The reference is also run at each reduced precision the device has (TF32 on CUDA, fp16, bf16: inputs and
# weights cast, output back to fp32); each run's norm-wise error against the fp64 oracle is what that
# precision costs on this problem. A candidate is classed at the precision whose cost its own error
# matches (nearest on a log scale), once its error is past both `precision_factor` times the fp32
# reference's and the log-midpoint towards that precision. A different fp32 summation order stays fp32
# (a few times the reference's error; reduced precisions sit orders of magnitude higher); there is no
# ulp floor a TF32 GEMM could hide under.

LEVELS = ("tf32", "fp16", "bf16")      # from the most precise down; each is skipped where it costs nothing


class AtLevel:
    """The reference run at a reduced precision: TF32 for cuBLAS/cuDNN, or a half copy of the model fed half
    inputs, its outputs back in fp32. Used for the precision fingerprint and for the speedup against the
    reference at the candidate's own precision. `copies` keeps the half copies (one per problem)."""

    def __init__(self, model, level: str, copies: dict):
        import copy
        self.model, self.level = model, level
        self.dt = None if level == "tf32" else torch.float16 if level == "fp16" else torch.bfloat16
        if self.dt is not None and self.dt not in copies:
            copies[self.dt] = copy.deepcopy(model).to(self.dt)
        self.low = copies.get(self.dt)

    def __call__(self, *inputs):
        with torch.no_grad():
            if self.dt is None:
                saved = torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32
                torch.backends.cuda.matmul.allow_tf32 = torch.backends.cudnn.allow_tf32 = True
                try:
                    return self.model(*inputs)
                finally:
                    torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32 = saved
            dt = self.dt
            out = self.low(*[x.to(dt) if isinstance(x, torch.Tensor) and x.dtype == torch.float32 else x
                             for x in inputs])
            return type(out)(o.float() for o in out) if isinstance(out, (list, tuple)) else out.float()


def levels_here(device: str) -> tuple[str, ...]:
    return tuple(level for level in LEVELS if level != "tf32" or device == "cuda")


def reduced_precision_errors(model, inputs, oracle, device: str, copies: dict | None = None,
                             outputs: dict | None = None, err_ref: float = 0.0) -> dict[str, float]:
    """{level: ||reference at that level - fp64|| / ||fp64||} for the levels this device has; a level the
    reference cannot run at (an op without a half kernel, overflow to inf) is left out. With `outputs`, the
    outputs of the levels whose cost is near fp32's (`err_ref`) are kept there, for level_fingerprint."""
    copies = {} if copies is None else copies
    levels = {}
    for level in levels_here(device):
        try:
            out = AtLevel(model, level, copies)(*inputs)
            err = rel_l2(out, oracle)
        except Exception:        # no kernel at this precision here: that level is not a possible explanation
            continue
        if math.isfinite(err):
            levels[level] = err
            if outputs is not None and err <= NEAR * max(err_ref, FLOOR):
                outputs[level] = out
    return levels


# A level whose cost is within NEAR times fp32's cannot be told from fp32 by the size of the error alone; there
# the candidate's output is also compared with the level's own output (level_fingerprint). The floor is the
# smallest reference error the magnitude rule trusts: an eighth of an ulp (an exact reference's error is 0).
NEAR = 64.0
FLOOR = torch.finfo(torch.float32).eps / 8


def level_fingerprint(cand_out, ref_out, level_outs: dict, err_cand: float, err_ref: float) -> str:
    """The level whose own output the candidate's is much closer to (a quarter of the distance or less) than
    to the fp32 reference's, once its error is past the reference's: a library GEMM switched to TF32, or a
    cast to half, reproduces that level's rounding almost bit for bit, whatever the size of its error."""
    if err_cand <= 1.5 * err_ref:
        return ""
    to_ref = rel_l2(cand_out, ref_out)
    near = {k: rel_l2(cand_out, out) for k, out in level_outs.items()}
    near = {k: d for k, d in near.items() if math.isfinite(d) and d <= to_ref / 4}
    return min(near, key=near.get) if near else ""


def precision_class(err_cand: float, err_ref: float, levels: dict[str, float], factor: float) -> str:
    """fp32, or the reduced precision whose cost (see above) the candidate's error matches."""
    floor = max(err_ref, FLOOR)
    if factor <= 0 or err_cand <= factor * floor:
        return "fp32"
    past = {k: v for k, v in levels.items() if v > 1.5 * floor and err_cand > math.sqrt(floor * v)}
    if not past:
        return "fp32"
    nearest = min(past, key=lambda k: abs(math.log(err_cand / past[k])))
    worst = max(levels.values())
    return "below-bf16" if err_cand > 10 * worst and nearest == max(levels, key=levels.get) else nearest


CLASS_RANK = {"": 0, "fp32": 0, "tf32": 1, "fp16": 2, "bf16": 3, "below-bf16": 4}


def precision_flag(c: Correctness, dtype: torch.dtype, factor: float, allowed: str = "fp32") -> Flag | None:
    """A float32 run whose candidate computes at a lower precision (its class) than `allowed` (the config's
    or the problem's PRECISION_ALLOWED); for half runs, an error many times the reference's and above a
    couple of ulps."""
    if factor <= 0 or c.oracle_err_cand is None or c.oracle_err_ref is None:
        return None
    if dtype == torch.float32:
        if CLASS_RANK.get(c.precision_class, 0) <= CLASS_RANK[allowed]:
            return None
        costs = ", ".join(f"{k} {v:.2e}" for k, v in sorted(c.precision_levels.items(), key=lambda kv: kv[1]))
        return integrity.flag("precision", f"norm-wise relative error vs fp64 {c.oracle_err_cand:.2e} (max abs err "
                                           f"{c.max_abs_err:.2e}) is {c.precision_class}-level: the reference here "
                                           f"gives fp32 {c.oracle_err_ref:.2e}, {costs} (allowed: {allowed}; "
                                           "precision_allowed in the config, PRECISION_ALLOWED in the problem)")
    floor = 2 * torch.finfo(dtype).eps
    if c.oracle_err_cand > factor * c.oracle_err_ref and c.oracle_err_cand > floor:
        ratio = c.oracle_err_cand / max(c.oracle_err_ref, 1e-300)
        return integrity.flag("precision", f"norm-wise relative error vs fp64 {c.oracle_err_cand:.2e} is {ratio:.1f}x "
                                           f"the reference's {c.oracle_err_ref:.2e} (limit {factor:g}x)")
    return None
