"""No custom work, disguised: torch computes the answer, and the kernel is handed a tensor subclass whose
data_ptr() points at that answer, so the launch "computes" it by copying. Caught: the launch refuses a tensor
subclass (forward raises); without that, library-heavy (the time is aten's)."""
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def copy_kernel(src_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(out_ptr + offs, tl.load(src_ptr + offs, mask=offs < n), mask=offs < n)


class Answer(torch.Tensor):
    def data_ptr(self):
        return self.answer.data_ptr()


class ModelNew(nn.Module):
    def forward(self, x, y):
        src = x.as_subclass(Answer)
        src.answer = torch.relu(x + y)
        out = torch.empty_like(x)
        copy_kernel[(triton.cdiv(x.numel(), 1 << 16),)](src, out, x.numel(), BLOCK=1 << 16)
        return out
