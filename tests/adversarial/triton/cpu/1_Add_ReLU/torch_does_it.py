"""No custom work: a real Triton launch (it copies x into a scratch buffer) so the launch count is
satisfied, while torch computes the answer. Caught: no-custom-kernel (the ablation puts noise over what the
launch wrote; the output stays right) and library-heavy (the call's time is aten time)."""
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def copy_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=offs < n), mask=offs < n)


class ModelNew(nn.Module):
    def forward(self, x, y):
        scratch = torch.empty(1024, device=x.device, dtype=x.dtype)
        copy_kernel[(1,)](x, scratch, 1024, BLOCK=1024)
        return torch.relu(x + y)
