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
