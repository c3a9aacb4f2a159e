"""The shapes class of the generalisation trials (judge/generalise.py): the problem's sizes, where
get_inputs() / get_init_inputs() read them from module-level integers (>= 16: batch, tokens, channels; not a
kernel size, a stride or a dim) or as its SIZES list names them, all changed at once to the prime just below
and to 2^k - 1 at about half. Never larger, so within the problem's memory."""
from __future__ import annotations

import torch

from ..correctness import clone, construct, make_inputs, synchronize, tf32_off


def size_names(problem) -> list[str]:
    """The module-level sizes get_inputs() and get_init_inputs() read (see above), or the problem's SIZES."""
    if hasattr(problem, "SIZES"):
        return [n for n in problem.SIZES if isinstance(getattr(problem, n, None), int)]
    names = []
    for fn in (getattr(problem, "get_inputs", None), getattr(problem, "get_init_inputs", None)):
        for n in getattr(getattr(fn, "__code__", None), "co_names", ()):
            v = getattr(problem, n, None)
            if type(v) is int and v >= 16 and n not in names:
                names.append(n)
    return names


def _prime_below(n: int) -> int:
    m = n - 1
    while m > 2 and any(m % d == 0 for d in range(2, int(m ** 0.5) + 1)):
        m -= 1
    return m


def forward(model, inputs: list, device: str):
    """The reference's output on copies of `inputs`, as its trials compute it (no grad, no TF32), finished."""
    with torch.no_grad(), tf32_off():
        out = model(*clone(inputs))
    synchronize(device)
    return out


SHAPE_KINDS = {"prime below": _prime_below, "2^k-1 at half": lambda n: (1 << max(2, (n // 2).bit_length() - 1)) - 1}


def shape_variants(ref, seed: int) -> list:
    """(name, inputs, reference output, model, init args) per kind of new sizes the reference accepts."""
    problem, names = ref.problem, size_names(ref.problem)
    made = []
    for kind, fn in SHAPE_KINDS.items() if names else ():
        saved = {n: getattr(problem, n) for n in names}
        sizes = {n: fn(v) for n, v in saved.items()}
        try:
            for n, v in sizes.items():
                setattr(problem, n, v)
            init = list(problem.get_init_inputs())
            model = construct(problem.Model, init, ref.device, ref.dtype, ref.seeds["init"])
            inputs = make_inputs(problem, seed, ref.device, ref.dtype)
            out = forward(model, inputs, ref.device)
        except Exception:            # the reference does not run at these sizes: not a variant of it
            continue
        finally:
            for n, v in saved.items():
                setattr(problem, n, v)
        label = ", ".join(f"{n}={v}" for n, v in sizes.items())
        made.append((f"{kind} ({label})", inputs, out, model, init))
    return made
