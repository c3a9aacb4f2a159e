"""Non-contiguous layouts of the same values, as both processes build them: the reference process for the
generalisation trials' layout class (judge/generalise.py), the candidate process over its own input slots,
the build process when it warms a Triton candidate on every specialisation.

A layout is, per input, a view [size, stride, offset] of a storage (None: the input as it is): transposed
(last two dims swapped in memory), channels-last (4-D), strided (every other element of a storage twice as
long along the last dim), sliced (rows of a storage twice as wide, 16 bytes in: unit stride, a row pitch
larger than the row, a storage offset) and expanded (stride 0 along the first dim, as a broadcast tensor
is); on the CPU also offset (every row one element off a 16-byte boundary, x[:, 1:] of a wider matrix) and
odd pitch (rows at every alignment in turn). Not made on a GPU: offsets that break 16-byte alignment (a
vector load there is a fault that ends the job, not a wrong answer); nowhere: stride 0 in inner dims. The input
slots of lane 0 have room for two copies of their input (ROOM) so the strided view fits; the candidate
builds the same view over its own mapping of the slot, so no buffer is mapped after its sandbox."""
from __future__ import annotations

import math

import torch

ROOM = 2        # lane 0's input slots hold this many copies of their input: room for the strided view


def _contiguous_strides(shape) -> list[int]:
    strides, acc = [], 1
    for n in reversed(list(shape)):
        strides.append(acc)
        acc *= max(int(n), 1)
    return strides[::-1]


def _permuted(shape, perm) -> list:
    """The view of shape `shape` whose dims lie in memory in `perm` order."""
    inner = _contiguous_strides([shape[p] for p in perm])
    stride = [0] * len(shape)
    for k, p in enumerate(perm):
        stride[p] = inner[k]
    return [list(shape), stride, 0]


def _strided(shape) -> list:
    stride = _contiguous_strides(list(shape[:-1]) + [2 * shape[-1]])
    stride[-1] = 2
    return [list(shape), stride, 0]


def _sliced(shape, element_size: int) -> list:
    """A slice of a storage twice as wide along the last dim, 16 bytes in: rows apart by more than their
    length, unit stride within them, a storage offset that keeps 16-byte alignment."""
    stride = _contiguous_strides(list(shape[:-1]) + [2 * shape[-1]])
    offset = max(16 // element_size, 1)
    return [list(shape), stride, offset if offset <= shape[-1] else 0]


def _misaligned(shape, pitch_extra: int, offset: int) -> list:
    """Unit stride in the last dim, rows 2n + pitch_extra apart (2-D and up), starting `offset` elements in:
    offset 1 with an even pitch puts every row one element off a 16-byte boundary (x[:, 1:] of a wider
    matrix); an odd pitch puts the rows at every alignment in turn."""
    wide = list(shape[:-1]) + [2 * shape[-1] + (pitch_extra if len(shape) > 1 else 0)]
    stride = _contiguous_strides(wide)
    stride[-1] = 1
    return [list(shape), stride, offset]


def _expanded(shape) -> list:
    stride = _contiguous_strides(shape)
    stride[0] = 0
    return [list(shape), stride, 0]


def layout_specs(inputs: list) -> list[tuple[str, list]]:
    """(name, per-input view or None) for each layout the problem's floating inputs allow."""
    def floating(x, min_dim):
        return isinstance(x, torch.Tensor) and x.is_floating_point() and x.numel() > 1 and x.dim() >= min_dim

    def each(make, min_dim, extra=lambda x: True):
        views = [make(x) if floating(x, min_dim) and extra(x) else None for x in inputs]
        return views if any(v is not None for v in views) else None

    out = [("transposed", each(lambda x: _permuted(x.shape, list(range(x.dim() - 2)) + [x.dim() - 1, x.dim() - 2]), 2)),
           ("channels-last", each(lambda x: _permuted(x.shape, [0, 2, 3, 1]), 4, lambda x: x.dim() == 4)),
           ("strided", each(lambda x: _strided(x.shape), 1)),
           ("sliced", each(lambda x: _sliced(x.shape, x.element_size()), 2)),
           # (on the CPU only: on a GPU a kernel's vector load at such an address faults and ends the job)
           ("offset", each(lambda x: _misaligned(x.shape, 0, 1), 1, lambda x: x.device.type == "cpu")),
           ("odd pitch", each(lambda x: _misaligned(x.shape, 1, 0), 2, lambda x: x.device.type == "cpu")),
           ("expanded", each(lambda x: _expanded(x.shape), 2, lambda x: x.shape[0] > 1))]
    fits = lambda views: all(v is None or storage_numel(v) <= ROOM * max(x.numel(), 1)  # noqa: E731
                             for x, v in zip(inputs, views))          # (lane 0's room: a tall matrix's odd pitch may not)
    return [(name, views) for name, views in out if views is not None and fits(views)]


def storage_numel(view: list) -> int:
    size, stride, offset = view
    return offset + sum((n - 1) * s for n, s in zip(size, stride)) + 1 if math.prod(size) else offset


def view_of(slot: torch.Tensor, view: list | None) -> torch.Tensor:
    """The view over slot's storage (raises if the storage is too small)."""
    return slot if view is None else slot.as_strided(*view)


def _compact(x: torch.Tensor, view: list) -> tuple[torch.Tensor, list]:
    """x's values at the positions the view stores once (index 0 along its stride-0 dims) and that view."""
    size, stride, offset = view
    for d, s in enumerate(stride):
        if s == 0 and size[d] > 1:
            x = x.narrow(d, 0, 1)
    return x, [list(x.shape), stride, offset]


def write_view(slot: torch.Tensor, x: torch.Tensor, view: list | None) -> None:
    """Write x's values into slot so that view_of(slot, view) shows them; the storage the view skips (a
    strided view's gaps, an expanded view's unread rows) is NaN, so a kernel that ignores strides reads NaN."""
    if view is None:
        slot.copy_(x)
        return
    flat = slot.as_strided([slot.untyped_storage().nbytes() // slot.element_size()], [1], 0)
    flat.fill_(float("nan"))
    values, compact = _compact(x, view)
    flat.as_strided(*compact).copy_(values)


def make_view(x: torch.Tensor, view: list | None) -> torch.Tensor:
    """x's values laid out as the view, over a storage of its own (NaN where the view does not look)."""
    if view is None:
        return x
    slot = torch.empty(storage_numel(view), dtype=x.dtype, device=x.device)
    write_view(slot, x, view)
    return view_of(slot, view)


def layout_variant(x: torch.Tensor, view: list | None) -> torch.Tensor:
    """The input a layout variant hands over: x's values as that view can show them, laid out as it."""
    return make_view(layout_inputs(x, view), view)


def layout_inputs(x: torch.Tensor, view: list | None) -> torch.Tensor:
    """The values a layout variant can show: an expanded view's input is constant along its stride-0 dims."""
    if view is None:
        return x
    values, _ = _compact(x, view)
    return values.expand(x.shape)
