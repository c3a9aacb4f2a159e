"""Non-contiguous layouts of the same values, as both processes build them: the reference process for the
generalisation trials' layout class (judge/generalise.py), the candidate process over its own input slots."""
from __future__ import annotations

import torch


def permuted_view(x: torch.Tensor, perm: list[int] | None, storage: torch.Tensor | None = None) -> torch.Tensor:
    """x's values with its dims laid out in memory in `perm` order: a view of `storage` (x.permute(perm) made
    contiguous, or given) permuted back to x's shape."""
    if perm is None:
        return x
    storage = x.permute(perm).contiguous() if storage is None else storage
    inverse = sorted(range(len(perm)), key=perm.__getitem__)
    return storage.permute(inverse)


def layout_perms(inputs: list) -> list[tuple[str, list]]:
    """(name, per-input permutation) for each non-contiguous layout the floating inputs of 2+ dims allow."""
    out = []
    dims = [x.dim() if isinstance(x, torch.Tensor) and x.is_floating_point() and x.numel() > 1 else 0 for x in inputs]
    if any(d >= 2 for d in dims):
        out.append(("transposed", [list(range(d - 2)) + [d - 1, d - 2] if d >= 2 else None for d in dims]))
    if any(d == 4 for d in dims):
        out.append(("channels-last", [[0, 2, 3, 1] if d == 4 else None for d in dims]))
    return out
