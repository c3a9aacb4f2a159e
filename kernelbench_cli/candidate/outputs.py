"""What the candidate process says of one call's outputs (run by kbench, off the candidate's clock, with
torch functions dispatched without tensor subclasses' hooks: see process.py _deliver)."""
from __future__ import annotations


def describe(torch, outs: list, out, inputs: list, extra: dict, outputs: list, device: str) -> list:
    """[per output: shape, dtype, plain, aliases, address, stride, span bytes], mismatch with the slots."""
    described = []
    own = {t.untyped_storage().data_ptr(): f"input {i}" for i, t in enumerate(inputs) if t.numel()}
    own.update(extra)
    for t in outs:
        if isinstance(t, torch.Tensor):
            span = (sum((n - 1) * st for n, st in zip(t.shape, t.stride())) + 1) * t.element_size() \
                if t.numel() else 0
            described.append([list(t.shape), str(t.dtype).replace("torch.", ""), type(t) is torch.Tensor,
                              own.get(t.untyped_storage().data_ptr(), "") if t.numel() else "",
                              t.data_ptr(), list(t.stride()), span])
        else:
            described.append([[], type(t).__name__, False, "", 0, [], 0])
    if len(outs) != len(outputs) or not isinstance(out, (torch.Tensor, list, tuple)):
        return [described, f"{len(outs)} output(s), expected {len(outputs)}"]
    for i, (t, slot) in enumerate(zip(outs, outputs)):
        if not isinstance(t, torch.Tensor) or t.shape != slot.shape or t.dtype != slot.dtype:
            return [described, f"output {i} is {described[i][1]} {tuple(described[i][0])}, expected "
                               f"{str(slot.dtype).replace('torch.', '')} {tuple(slot.shape)}"]
        if t.device.type != device:
            return [described, f"output {i} on {t.device}, expected {device}"]
    if device == "cuda":
        for t, slot in zip(outs, outputs):
            slot.copy_(t)
    return [described, ""]


def flatten(obj) -> list:
    if isinstance(obj, (list, tuple)):
        return [t for o in obj for t in flatten(o)]
    return [obj]
