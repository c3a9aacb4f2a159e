"""Generalisation trials: after the plain trials, a candidate must also be right on inputs the problem's own
get_inputs() never draws (issue 17). Derived from the reference, once per problem and seed:

- values: the plain inputs' shapes and dtype with other values: signed normal, heavy-tailed (log-normal
  magnitudes up to ~1e3), tiny (~1e-3), and small integers and exact halves (ties for rounding, exact zeros);
- special: NaN, then +Inf and -Inf, planted at a few random positions and the first and last EDGE ones of every
  floating input; at the problem's sizes and at the shapes class's (below: tails), where it passed that class;
- edge: the problem's own get_edge_inputs(), if it defines it (e.g. the exact half-integer ties of the
  layout-mix problem);
- layout: fresh inputs of the problem's own distribution, each floating input handed over as a
  non-contiguous view of the same shape, one variant per view layouts.py makes (transposed, strided, sliced,
  expanded, ...). The storage the view skips is NaN, so a kernel that ignores strides reads NaN. The
  candidate process builds the view over its own input slot (lane 0 has room for it), so no new buffer is
  mapped into it.

A variant the reference itself rejects (raises) is skipped, not failed: the harness learns what the
reference accepts by running it. A candidate that raises on a variant (a kernel that refuses strided inputs)
fails that variant. Outputs are compared as in the plain trials (the float64 oracle consulted on a miss),
with two allowances measured on the GPU suite (results/H200/, 2026-12-02):
- values: heavy-tailed inputs make long sums cancel, and an honest kernel with another summation order then
  misses the element-wise bar on a few elements while the reference happens to be close. A values variant
  also passes when the candidate's norm-wise error against the oracle is of the precision class the run
  allows (correctness.precision_class, with the reference's own costs at reduced precision on that
  variant): as accurate as fp32 over the whole output, which a kernel wrong on the distribution is not.
- special: where a planted value reaches an output is learnt from the reference (two runs with other,
  finite values at the planted positions: the outputs that differ depend on them). There the candidate must
  be non-finite where the reference is (NaN or Inf: a 3xTF32 split turns Inf into NaN) and finite and close
  where it is finite. Where the reference is NaN but does not depend on the planted values, an artefact of
  its algorithm (0 * NaN for masked attention weights, a Winograd tile), the candidate may be NaN too or give
  the value the reference gives with finite values there.
Per class the config's `generalise` policy (error, warning or off) decides what a failure is, and a
problem's GENERALISE list narrows the classes it supports.
- shapes: the problem's sizes changed where get_inputs() / get_init_inputs() read them from module-level
  integers (>= 16: batch, tokens, channels, not a kernel size, stride or dim; a problem's SIZES list names
  them instead), all at once: to the prime just below (odd, no power-of-two factor) and to one less than a
  power of two at about half (a tail in every dim). Never larger, so within the problem's memory. The
  reference is rebuilt for them (same init seed), and the candidate process builds a ModelNew with those
  init inputs over buffers mapped with the job's (no mapping after its sandbox), fed the same weights.
"""
from __future__ import annotations

import math

import torch

from ..correctness import (CLASS_RANK, clone, compare, judge, oracle_outputs, precision_class,
                           reduced_precision_errors, rel_l2, synchronize, tensors, to_device)
from .. import trace
from ..layouts import layout_specs, layout_variant, write_view
from ..results import Flag
from .handle import CandidateFailed
from .shapes import forward, shape_variants

RUNNABLE = ("values", "special", "edge", "layout", "shapes")
# A norm-wise error against the reference above this is of no precision class (bf16 arithmetic costs a few
# 1e-3): the answer is wrong without computing the oracle and the reduced-precision costs (an ablated call).
FAR_OFF = 0.05


class Variant:
    def __init__(self, cls: str, name: str, inputs: list, ref_out, views: list | None = None):
        self.cls, self.name, self.inputs, self.ref_out = cls, name, inputs, ref_out
        self.views = views      # layout: per input, its view [size, stride, offset] of the slot (None: as is)
        self.finite = None      # special: (reference output with finite values planted, dependence masks)
        self._norm = None       # values: (oracle, reduced-precision costs), computed on the first miss
        self.model = None       # shapes: the reference built for these sizes (else the problem's own)
        self.init_args: list = []
        self.slot = 0           # shapes: which of the job's shape lanes (judge/session.py setup) holds it

    def norm_data(self, ref):
        if self._norm is None:
            oracle = oracle_outputs(ref.model, self.inputs, self.ref_out)
            levels = {}
            if oracle is not None and ref.dtype == torch.float32:
                levels = reduced_precision_errors(ref.model, self.inputs, oracle, ref.device, ref._low_copies)
            self._norm = (oracle, levels)
        return self._norm


def _values(x: torch.Tensor, kind: str, g: torch.Generator) -> torch.Tensor:
    shape, opts = x.shape, {"device": x.device, "generator": g}
    if kind == "signed":
        v = torch.randn(shape, **opts)
    elif kind == "heavy":
        v = torch.randn(shape, **opts) * torch.exp(2.0 * torch.randn(shape, **opts))
    elif kind == "tiny":
        v = torch.randn(shape, **opts) * 1e-3
    else:      # small integers and exact halves
        v = torch.randint(-8, 9, shape, **opts).float() / 2
    return v.to(x.dtype)


EDGE = 64      # elements planted at each end of an input: a vector loop's head and tail steps (blocks up to 64)


def _plant(x: torch.Tensor, values: list[float], g: torch.Generator) -> torch.Tensor:
    """A few random positions, and every one of the first and last EDGE elements (the values in turn): a vector
    loop's head and tail steps, which random positions in millions of elements almost never reach (session 34's
    red team: a NaN dropped by the scalar tail; then by one SSE step two to five elements before the end)."""
    y = x.clone()
    flat = y.view(-1)
    n = flat.numel()
    k, edge = max(1, min(8, n // 1000)), min(EDGE, n // 8)
    ends = torch.cat([torch.arange(0, edge), torch.arange(n - edge, n)]).to(x.device)
    for i, v in enumerate(values):
        flat[torch.randint(0, n, (k,), device=x.device, generator=g)] = v
        flat[ends[i::len(values)]] = v
    return y


def _dependence(ref, base: list, base_out, planted: list, g: torch.Generator, model=None):
    """(base output, masks, base inputs): per output tensor, where it depends on the planted positions of
    `planted` (its non-finite entries), learnt by running the reference (`model`: a shapes variant's) with
    other finite values there."""
    other = []
    for b, p in zip(base, planted):
        if isinstance(p, torch.Tensor) and p.is_floating_point():
            q = b.clone()
            where = ~torch.isfinite(p)
            q[where] = (torch.randn(q.shape, device=q.device, generator=g).to(q.dtype) * 4 + 3)[where]
            other.append(q)
        else:
            other.append(p)
    out2 = ref.run(other) if model is None else forward(model, other, ref.device)
    # depends = differs by more than the comparison's tolerance: an FFT or Winograd convolution spreads a
    # rounding-sized change over the whole image, which is not the output depending on the planted values
    tol = ref.tolerance
    masks = [~((a.double() - b.double()).abs() <= tol + tol * torch.maximum(a.abs(), b.abs()).double())
             for a, b in zip(tensors(base_out), tensors(out2))]
    return base_out, masks, base


def _specials(base: list, g: torch.Generator) -> list:
    """(name, inputs) of the special class: NaN, then +Inf and -Inf, planted in every floating input."""
    return [("nan", _replace(base, lambda x: _plant(x, [float("nan")], g))),
            ("inf", _replace(base, lambda x: _plant(x, [float("inf"), float("-inf")], g)))]


def _replace(inputs: list, fn) -> list:
    """The inputs with every floating tensor (of more than one element) replaced by fn(tensor)."""
    out = []
    for x in inputs:
        out.append(fn(x) if isinstance(x, torch.Tensor) and x.is_floating_point() and x.numel() > 1 else x)
    return out


def classes_for(problem, cfg) -> list[str]:
    """The runnable classes the policy turns on, narrowed by the problem's GENERALISE list."""
    allowed = getattr(problem, "GENERALISE", None)
    on = [c for c in RUNNABLE if cfg.generalise.get(c, "off") != "off"]
    return [c for c in on if allowed is None or c in allowed or c == "edge"]


def make_variants(ref, seed: int) -> list[Variant]:
    """Every variant of the problem with its reference output (once per problem); skipped ones left out."""
    base = ref.trials()[0].inputs
    g = torch.Generator(device=ref.device)
    g.manual_seed(seed)
    wanted = classes_for(ref.problem, ref.cfg)
    made: list[tuple[str, str, list]] = []
    if "values" in wanted:
        for kind in ("signed", "heavy", "tiny", "halves"):
            made.append(("values", kind, _replace(base, lambda x, k=kind: _values(x, k, g))))
    if "special" in wanted:
        made.extend(("special", name, inputs) for name, inputs in _specials(base, g))
    base_out = ref.trials()[0].ref_out
    if "layout" in wanted:
        fresh = ref.inputs(seed ^ 0x1A70)
        for name, views in layout_specs(fresh):
            made.append(("layout", name, [layout_variant(x, v) for x, v in zip(fresh, views)], views))
    edge = getattr(ref.problem, "get_edge_inputs", None)
    if "edge" in wanted and callable(edge):
        for i, inputs in enumerate(edge()):
            made.append(("edge", f"edge {i}", list(to_device(list(inputs), ref.device, ref.dtype))))
    variants = []
    for cls, name, inputs, *views in made:
        try:
            out = ref.run(inputs if views else clone(inputs))     # (clone would make the views contiguous)
            v = Variant(cls, name, inputs, out, views[0] if views else None)
            if cls == "special":
                v.finite = _dependence(ref, base, base_out, inputs, g)
        except Exception:        # the reference rejects it: not a variant of this problem
            continue
        variants.append(v)
    if "shapes" in wanted:
        for slot, (name, inputs, out, model, init) in enumerate(shape_variants(ref, seed ^ 0x5A9E)):
            group = [Variant("shapes", name, inputs, out)]      # with the special values at its sizes: tails
            for kind, planted in _specials(inputs, g) if "special" in wanted else ():
                try:
                    group.append(Variant("special", f"{kind} at {name}", planted, forward(model, planted, ref.device)))
                    group[-1].finite = _dependence(ref, inputs, out, planted, g, model)
                except Exception:        # the reference rejects it: not a variant of this problem
                    group = group[:1]
            for v in group:
                v.model, v.init_args, v.slot = model, init, slot
            variants.extend(group)
    return variants


def same_layout(a: list, b: list) -> bool:
    ta, tb = tensors(a), tensors(b)
    return len(ta) == len(tb) and all(x.shape == y.shape and x.dtype == y.dtype for x, y in zip(ta, tb))


def policy_flags(failed: dict[str, str], cfg) -> list[Flag]:
    """One flag per severity: `generalisation` (error) or `specialised` (warning), naming each failed class."""
    by: dict[str, list[str]] = {}
    for cls, detail in failed.items():
        severity = cfg.generalise.get(cls, "off")
        if severity != "off":
            by.setdefault(severity, []).append(f"{cls}: {detail}")
    return [Flag("generalisation" if sev == "error" else "specialised", sev, "; ".join(items))
            for sev, items in by.items()]


def _send(s, v: Variant, op: str):
    """Variant v's inputs into lane 0 (a layout variant's laid out as its views: the candidate builds the same
    views over its slots), then one call (op "call", or "ablate": compiled results replaced by noise)."""
    ins = s.shape_lanes[v.slot][0] if v.model is not None else s.in_slots
    for slot, x, view in zip(ins.tensors, tensors(v.inputs), v.views or [None] * len(ins.tensors)):
        write_view(slot, x, view)
    synchronize(s.device)
    msg = {"op": op, "views": v.views} | ({"shape": v.slot} if v.model is not None else {})
    try:
        reply, _ = s.cand.call(msg, s.call_timeout(), "generalisation")
    except CandidateFailed as e:
        if e.status != "runtime-error":      # a crash, a timeout or a CUDA error ends the job
            raise
        return f"forward raised {e.message}"
    s.observe(reply)
    return reply


def _verdict(s, v: Variant, reply, ablated: bool = False) -> tuple[str | None, bool]:
    """(why the candidate's answer to v is wrong or None, whether only the norm-wise rule passed it). An
    ablated answer far off the reference in norm is wrong without the oracle (only "still right?" matters)."""
    if isinstance(reply, str):
        return reply, False
    out = s.fetch(reply, out_slots=s.shape_lanes[v.slot][1] if v.model is not None else None)
    if isinstance(out, str):
        return out, False
    out = out[0] if isinstance(v.ref_out, torch.Tensor) else out
    if v.finite is not None:
        return _special_reason(s, v, out), False
    if ablated and math.isfinite(far := rel_l2(out, v.ref_out)) and far > FAR_OFF:
        return f"norm-wise error {far:.2e} against the reference", False
    reason = judge(v.model or s.ref.model, v.inputs, v.ref_out, out, s.ref.tolerance)["reason"]
    if reason is not None and v.cls == "values":
        reason = _normwise_reason(s, v, out, reason)
        return reason, reason is None
    return reason, False


def _normwise_reason(s, v: Variant, out, reason: str) -> str | None:
    """None when the candidate's error over the whole output is of an allowed precision class (see above)."""
    if s.cfg.precision_factor <= 0 or not rel_l2(out, v.ref_out) <= FAR_OFF:
        return reason
    oracle, levels = v.norm_data(s.ref)
    if oracle is None:
        return reason
    ec, er = rel_l2(out, oracle), rel_l2(v.ref_out, oracle)
    if not (math.isfinite(ec) and math.isfinite(er)):
        return reason
    floor = max(er, torch.finfo(tensors(v.ref_out)[0].dtype).eps / 8)
    factor = s.cfg.precision_factor
    if ec <= factor * floor:            # within the precision factor of the reference's own error
        return None
    if any(cost > 1.5 * floor for cost in levels.values()):     # else no level to place it among
        cls = precision_class(ec, er, levels, factor)
        if CLASS_RANK.get(cls, 9) <= CLASS_RANK[s.ref.precision_allowed]:
            return None
        return f"{reason}; norm-wise error vs fp64 {ec:.2e} is {cls}-level (the reference's: {er:.2e})"
    return f"{reason}; norm-wise error vs fp64 {ec:.2e} is {ec / max(er, 1e-300):.1f}x the reference's {er:.2e}"


def _special_reason(s, v: Variant, out) -> str | None:
    """NaN/Inf matched where the output depends on the planted values; elsewhere finite and close (above)."""
    base_out, masks, base = v.finite
    targets, cands = [], []
    for i, (r, c, b, dep) in enumerate(zip(tensors(v.ref_out), tensors(out), tensors(base_out), masks)):
        if not r.is_floating_point() or c.shape != r.shape:
            targets.append(r)
            cands.append(c)
            continue
        fin_r, fin_c = torch.isfinite(r), torch.isfinite(c)
        lost = int((fin_c & ~fin_r & dep).sum())
        if lost:
            return f"output {i}: finite at {lost} positions where the reference is NaN/Inf and depends on them"
        spread = int((~fin_c & fin_r).sum())
        if spread:
            return f"output {i}: NaN/Inf at {spread} positions where the reference is finite"
        flipped = int((torch.isinf(r) & torch.isinf(c) & (r != c)).sum())   # NaN may stand for Inf; -Inf may not
        if flipped:
            return f"output {i}: Inf of the wrong sign at {flipped} positions"
        target = torch.where(fin_r, r, b.to(r.dtype))
        targets.append(target)
        cands.append(torch.where(fin_c, c, target))     # non-finite only where the reference is: allowed
    tol = s.ref.tolerance
    stats = compare(targets, cands, tol, tol)
    if stats["reason"] is None:
        return None
    model = v.model or s.ref.model
    oracle = oracle_outputs(model, v.inputs, v.ref_out)
    base_oracle = s.ref.trials()[0].oracle if v.model is None else oracle_outputs(model, base, base_out)
    if oracle is None or base_oracle is None:
        return stats["reason"]
    both = [torch.where(torch.isfinite(o), o, b) for o, b in zip(tensors(oracle), tensors(base_oracle))]
    return compare(targets, cands, tol, tol, both)["reason"]


def run(s) -> None:
    """The variants on the candidate, through lane 0 like the plain trials. Records per class trials, passed,
    skipped and the first failure in the Correctness; raises the policy's flag per failing class.
    Then, per class that passed, the ablation on its first variant: a candidate can tell a variant from the
    problem's own inputs (a NaN, a negative value in a torch.rand problem) and answer it another way (torch)
    while its kernel is wrong there; if the output stays right with its compiled results replaced by noise,
    the kernel did not compute it, and the class fails."""
    c, ref = s.result.correctness, s.ref
    summary: dict[str, dict] = {}
    first: dict[str, Variant] = {}
    sized: dict[int, bool] = {}        # shapes slot -> the candidate right at those sizes
    for v in ref.variants():
        entry = summary.setdefault(v.cls, {"trials": 0, "passed": 0, "skipped": 0, "detail": ""} |
                                   ({"normwise": 0} if v.cls == "values" else {}))
        if v.model is None and not same_layout(v.inputs, s.in_slots.tensors) or \
                v.model is not None and v.cls != "shapes" and not sized.get(v.slot):
            entry["skipped"] += 1       # (inputs that vary in shape; special values at sizes it is wrong at
            continue                    # already, which the shapes policy judges)
        entry["trials"] += 1
        reason, by_norm = _verdict(s, v, _send(s, v, "call"))
        if by_norm:
            entry["normwise"] += 1
        if v.cls == "shapes":
            sized[v.slot] = reason is None
        if reason is None:
            entry["passed"] += 1
            first.setdefault(v.cls, v)
        elif not entry["detail"]:
            entry["detail"] = f"{v.name} inputs: {reason}"
        trace.mark("judge", f"variant {v.cls} {v.name}: {'passed' if reason is None else 'failed'}")
    if not s.job.get("aa_calibration"):
        for cls, v in first.items():
            entry = summary[cls]
            if entry["passed"] < entry["trials"]:
                continue
            reply = _send(s, v, "ablate")
            trace.mark("judge", f"variant ablation {cls}")
            if isinstance(reply, str):       # raised on noise: a test of its kernel, not a proof (evidence.py)
                why = f"the {reply} with the compiled results replaced by noise (the ablation), so nothing shows " \
                      "the kernel computed them"
            elif _verdict(s, v, reply, ablated=True)[0] is None:
                why = "still right with the compiled results replaced by noise (the ablation): another path " \
                      "answered them, not the kernel"
            else:
                continue
            entry["passed"] -= 1
            entry["detail"] = f"{v.name} inputs: {why}"
    c.variants = summary
    failed = {cls: e["detail"] for cls, e in summary.items() if e["passed"] < e["trials"]}
    for f in policy_flags(failed, s.cfg):
        f.detail += " (replay: this result's seeds, 'variants')"    # never the number: records are read mid-run
        s.flags.add(f)


TRIVIAL = {"the identity": lambda x: x, "abs": torch.abs, "zeros": torch.zeros_like,
           "clamped to [0, inf)": lambda x: x.clamp_min(0)}


def trivial_inputs_reason(ref) -> str | None:
    """kbench lint: a transform of the first input that answers the problem on its own inputs but not on signed
    normal ones (ReLU on torch.rand: the identity). Only where the output has that input's shape."""
    inputs = ref.inputs(ref.seeds["trials"])
    floats = [i for i, x in enumerate(inputs) if isinstance(x, torch.Tensor) and x.is_floating_point()]
    out = ref.run(clone(inputs))
    if not floats or not isinstance(out, torch.Tensor):
        return None
    x = inputs[floats[0]]
    if x.shape != out.shape:
        return None
    g = torch.Generator(device=ref.device)
    g.manual_seed(ref.seeds["variants"])
    signed = list(inputs)
    signed[floats[0]] = _values(x, "signed", g)
    try:
        signed_out = ref.run(clone(signed))
    except Exception:
        return None
    for name, fn in TRIVIAL.items():
        if judge(ref.model, inputs, out, fn(x), ref.tolerance)["reason"] is None and \
                judge(ref.model, signed, signed_out, fn(signed[floats[0]]), ref.tolerance)["reason"] is not None:
            return (f"input {floats[0]} {name} matches the reference on get_inputs() but not on signed inputs: draw "
                    "signed values (torch.randn) so a kernel wrong on them cannot pass")
    return None
